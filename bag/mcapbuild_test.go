package bag_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/foxglove/mcap/go/mcap"
	"github.com/klauspost/compress/zstd"
)

// mcapBuilder writes MCAP files record by record, following the format
// specification, so that tests control chunk boundaries, time ranges and
// indexes exactly (which no writer library lets one do).
type mcapBuilder struct {
	t       *testing.T
	buf     []byte
	indexes [][]byte // chunk index record bodies
	summary [][2]any // extra summary records: opcode, body
	largest int      // largest uncompressed chunk
}

// bmsg is a message of a built chunk.
type bmsg struct {
	channel uint16
	at      uint64
	data    []byte
}

func appendStr(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func newBuilder(t *testing.T) *mcapBuilder {
	b := &mcapBuilder{t: t, buf: bytes.Clone(mcap.Magic)}
	b.record(mcap.OpHeader, appendStr(appendStr(nil, "ros2"), "test"))
	return b
}

func record(out []byte, op mcap.OpCode, body []byte) []byte {
	out = append(out, byte(op))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(body)))
	return append(out, body...)
}

func (b *mcapBuilder) record(op mcap.OpCode, body []byte) { b.buf = record(b.buf, op, body) }

func schemaBody(id uint16, name string) []byte {
	s := binary.LittleEndian.AppendUint16(nil, id)
	s = appendStr(appendStr(s, name), "ros2msg")
	return appendStr(s, "uint8[] data\n")
}

func channelBody(id, schema uint16, topic, encoding string) []byte {
	c := binary.LittleEndian.AppendUint16(nil, id)
	c = binary.LittleEndian.AppendUint16(c, schema)
	c = appendStr(appendStr(c, topic), encoding)
	return binary.LittleEndian.AppendUint32(c, 0) // no metadata
}

func messageBody(m bmsg) []byte {
	r := binary.LittleEndian.AppendUint16(nil, m.channel)
	r = binary.LittleEndian.AppendUint32(r, 0)
	r = binary.LittleEndian.AppendUint64(r, m.at)
	r = binary.LittleEndian.AppendUint64(r, m.at)
	return append(r, m.data...)
}

// schemaChannel writes schema 1 and a channel on it at the top level.
func (b *mcapBuilder) schemaChannel(id uint16, topic, encoding string) {
	if id == 1 {
		b.record(mcap.OpSchema, schemaBody(1, "std_msgs/msg/UInt8MultiArray"))
	}
	b.record(mcap.OpChannel, channelBody(id, 1, topic, encoding))
	b.summary = append(b.summary, [2]any{mcap.OpChannel, channelBody(id, 1, topic, encoding)})
}

// chunk writes a chunk of the messages (zstd-compressed when zstdc) with
// the time range they span, and its chunk index. pre are records placed in
// the chunk before the messages.
func (b *mcapBuilder) chunk(zstdc bool, pre []byte, msgs ...bmsg) {
	recs := bytes.Clone(pre)
	start, end := ^uint64(0), uint64(0)
	for _, m := range msgs {
		recs = record(recs, mcap.OpMessage, messageBody(m))
		start, end = min(start, m.at), max(end, m.at)
	}
	b.largest = max(b.largest, len(recs))
	compression, payload := "", recs
	if zstdc {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			b.t.Fatal(err)
		}
		compression, payload = "zstd", enc.EncodeAll(recs, nil)
		enc.Close()
	}
	c := binary.LittleEndian.AppendUint64(nil, start)
	c = binary.LittleEndian.AppendUint64(c, end)
	c = binary.LittleEndian.AppendUint64(c, uint64(len(recs)))
	c = binary.LittleEndian.AppendUint32(c, crc32.ChecksumIEEE(recs))
	c = appendStr(c, compression)
	c = binary.LittleEndian.AppendUint64(c, uint64(len(payload)))
	c = append(c, payload...)
	off := len(b.buf)
	b.record(mcap.OpChunk, c)
	ix := binary.LittleEndian.AppendUint64(nil, start)
	ix = binary.LittleEndian.AppendUint64(ix, end)
	ix = binary.LittleEndian.AppendUint64(ix, uint64(off))
	ix = binary.LittleEndian.AppendUint64(ix, uint64(len(b.buf)-off))
	ix = binary.LittleEndian.AppendUint32(ix, 0) // no message indexes
	ix = binary.LittleEndian.AppendUint64(ix, 0)
	ix = appendStr(ix, compression)
	ix = binary.LittleEndian.AppendUint64(ix, uint64(len(payload)))
	ix = binary.LittleEndian.AppendUint64(ix, uint64(len(recs)))
	b.indexes = append(b.indexes, ix)
}

// finish ends the file, with a summary (channels and chunk indexes) or
// without one, and returns its bytes.
func (b *mcapBuilder) finish(withSummary bool) []byte {
	b.record(mcap.OpDataEnd, binary.LittleEndian.AppendUint32(nil, 0))
	summaryStart := uint64(0)
	if withSummary {
		summaryStart = uint64(len(b.buf))
		b.record(mcap.OpSchema, schemaBody(1, "std_msgs/msg/UInt8MultiArray"))
		for _, r := range b.summary {
			b.record(r[0].(mcap.OpCode), r[1].([]byte))
		}
		for _, ix := range b.indexes {
			b.record(mcap.OpChunkIndex, ix)
		}
	}
	f := binary.LittleEndian.AppendUint64(nil, summaryStart)
	f = binary.LittleEndian.AppendUint64(f, 0)
	f = binary.LittleEndian.AppendUint32(f, 0)
	b.record(mcap.OpFooter, f)
	return append(b.buf, mcap.Magic...)
}

// writeTemp writes data to a file in a test folder and returns its path.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
