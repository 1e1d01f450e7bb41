package bag

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/fastwam/actionexpert/msgs"
)

// fuzzSeed writes a small bag with the given options and returns its MCAP
// bytes. The schemas are one-line stand-ins so that seeds stay small and
// the fuzzer spends its time on structure, not on schema text.
func fuzzSeed(f *testing.F, opts WriterOptions) []byte {
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
func unchunkedSeed(f *testing.F) []byte {
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

// FuzzBagReader opens arbitrary bytes as an MCAP file and reads every
// message. Any input must give messages or an error: no panic, no hang and
// no allocation beyond the 1 MiB limit given to the reader.
func FuzzBagReader(f *testing.F) {
	f.Add(fuzzSeed(f, WriterOptions{}))
	f.Add(fuzzSeed(f, WriterOptions{ChunkSize: 64}))
	f.Add(fuzzSeed(f, WriterOptions{Compression: CompressionZstd}))
	f.Add(fuzzSeed(f, WriterOptions{Compression: CompressionLZ4, ChunkSize: 64}))
	f.Add(unchunkedSeed(f))
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := openFile(bytes.NewReader(data), int64(len(data)), "fuzz.mcap", limit, nil)
		if err != nil {
			return
		}
		defer r.close()
		// Every message takes at least a record header in the file or in a
		// chunk of at most limit bytes; a bound keeps a bug from hanging.
		var last uint64
		for n := 0; n <= len(data)+limit; n++ {
			m, err := r.nextMessage()
			if errors.Is(err, io.EOF) || err != nil {
				return
			}
			// With an index, messages must come in log-time order.
			if !r.linear && m.logTime < last {
				t.Fatalf("message at %d ns after one at %d ns", m.logTime, last)
			}
			last = m.logTime
			if !m.LogTime.Equal(nanoTime(m.logTime)) {
				t.Fatalf("LogTime %v does not match %d ns", m.LogTime, m.logTime)
			}
		}
		t.Fatal("the reader did not stop")
	})
}
