package bag_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
)

// smallBagFile writes a small bag and returns its MCAP bytes.
func smallBagFile(t *testing.T, opts bag.WriterOptions) []byte {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "m")
	writeBag(t, dir, opts, 4)
	b, err := os.ReadFile(filepath.Join(dir, "m_0.mcap"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readFile opens data as an .mcap file and reads every message, returning
// the first error.
func readFile(t *testing.T, data []byte, opts bag.ReaderOptions) (int, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.mcap")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := bag.OpenWith(t.Context(), path, opts)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for {
		_, err := r.Next(t.Context())
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// summaryRecord returns the offset of the body of the first summary record
// with opcode op.
func summaryRecord(t *testing.T, data []byte, op byte) int {
	t.Helper()
	footer := len(data) - 8 - 9 - 20
	pos := int(binary.LittleEndian.Uint64(data[footer+9:]))
	for pos < footer {
		n := int(binary.LittleEndian.Uint64(data[pos+1:]))
		if data[pos] == op {
			return pos + 9
		}
		pos += 9 + n
	}
	t.Fatalf("no record %#x in the summary", op)
	return 0
}

func TestTruncatedFiles(t *testing.T) {
	data := smallBagFile(t, bag.WriterOptions{ChunkSize: 100})
	for _, n := range []int{0, 7, 8, 20, 100, len(data) / 2, len(data) - 30, len(data) - 1} {
		_, err := readFile(t, data[:n], bag.ReaderOptions{})
		if err == nil {
			t.Fatalf("file cut to %d of %d bytes read without error", n, len(data))
		}
		if !strings.HasPrefix(err.Error(), "bag: ") {
			t.Fatalf("error %q lacks the package prefix", err)
		}
	}
	_, err := readFile(t, data[:len(data)-1], bag.ReaderOptions{})
	if !strings.Contains(err.Error(), "truncated or was not closed") {
		t.Fatalf("cut file: %v", err)
	}
}

func TestCorruptFiles(t *testing.T) {
	good := smallBagFile(t, bag.WriterOptions{})
	if n, err := readFile(t, good, bag.ReaderOptions{}); err != nil || n != 12 {
		t.Fatalf("good file: %d messages, %v", n, err)
	}
	for _, tc := range []struct {
		name  string
		patch func(b []byte)
		opts  bag.ReaderOptions
		want  string
	}{
		{"magic", func(b []byte) { b[1] = 'X' }, bag.ReaderOptions{}, "not an MCAP file"},
		{"chunk_length", func(b []byte) {
			binary.LittleEndian.PutUint64(b[summaryRecord(t, b, 0x08)+24:], 1<<62)
		}, bag.ReaderOptions{}, "outside the data section"},
		{"chunk_offset", func(b []byte) {
			binary.LittleEndian.PutUint64(b[summaryRecord(t, b, 0x08)+16:], 1<<63)
		}, bag.ReaderOptions{}, "outside the data section"},
		{"over_limit", func([]byte) {}, bag.ReaderOptions{MaxChunkBytes: 64}, "limit"},
		{"payload_crc", func(b []byte) {
			i := bytes.Index(b, []byte("open the drawer"))
			b[i] = 'O'
		}, bag.ReaderOptions{}, "CRC"},
		{"summary_start", func(b []byte) {
			binary.LittleEndian.PutUint64(b[len(b)-8-20:], uint64(len(b)))
		}, bag.ReaderOptions{}, "summary start"},
		{"record_length", func(b []byte) {
			binary.LittleEndian.PutUint64(b[summaryRecord(t, b, 0x03)-8:], 1<<40)
		}, bag.ReaderOptions{}, "claims 1099511627776 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(good)
			tc.patch(b)
			_, err := readFile(t, b, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// dataRecord returns the offset of the body of the first data-section
// record with opcode op.
func dataRecord(t *testing.T, data []byte, op byte) int {
	t.Helper()
	pos := 8
	for pos+9 <= len(data) {
		n := int(binary.LittleEndian.Uint64(data[pos+1:]))
		if data[pos] == op {
			return pos + 9
		}
		pos += 9 + n
	}
	t.Fatalf("no record %#x in the data section", op)
	return 0
}

// TestCompressedSizeMismatch announces one byte more, or one less, than a
// compressed chunk really holds (in the chunk and in its index).
func TestCompressedSizeMismatch(t *testing.T) {
	for _, c := range []bag.Compression{bag.CompressionZstd, bag.CompressionLZ4} {
		good := smallBagFile(t, bag.WriterOptions{Compression: c})
		for _, delta := range []int64{1, -1} {
			b := bytes.Clone(good)
			chunk := dataRecord(t, b, 0x06) + 16
			index := summaryRecord(t, b, 0x08)
			// The index's uncompressed size is its last field.
			indexLen := int(binary.LittleEndian.Uint64(b[index-8:]))
			for _, at := range []int{chunk, index + indexLen - 8} {
				binary.LittleEndian.PutUint64(b[at:], uint64(int64(binary.LittleEndian.Uint64(b[at:]))+delta))
			}
			want := "shorter than"
			if delta < 0 {
				want = "longer than"
			}
			if _, err := readFile(t, b, bag.ReaderOptions{}); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s, size %+d: %v, want %q", c, delta, err, want)
			}
		}
	}
}

func TestMissingBagFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	writeBag(t, dir, bag.WriterOptions{}, 4)
	if err := os.Remove(filepath.Join(dir, "gone_0.mcap")); err != nil {
		t.Fatal(err)
	}
	if _, err := bag.Open(dir); err == nil || !strings.Contains(err.Error(), "gone_0.mcap") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := bag.Open(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("missing path opened")
	}
	empty := t.TempDir()
	if _, err := bag.Open(empty); err == nil || !strings.Contains(err.Error(), "neither metadata.yaml nor .mcap or .db3 files") {
		t.Fatalf("empty folder: %v", err)
	}
}

// TestLZ4ExpansionBound: an lz4 chunk announcing more than 255 times its
// compressed size is refused before anything is allocated, and the densest
// real lz4 chunk (zeros) still reads.
func TestLZ4ExpansionBound(t *testing.T) {
	good := smallBagFile(t, bag.WriterOptions{Compression: bag.CompressionLZ4})
	b := bytes.Clone(good)
	chunk := dataRecord(t, b, 0x06) + 16
	index := summaryRecord(t, b, 0x08)
	indexLen := int(binary.LittleEndian.Uint64(b[index-8:]))
	compressed := binary.LittleEndian.Uint64(b[index+indexLen-16:])
	for _, at := range []int{chunk, index + indexLen - 8} {
		binary.LittleEndian.PutUint64(b[at:], compressed*256)
	}
	if _, err := readFile(t, b, bag.ReaderOptions{}); err == nil || !strings.Contains(err.Error(), "lz4 expands at most 255-fold") {
		t.Fatalf("lz4 chunk announcing 256x: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "zeros")
	w, err := bag.Create(dir, bag.WriterOptions{Compression: bag.CompressionLZ4, ChunkSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddTopic("/z", msgs.TypeActionChunk, bag.DefaultQoS()); err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, 6<<20)
	zeros[1] = 1
	if err := w.Write("/z", time.Unix(1, 0), zeros); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if m, err := r.Next(context.Background()); err != nil || len(m.Data) != len(zeros) {
		t.Fatalf("zeros: %d bytes, %v", len(m.Data), err)
	}
}
