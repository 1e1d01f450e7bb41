package bag_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/fastwam/actionexpert/bag"
)

// libraryCount reads data with the MCAP library's own unindexed reader, to
// show that a built file is valid MCAP, and returns its message count.
func libraryCount(t *testing.T, data []byte) int {
	t.Helper()
	r, err := mcap.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	it, err := r.Messages(mcap.UsingIndex(false))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var m mcap.Message
	for {
		_, _, _, err := it.NextInto(&m)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatalf("the MCAP library rejects the built file: %v", err)
		}
		n++
	}
}

// readNames opens path and returns the first byte-string of every message
// (up to a NUL), in the order read, and the reader's peak held bytes.
func readNames(t *testing.T, path string, opts bag.ReaderOptions) ([]string, int64, error) {
	t.Helper()
	r, err := bag.OpenWith(t.Context(), path, opts)
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	var names []string
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			return names, bag.PeakHeldBytes(r), err
		}
		name, _, _ := bytes.Cut(m.Data, []byte{0})
		names = append(names, fmt.Sprintf("%d:%s", m.LogTime.UnixNano(), name))
	}
	if h := bag.HeldBytes(r); h != 0 {
		t.Errorf("%d decompressed bytes still held after the last message", h)
	}
	return names, bag.PeakHeldBytes(r), nil
}

// TestTiedChunksHeldOneAtATime is issue 8's bomb scaled down: eight zstd
// chunks of zeros (1 MiB each instead of 256 MiB) at the same log time,
// then chunks that follow each other in time. The reader must return them
// in file order while holding one chunk at a time.
func TestTiedChunksHeldOneAtATime(t *testing.T) {
	const zeros = 1 << 20
	for _, summary := range []bool{true, false} {
		t.Run(fmt.Sprintf("summary=%v", summary), func(t *testing.T) {
			b := newBuilder(t)
			b.schemaChannel(1, "/video_kv_cache", "cdr")
			var want []string
			for i := range 8 {
				data := append([]byte(fmt.Sprintf("tie%d\x00", i)), make([]byte, zeros)...)
				b.chunk(true, nil, bmsg{1, 1000, data})
				want = append(want, fmt.Sprintf("1000:tie%d", i))
			}
			for i := range 3 {
				at := uint64(2000 + 10*i)
				data := append([]byte(fmt.Sprintf("seq%d\x00", i)), make([]byte, zeros/2)...)
				b.chunk(true, nil, bmsg{1, at, data}, bmsg{1, at + 1, []byte("next\x00")})
				want = append(want, fmt.Sprintf("%d:seq%d", at, i), fmt.Sprintf("%d:next", at+1))
			}
			data := b.finish(summary)
			if len(data) > 8*zeros/100 {
				t.Fatalf("the built file is %d bytes: the chunks did not compress", len(data))
			}
			if n := libraryCount(t, data); n != len(want) {
				t.Fatalf("the MCAP library reads %d messages, want %d", n, len(want))
			}
			got, peak, err := readNames(t, writeTemp(t, "bomb.mcap", data), bag.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("order:\n got %v\nwant %v", got, want)
			}
			if peak < zeros || peak > int64(b.largest) {
				t.Fatalf("peak held decompressed bytes %d, want one chunk: between %d and the largest chunk's %d", peak, zeros, b.largest)
			}
			// The declared size is bounded by the reader's limit.
			_, _, err = readNames(t, writeTemp(t, "bomb.mcap", data), bag.ReaderOptions{MaxChunkBytes: zeros})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than the %d-byte limit", zeros)) {
				t.Fatalf("limit below a chunk: %v", err)
			}
		})
	}
}

// TestChunkOrderTiesAndOverlaps checks the order (log time, file order of
// the chunk, position in the chunk) when chunks overlap, tie and are not
// in time order in the file, for indexed and summary-less files; the
// expected order is written out by hand from that rule.
func TestChunkOrderTiesAndOverlaps(t *testing.T) {
	m := func(at uint64, name string) bmsg { return bmsg{1, at, []byte(name + "\x00")} }
	for _, summary := range []bool{true, false} {
		for _, zstdc := range []bool{false, true} {
			t.Run(fmt.Sprintf("summary=%v,zstd=%v", summary, zstdc), func(t *testing.T) {
				b := newBuilder(t)
				b.schemaChannel(1, "/t", "cdr")
				b.chunk(zstdc, nil, m(5, "a0"), m(10, "a1"))
				b.chunk(zstdc, nil, m(3, "b0"), m(5, "b1"))
				b.chunk(zstdc, nil, m(5, "c0"))
				b.chunk(zstdc, nil, m(5, "d0"), m(4, "d1"))
				b.chunk(zstdc, nil, m(10, "e0"), m(2, "e1"))
				data := b.finish(summary)
				if n := libraryCount(t, data); n != 9 {
					t.Fatalf("the MCAP library reads %d messages, want 9", n)
				}
				got, _, err := readNames(t, writeTemp(t, "order.mcap", data), bag.ReaderOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := "2:e1 3:b0 4:d1 5:a0 5:b1 5:c0 5:d0 10:a1 10:e0"
				if strings.Join(got, " ") != want {
					t.Fatalf("order:\n got %s\nwant %s", strings.Join(got, " "), want)
				}
			})
		}
	}
}

// cutSummary turns a closed MCAP file into one without summary, as a
// recording that was not closed leaves it once its end is repaired.
func cutSummary(t *testing.T, data []byte) []byte {
	t.Helper()
	footer := len(data) - 8 - 9 - 20
	start := int(leU64(data[footer+9:]))
	if start <= 0 || start > footer {
		t.Fatalf("no summary to cut (summary start %d)", start)
	}
	b := newBuilder(t)
	b.buf = bytes.Clone(data[:start])
	f := make([]byte, 20)
	b.record(mcap.OpFooter, f)
	return append(b.buf, mcap.Magic...)
}

func leU64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// TestSummarylessBag reads a bag written by Writer whose summary is cut
// off: every message in log-time order and the topics, with their types,
// QoS and message counts, known when the file is opened.
func TestSummarylessBag(t *testing.T) {
	for _, c := range []bag.Compression{bag.CompressionNone, bag.CompressionZstd, bag.CompressionLZ4} {
		t.Run(string(c)+"_", func(t *testing.T) {
			dir := t.TempDir() + "/s"
			want := writeBag(t, dir, bag.WriterOptions{Compression: c, ChunkSize: 200}, 4)
			full := readBytes(t, dir+"/s_0.mcap")
			path := writeTemp(t, "cut.mcap", cutSummary(t, full))
			r, err := bag.OpenWith(t.Context(), path, bag.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ref, err := bag.Open(dir + "/s_0.mcap")
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			got, wantTopics := r.Topics(), ref.Topics()
			if len(got) != 4 || fmt.Sprint(got) != fmt.Sprint(wantTopics) {
				t.Fatalf("topics of the summary-less file:\n%+v\nwant those of the full file:\n%+v", got, wantTopics)
			}
			for _, tp := range got {
				if tp.MessageCount != 3 {
					t.Errorf("topic %s: %d messages counted, want 3", tp.Name, tp.MessageCount)
				}
			}
			checkMessages(t, readAll(t, r), want)
		})
	}
}

// TestUnchunkedSummarylessFile reads messages stored outside chunks in a
// file without summary: in file order, which must be log-time order,
// topics known at open. A message earlier than the one before it is
// refused, naming both times: such a file has no index to sort by.
func TestUnchunkedSummarylessFile(t *testing.T) {
	build := func(times ...uint64) []byte {
		b := newBuilder(t)
		b.schemaChannel(1, "/u", "cdr")
		for _, at := range times {
			b.record(mcap.OpMessage, messageBody(bmsg{1, at, []byte(fmt.Sprintf("m%d\x00", at))}))
		}
		b.schemaChannel(2, "/late", "cdr")
		b.record(mcap.OpMessage, messageBody(bmsg{2, 10, []byte("late\x00")}))
		return b.finish(false)
	}
	data := build(3, 7, 9)
	if n := libraryCount(t, data); n != 4 {
		t.Fatalf("the MCAP library reads %d messages, want 4", n)
	}
	path := writeTemp(t, "u.mcap", data)
	r, err := bag.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	topics := r.Topics()
	r.Close()
	if len(topics) != 2 || topics[0].Name != "/u" || topics[0].MessageCount != 3 || topics[1].Name != "/late" || topics[1].MessageCount != 1 {
		t.Fatalf("topics %+v, want /u (3 messages) and /late (1)", topics)
	}
	got, _, err := readNames(t, path, bag.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "3:m3 7:m7 9:m9 10:late"; strings.Join(got, " ") != want {
		t.Fatalf("got %s, want %s", strings.Join(got, " "), want)
	}
	for _, withSummary := range []bool{false, true} {
		b := newBuilder(t)
		b.schemaChannel(1, "/u", "cdr")
		for _, at := range []uint64{7, 3} {
			b.record(mcap.OpMessage, messageBody(bmsg{1, at, []byte("m\x00")}))
		}
		path := writeTemp(t, "o.mcap", b.finish(withSummary))
		if _, _, err := readNames(t, path, bag.ReaderOptions{}); err == nil ||
			!strings.Contains(err.Error(), "message on /u at 3 ns comes after one at 7 ns") {
			t.Fatalf("out of order (summary %v): %v", withSummary, err)
		}
	}
}

// TestNonCDRChannelRefused: a channel whose message encoding is not cdr is
// refused by name, whether the file has a summary or is scanned, and
// whether the channel is announced at the top level or only in a chunk;
// leaving the topic out reads the rest.
func TestNonCDRChannelRefused(t *testing.T) {
	const wantErr = `topic /video_kv_cache (channel 2) has message encoding "json", want "cdr"`
	for _, summary := range []bool{true, false} {
		for _, inChunk := range []bool{false, true} {
			t.Run(fmt.Sprintf("summary=%v,in_chunk=%v", summary, inChunk), func(t *testing.T) {
				b := newBuilder(t)
				b.schemaChannel(1, "/ok", "cdr")
				var pre []byte
				if inChunk {
					pre = record(nil, mcap.OpChannel, channelBody(2, 1, "/video_kv_cache", "json"))
				} else {
					b.schemaChannel(2, "/video_kv_cache", "json")
				}
				b.chunk(true, pre, bmsg{1, 1, []byte("ok\x00")}, bmsg{2, 2, []byte(`{"a":1}`)})
				data := b.finish(summary)
				path := writeTemp(t, "json.mcap", data)
				_, _, err := readNames(t, path, bag.ReaderOptions{})
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("got %v, want an error containing %s", err, wantErr)
				}
				got, _, err := readNames(t, path, bag.ReaderOptions{Topics: []string{"/ok"}})
				if err != nil || strings.Join(got, " ") != "1:ok" {
					t.Fatalf("with /ok only: %v, %v", got, err)
				}
			})
		}
	}
}

// TestHostileChunkIndexes: an index listing one chunk twice, and a zstd
// chunk announcing more than its bytes can expand to.
func TestHostileChunkIndexes(t *testing.T) {
	b := newBuilder(t)
	b.schemaChannel(1, "/t", "cdr")
	b.chunk(false, nil, bmsg{1, 1, []byte("x\x00")})
	b.indexes = append(b.indexes, b.indexes[0])
	_, _, err := readNames(t, writeTemp(t, "dup.mcap", b.finish(true)), bag.ReaderOptions{})
	if err == nil || !strings.Contains(err.Error(), "overlap: each chunk must be indexed once") {
		t.Fatalf("chunk indexed twice: %v", err)
	}

	b = newBuilder(t)
	b.schemaChannel(1, "/t", "cdr")
	b.chunk(true, nil, bmsg{1, 1, []byte("x\x00")})
	data := b.finish(false)
	// Patch the chunk's uncompressed size (after its two times) to 1 GiB - 1.
	at := chunkAfterHeader(t, data) + 9 + 16
	for i, v := range []byte{0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0} {
		data[at+i] = v
	}
	_, _, err = readNames(t, writeTemp(t, "ratio.mcap", data), bag.ReaderOptions{})
	if err == nil || !strings.Contains(err.Error(), "cannot hold the 1073741823 bytes announced") {
		t.Fatalf("zstd chunk announcing 1 GiB: %v", err)
	}
}

// chunkAfterHeader returns the offset of the first chunk record, walking
// the records from the header.
func chunkAfterHeader(t *testing.T, data []byte) int {
	t.Helper()
	for pos := 8; pos+9 <= len(data); pos += 9 + int(leU64(data[pos+1:])) {
		if data[pos] == byte(mcap.OpChunk) {
			return pos
		}
	}
	t.Fatal("no chunk")
	return 0
}

// TestCancellation: a cancelled context stops the scan of a summary-less
// file at open, and Next, which leaves the reader usable.
func TestCancellation(t *testing.T) {
	dir := t.TempDir() + "/c"
	want := writeBag(t, dir, bag.WriterOptions{Compression: bag.CompressionZstd, ChunkSize: 200}, 4)
	full := readBytes(t, dir+"/c_0.mcap")
	cut := writeTemp(t, "cut.mcap", cutSummary(t, full))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := bag.OpenWith(ctx, cut, bag.ReaderOptions{}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "scan stopped at offset") {
		t.Fatalf("open with a cancelled context: %v", err)
	}
	r, err := bag.OpenWith(t.Context(), cut, bag.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a cancelled context: %v", err)
	}
	for m, err := range r.Messages(ctx) {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Messages with a cancelled context: %v, %v", m, err)
		}
	}
	checkMessages(t, readAll(t, r), want)
}

// TestManyChannelsBoundedMemory: 65,535 channels (every id MCAP has) of one
// 4 KiB schema cost memory in proportion to the file, not one copy of the
// schema per channel (268 MB) nor a merged list grown topic by topic.
func TestManyChannelsBoundedMemory(t *testing.T) {
	b := newBuilder(t)
	s := binary.LittleEndian.AppendUint16(nil, 2)
	s = appendStr(appendStr(s, "a/msg/B"), "ros2msg")
	b.record(mcap.OpSchema, appendStr(s, strings.Repeat("uint8 x\n", 512)))
	for id := 1; id <= 65535; id++ {
		b.record(mcap.OpChannel, channelBody(uint16(id), 2, fmt.Sprintf("/t%05d", id), "cdr"))
	}
	b.chunk(false, nil, bmsg{1, 5, []byte{0, 1, 0, 0}})
	path := writeTemp(t, "channels.mcap", b.finish(true))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := bag.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	topics := r.Topics()
	runtime.ReadMemStats(&after)
	r.Close()
	if len(topics) != 65535 || len(topics[7].Definition) != 4096 {
		t.Fatalf("%d topics", len(topics))
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
		t.Fatalf("opening allocated %d MB, want under 48 MB for a %d MB file", got>>20, len(b.buf)>>20)
	}
}
