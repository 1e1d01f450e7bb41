package bag

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/foxglove/mcap/go/mcap"
)

// seedFile writes a tiny MCAP file in memory with the MCAP library: two
// channels (cdr), a few messages (not in log-time order when chunked), one tie, and
// nothing the reader does not look at (no metadata, no summary offsets,
// a one-line schema), so that seeds stay small: the fuzzing engine
// minimises every new input it finds, which takes time in proportion to
// the input's size.
func seedFile(f testing.TB, opts mcap.WriterOptions) []byte {
	f.Helper()
	var buf bytes.Buffer
	opts.OverrideLibrary = true
	opts.SkipSummaryOffsets = true
	opts.IncludeCRC = true
	w, err := mcap.NewWriter(&buf, &opts)
	if err != nil {
		f.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(w.WriteHeader(&mcap.Header{Profile: "ros2"}))
	must(w.WriteSchema(&mcap.Schema{ID: 1, Name: "a/msg/B", Encoding: "ros2msg", Data: []byte("uint8 x\n")}))
	must(w.WriteChannel(&mcap.Channel{ID: 1, SchemaID: 1, Topic: "/a", MessageEncoding: "cdr"}))
	must(w.WriteChannel(&mcap.Channel{ID: 2, SchemaID: 1, Topic: "/b", MessageEncoding: "cdr"}))
	times := []uint64{30, 10, 20, 20}
	if !opts.Chunked {
		// Messages outside chunks must come in log-time order.
		times = []uint64{10, 20, 20, 30}
	}
	for i, at := range times {
		must(w.WriteMessage(&mcap.Message{ChannelID: uint16(1 + i%2), Sequence: uint32(i), LogTime: at, PublishTime: at,
			Data: []byte{0, 1, 0, 0, byte(i)}}))
	}
	must(w.Close())
	return buf.Bytes()
}

// summaryless cuts the summary off an MCAP file: what a recording that
// was not closed properly leaves once its footer is repaired (data end
// record, then a footer without summary).
func summaryless(tb testing.TB, data []byte) []byte {
	tb.Helper()
	footer := len(data) - 8 - 9 - 20
	start := binary.LittleEndian.Uint64(data[footer+9:])
	if start == 0 || start > uint64(footer) {
		tb.Fatalf("no summary to cut (summary start %d)", start)
	}
	out := bytes.Clone(data[:start])
	out = append(out, byte(mcap.OpFooter))
	out = binary.LittleEndian.AppendUint64(out, 20)
	out = append(out, make([]byte, 20)...)
	return append(out, mcap.Magic...)
}

// TestWriteFuzzCorpus writes the seed corpus of FuzzBagReader to
// testdata/fuzz/FuzzBagReader when BAG_WRITE_FUZZ_CORPUS is set; the
// corpus is committed, so that a cold fuzzing run starts from valid bags
// without writing any.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("BAG_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set BAG_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz/FuzzBagReader")
	}
	chunked := func(c mcap.CompressionFormat, size int64) mcap.WriterOptions {
		return mcap.WriterOptions{Chunked: true, Compression: c, ChunkSize: size}
	}
	seeds := map[string][]byte{
		"indexed":              seedFile(t, chunked(mcap.CompressionNone, 1<<10)),
		"small_chunks":         seedFile(t, chunked(mcap.CompressionNone, 16)),
		"zstd":                 seedFile(t, chunked(mcap.CompressionZSTD, 1<<10)),
		"lz4_small_chunks":     seedFile(t, chunked(mcap.CompressionLZ4, 16)),
		"summaryless_zstd":     summaryless(t, seedFile(t, chunked(mcap.CompressionZSTD, 16))),
		"summaryless_none":     summaryless(t, seedFile(t, chunked(mcap.CompressionNone, 16))),
		"unchunked":            seedFile(t, mcap.WriterOptions{}),
		"unchunked_no_summary": summaryless(t, seedFile(t, mcap.WriterOptions{})),
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzBagReader")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFuzzSeedsAreValid reads every committed seed of FuzzBagReader: each
// must be a valid file whose four messages all read, or the fuzzer would
// start from rejected inputs.
func TestFuzzSeedsAreValid(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzBagReader", "*"))
	if err != nil || len(paths) < 8 {
		t.Fatalf("%d seeds (%v), want 8", len(paths), err)
	}
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		quoted, ok := strings.CutPrefix(strings.TrimSpace(string(text)), "go test fuzz v1\n[]byte(")
		body, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
		if !ok || err != nil {
			t.Fatalf("%s is not a corpus file of one []byte: %v", p, err)
		}
		r, err := openFile(t.Context(), bytes.NewReader([]byte(body)), int64(len(body)), p, 1<<16, nil)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for ; ; n++ {
			if _, err := r.nextMessage(t.Context()); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
		}
		r.close()
		if n != 4 {
			t.Errorf("%s: %d messages, want 4", p, n)
		}
	}
}

// FuzzBagReader opens arbitrary bytes as an MCAP file and reads every
// message. Any input must give messages or an error: no panic, no hang, no
// allocation beyond the 64 KiB limit given to the reader, log-time order
// for a file read through a chunk index, and nothing held at the end. The
// seeds are the committed corpus (see TestWriteFuzzCorpus); the input is
// read from memory.
func FuzzBagReader(f *testing.F) {
	const limit = 64 << 10
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		r, err := openFile(ctx, bytes.NewReader(data), int64(len(data)), "fuzz.mcap", limit, nil)
		if err != nil {
			return
		}
		defer r.close()
		// Every message takes at least a record header in the file or in a
		// chunk of at most limit bytes; a bound keeps a bug from hanging.
		var last uint64
		for n := 0; n <= len(data)+limit; n++ {
			m, err := r.nextMessage(ctx)
			if errors.Is(err, io.EOF) {
				if r.held != 0 {
					t.Fatalf("%d decompressed bytes still held after the last message", r.held)
				}
				return
			}
			if err != nil {
				return
			}
			// With an index, messages must come in log-time order.
			if !r.linear && m.logTime < last {
				t.Fatalf("message at %d ns after one at %d ns", m.logTime, last)
			}
			last = m.logTime
			if r.held < 0 || r.held > r.peakHeld {
				t.Fatalf("held %d decompressed bytes, peak %d", r.held, r.peakHeld)
			}
			if !m.LogTime.Equal(nanoTime(m.logTime)) {
				t.Fatalf("LogTime %v does not match %d ns", m.LogTime, m.logTime)
			}
		}
		t.Fatal("the reader did not stop")
	})
}
