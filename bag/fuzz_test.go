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
	"testing"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/fastwam/actionexpert/msgs"
)

// seedBag writes a small bag with the given options and returns its MCAP
// bytes. The schemas are one-line stand-ins so that seeds stay small and
// the fuzzer spends its time on structure, not on schema text.
func seedBag(f testing.TB, opts WriterOptions) []byte {
	f.Helper()
	opts.Definition = func(rosType string) (string, error) { return "uint8 x\n", nil }
	dir := filepath.Join(f.TempDir(), "seed")
	w, err := Create(dir, opts)
	if err != nil {
		f.Fatal(err)
	}
	if err := w.AddTopic("/a", msgs.TypeActionChunk, DefaultQoS()); err != nil {
		f.Fatal(err)
	}
	if err := w.AddTopic("/d", msgs.TypeDiagnosticArray, LatchedQoS()); err != nil {
		f.Fatal(err)
	}
	for i, at := range []int64{30, 10, 20} {
		a := msgs.ActionChunk{Seq: uint64(i), Actions: []msgs.ActionRow{{Values: []float32{1, 2, 3}}}, Backend: "cpu"}
		d := msgs.DiagnosticArray{Status: []msgs.DiagnosticStatus{{Name: "x", Values: []msgs.KeyValue{{Key: "k", Value: "v"}}}}}
		for topic, m := range map[string]interface{ MarshalCDR() ([]byte, error) }{"/a": &a, "/d": &d} {
			b, err := m.MarshalCDR()
			if err != nil {
				f.Fatal(err)
			}
			if err := w.Write(topic, time.Unix(0, at), b); err != nil {
				f.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "seed_0.mcap"))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// unchunkedSeed is an MCAP file without chunks or summary indexes, which
// the reader scans linearly.
func unchunkedSeed(f testing.TB) []byte {
	f.Helper()
	var buf bytes.Buffer
	w, err := mcap.NewWriter(&buf, &mcap.WriterOptions{Chunked: false})
	if err != nil {
		f.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(w.WriteHeader(&mcap.Header{Profile: "ros2"}))
	must(w.WriteSchema(&mcap.Schema{ID: 1, Name: msgs.TypeActionRow, Encoding: "ros2msg", Data: []byte("float32[] values\n")}))
	must(w.WriteChannel(&mcap.Channel{ID: 1, SchemaID: 1, Topic: "/row", MessageEncoding: "cdr"}))
	row := msgs.ActionRow{Values: []float32{1.5}}
	data, err := row.MarshalCDR()
	must(err)
	for _, at := range []uint64{5, 3} {
		must(w.WriteMessage(&mcap.Message{ChannelID: 1, LogTime: at, PublishTime: at, Data: data}))
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
	seeds := map[string][]byte{
		"indexed":          seedBag(t, WriterOptions{}),
		"small_chunks":     seedBag(t, WriterOptions{ChunkSize: 64}),
		"zstd":             seedBag(t, WriterOptions{Compression: CompressionZstd}),
		"lz4_small_chunks": seedBag(t, WriterOptions{Compression: CompressionLZ4, ChunkSize: 64}),
		"summaryless_zstd": summaryless(t, seedBag(t, WriterOptions{Compression: CompressionZstd, ChunkSize: 64})),
		"summaryless_none": summaryless(t, seedBag(t, WriterOptions{ChunkSize: 64})),
		"unchunked":        unchunkedSeed(t),
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
