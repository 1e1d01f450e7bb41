package bag

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"time"

	"github.com/foxglove/mcap/go/mcap"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// This file reads one MCAP file through an io.ReaderAt. Every length and
// offset read from the file is checked against the file size and the
// reader's limits before anything is allocated or sliced with it: a corrupt
// or hostile file gives an error, never a panic or a huge allocation.

// Record layout constants of the MCAP format.
const (
	magicLen        = 8
	recordPrefixLen = 1 + 8                 // opcode, uint64 length
	footerBodyLen   = 8 + 8 + 4             // summary start, summary offset start, summary CRC
	messagePrefix   = 2 + 4 + 8 + 8         // channel id, sequence, log time, publish time
	chunkFixedLen   = 8 + 8 + 8 + 4 + 4 + 8 // times, sizes, CRC, compression length, records length
)

// fileReader yields the messages of one MCAP file in log-time order.
//
// Ordering and memory: messages are ordered by (log time, file offset of
// their chunk, position in the chunk). Chunks are loaded in (start time,
// file offset) order, and the next chunk is loaded only when it may hold a
// message that comes before the earliest pending one: its start time is
// below that message's log time, or equal to it with the chunk earlier in
// the file. Chunks that merely tie in log time with a pending chunk are
// therefore never held together, so the reader holds at most the chunks
// whose time ranges really overlap (one chunk when none do).
type fileReader struct {
	r     io.ReaderAt
	size  int64
	name  string // for errors
	limit int64  // the largest record or decompressed chunk accepted
	want  map[string]bool

	header   *mcap.Header
	schemas  map[uint16]*mcap.Schema
	channels map[uint16]*mcap.Channel
	stats    *mcap.Statistics
	counts   map[uint16]uint64 // messages per channel, counted by scan when there are no statistics
	dataEnd  int64             // end of the data section (summary start, or footer position)
	dataPos  int64             // start of the data section (after the header record)

	// Indexed reading: chunk indexes sorted by (start time, offset), the
	// next one to load and the messages of loaded chunks not yet returned.
	chunks  []*mcap.ChunkIndex
	next    int
	pending msgHeap

	// Linear reading, when the file has no chunk index and holds messages
	// outside chunks: the position of the next top-level record and the
	// records of the chunk being read.
	linear     bool
	pos        int64
	chunkRecs  []byte
	chunkStart uint64
	chunkEnd   uint64
	lastLog    uint64 // log time of the last message returned
	anyLog     bool   // whether a message was returned

	// held is the number of decompressed chunk bytes the reader references
	// (chunks with messages not yet returned, or being read); peakHeld is
	// its largest value so far. Tests read them (export_test.go).
	held, peakHeld int64

	zstd *zstd.Decoder
	lz4  *lz4.Reader
}

// heldChunk is a loaded chunk whose decompressed bytes pending messages
// view; the reader lets go of it when the last of them is returned.
type heldChunk struct {
	size int64
	left int
}

// pendingMsg is a decoded message waiting in the heap.
type pendingMsg struct {
	msg      Message
	chunkOff uint64 // file offset of its chunk
	pos      int    // its position in the chunk
	chunk    *heldChunk
}

// msgHeap orders pending messages by log time, then by file offset of the
// chunk, then by position in the chunk; it implements
// container/heap.Interface.
type msgHeap []pendingMsg

func (h msgHeap) Len() int { return len(h) }
func (h msgHeap) Less(i, j int) bool {
	a, b := &h[i], &h[j]
	switch {
	case a.msg.logTime != b.msg.logTime:
		return a.msg.logTime < b.msg.logTime
	case a.chunkOff != b.chunkOff:
		return a.chunkOff < b.chunkOff
	}
	return a.pos < b.pos
}
func (h msgHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *msgHeap) Push(x any)   { *h = append(*h, x.(pendingMsg)) }
func (h *msgHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = pendingMsg{}
	*h = old[:len(old)-1]
	return x
}

// maxZstdExpansion bounds how many bytes one byte of a zstd frame can
// become: the densest zstd block is an RLE block, 3 bytes of block header
// and 1 byte that stand for at most 128 KiB (the largest block), 32768
// bytes per byte. A chunk announcing more than this many times its
// compressed size is refused before anything is allocated for it.
const maxZstdExpansion = 32768

// maxLZ4Expansion bounds how many bytes one byte of an LZ4 frame can
// become: a match costs a byte per 255 bytes of length past its token, so
// no block expands more than 255-fold (frame headers only lower that). A
// chunk announcing more is refused before anything is allocated for it.
const maxLZ4Expansion = 255

// zstdKeepDecoderBelow is the largest zstd chunk after which the reader
// keeps its decoder for the next chunk (see unzstd).
const zstdKeepDecoderBelow = 8 << 20

// openFile reads the header, footer and summary of an MCAP file and, when
// the summary does not list the channels (or there is no summary), scans
// the data section once (see scan). want, if not empty, restricts the
// messages returned to those topics.
func openFile(ctx context.Context, r io.ReaderAt, size int64, name string, limit int64, want map[string]bool) (*fileReader, error) {
	f := &fileReader{r: r, size: size, name: name, limit: limit, want: want,
		schemas: map[uint16]*mcap.Schema{}, channels: map[uint16]*mcap.Channel{}}
	if err := f.readHeaderAndFooter(); err != nil {
		return nil, err
	}
	if err := f.prepare(ctx); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

func (f *fileReader) errorf(format string, args ...any) error {
	return fmt.Errorf("bag: %s: %s", f.name, fmt.Sprintf(format, args...))
}

// cancelled wraps a context error with where the reader stopped.
func (f *fileReader) cancelled(err error, what string) error {
	return fmt.Errorf("bag: %s: %s: %w", f.name, what, err)
}

// readAt reads exactly n bytes at off, which the caller has checked lie in
// the file.
func (f *fileReader) readAt(off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := f.r.ReadAt(buf, off); err != nil {
		return nil, f.errorf("read %d bytes at offset %d: %v", n, off, err)
	}
	return buf, nil
}

// recordPrefix reads the opcode and body length of the record at off,
// which must end by end.
func (f *fileReader) recordPrefix(off, end int64) (mcap.OpCode, int64, error) {
	if end-off < recordPrefixLen {
		return 0, 0, f.errorf("truncated record at offset %d: %d bytes left, a record needs at least %d", off, end-off, recordPrefixLen)
	}
	prefix, err := f.readAt(off, recordPrefixLen)
	if err != nil {
		return 0, 0, err
	}
	op := mcap.OpCode(prefix[0])
	n := binary.LittleEndian.Uint64(prefix[1:])
	if left := end - off - recordPrefixLen; n > uint64(left) {
		return 0, 0, f.errorf("%s record at offset %d claims %d bytes, only %d left", op, off, n, left)
	}
	return op, int64(n), nil
}

// recordAt reads the record at off, which must end by end. It returns the
// opcode, the body and the offset after the record.
func (f *fileReader) recordAt(off, end int64) (mcap.OpCode, []byte, int64, error) {
	op, n, err := f.recordPrefix(off, end)
	if err != nil {
		return 0, nil, 0, err
	}
	if n > f.limit {
		return 0, nil, 0, f.errorf("%s record at offset %d has %d bytes, more than the %d-byte limit", op, off, n, f.limit)
	}
	body, err := f.readAt(off+recordPrefixLen, n)
	if err != nil {
		return 0, nil, 0, err
	}
	return op, body, off + recordPrefixLen + n, nil
}

func (f *fileReader) readHeaderAndFooter() error {
	const minSize = 2*magicLen + recordPrefixLen + recordPrefixLen + footerBodyLen
	if f.size < minSize {
		return f.errorf("%d bytes is too short for an MCAP file (at least %d)", f.size, minSize)
	}
	magic, err := f.readAt(0, magicLen)
	if err != nil {
		return err
	}
	if !bytes.Equal(magic, mcap.Magic) {
		// An SQLite database was told apart before (Reader.openBagFile).
		return f.errorf("not an MCAP file (bad magic % x) nor an SQLite 3 database: want a rosbag2 .mcap or .db3 file", magic)
	}
	tail, err := f.readAt(f.size-magicLen-recordPrefixLen-footerBodyLen, magicLen+recordPrefixLen+footerBodyLen)
	if err != nil {
		return err
	}
	footerPos := f.size - magicLen - recordPrefixLen - footerBodyLen
	if !bytes.Equal(tail[recordPrefixLen+footerBodyLen:], mcap.Magic) {
		return f.errorf("no MCAP footer: the file is truncated or was not closed")
	}
	if mcap.OpCode(tail[0]) != mcap.OpFooter || binary.LittleEndian.Uint64(tail[1:]) != footerBodyLen {
		return f.errorf("no MCAP footer record before the closing magic")
	}
	footer, err := mcap.ParseFooter(tail[recordPrefixLen : recordPrefixLen+footerBodyLen])
	if err != nil {
		return f.errorf("footer: %v", err)
	}
	op, body, next, err := f.recordAt(magicLen, footerPos)
	if err != nil {
		return err
	}
	if op != mcap.OpHeader {
		return f.errorf("first record is %s, want Header", op)
	}
	if f.header, err = mcap.ParseHeader(body); err != nil {
		return f.errorf("header: %v", err)
	}
	f.dataPos = next
	f.dataEnd = footerPos
	if footer.SummaryStart != 0 {
		if footer.SummaryStart < uint64(f.dataPos) || footer.SummaryStart > uint64(footerPos) {
			return f.errorf("summary start %d is outside the file's records [%d, %d]", footer.SummaryStart, f.dataPos, footerPos)
		}
		f.dataEnd = int64(footer.SummaryStart)
		if err := f.readSummary(int64(footer.SummaryStart), footerPos); err != nil {
			return err
		}
	}
	return nil
}

// prepare decides how the data section is read. A file whose summary lists
// its channels is read as the summary says: through its chunk indexes, or
// record by record when it has none. Any other file (no summary, as when a
// recording was not closed, or a summary without channels) is scanned
// first, so that its topics are known before the first message is read;
// the chunks the scan met then serve as its chunk index, unless the file
// also holds messages outside chunks, which are read in file order (refused when out of log-time order).
func (f *fileReader) prepare(ctx context.Context) error {
	f.pos = f.dataPos
	if len(f.channels) > 0 {
		f.linear = len(f.chunks) == 0 && (f.stats == nil || f.stats.MessageCount > 0)
		return nil
	}
	chunks, topLevel, err := f.scan(ctx)
	if err != nil {
		return err
	}
	switch {
	case len(f.chunks) > 0: // the summary's chunk indexes
	case topLevel:
		f.linear = true
	default:
		f.chunks = chunks
		return f.sortChunks()
	}
	return nil
}

// scan reads the data section once without keeping messages: it registers
// the schema and channel records (also those inside chunks, which it
// decompresses one at a time, within the reader's limit), counts the
// messages of every channel, checks every chunk and message record it
// meets, and returns an index of the chunks and whether messages occur
// outside chunks.
func (f *fileReader) scan(ctx context.Context) (chunks []*mcap.ChunkIndex, topLevel bool, err error) {
	f.counts = map[uint16]uint64{}
	countMessage := func(body []byte, where string) (uint64, error) {
		if len(body) < messagePrefix {
			return 0, f.errorf("message record %s is %d bytes, shorter than its %d-byte header", where, len(body), messagePrefix)
		}
		id := binary.LittleEndian.Uint16(body)
		if f.channels[id] == nil {
			return 0, f.errorf("message %s is on channel %d, which is not defined before it", where, id)
		}
		f.counts[id]++
		return binary.LittleEndian.Uint64(body[6:]), nil
	}
	for off := f.dataPos; off < f.dataEnd; {
		if err := ctx.Err(); err != nil {
			return nil, false, f.cancelled(err, fmt.Sprintf("scan stopped at offset %d", off))
		}
		op, n, err := f.recordPrefix(off, f.dataEnd)
		if err != nil {
			return nil, false, err
		}
		next := off + recordPrefixLen + n
		switch op {
		case mcap.OpSchema, mcap.OpChannel:
			_, body, _, err := f.recordAt(off, f.dataEnd)
			if err != nil {
				return nil, false, err
			}
			if err := f.addRecord(op, body); err != nil {
				return nil, false, err
			}
		case mcap.OpMessage:
			topLevel = true
			if n < messagePrefix {
				return nil, false, f.errorf("message record at offset %d is %d bytes, shorter than its %d-byte header", off, n, messagePrefix)
			}
			head, err := f.readAt(off+recordPrefixLen, messagePrefix)
			if err != nil {
				return nil, false, err
			}
			if _, err := countMessage(head, fmt.Sprintf("at offset %d", off)); err != nil {
				return nil, false, err
			}
		case mcap.OpChunk:
			_, body, _, err := f.recordAt(off, f.dataEnd)
			if err != nil {
				return nil, false, err
			}
			recs, start, end, err := f.chunkRecords(ctx, body, off)
			if err != nil {
				return nil, false, err
			}
			f.hold(int64(len(recs)))
			err = f.forRecords(recs, off, func(op mcap.OpCode, body []byte) error {
				switch op {
				case mcap.OpSchema, mcap.OpChannel:
					return f.addRecord(op, body)
				case mcap.OpMessage:
					at, err := countMessage(body, fmt.Sprintf("in the chunk at offset %d", off))
					if err == nil && (at < start || at > end) {
						err = f.errorf("chunk at offset %d holds a message at %d ns, outside its range [%d, %d]", off, at, start, end)
					}
					return err
				}
				return nil
			})
			f.hold(-int64(len(recs)))
			if err != nil {
				return nil, false, err
			}
			chunks = append(chunks, &mcap.ChunkIndex{
				MessageStartTime: start,
				MessageEndTime:   end,
				ChunkStartOffset: uint64(off),
				ChunkLength:      uint64(next - off),
				UncompressedSize: uint64(len(recs)),
			})
		case mcap.OpDataEnd:
			return chunks, topLevel, nil
		}
		off = next
	}
	return chunks, topLevel, nil
}

// hold adds n to the decompressed bytes the reader holds.
func (f *fileReader) hold(n int64) {
	f.held += n
	f.peakHeld = max(f.peakHeld, f.held)
}

func (f *fileReader) readSummary(off, end int64) error {
	for off < end {
		op, body, next, err := f.recordAt(off, end)
		if err != nil {
			return fmt.Errorf("%w (in the summary section)", err)
		}
		switch op {
		case mcap.OpSchema, mcap.OpChannel:
			if err := f.addRecord(op, body); err != nil {
				return err
			}
		case mcap.OpChunkIndex:
			idx, err := mcap.ParseChunkIndex(body)
			if err != nil {
				return f.errorf("chunk index at offset %d: %v", off, err)
			}
			f.chunks = append(f.chunks, idx)
		case mcap.OpStatistics:
			if f.stats, err = mcap.ParseStatistics(body); err != nil {
				return f.errorf("statistics: %v", err)
			}
		}
		off = next
	}
	return f.sortChunks()
}

// sortChunks checks the chunk indexes, makes sure no two of them share
// bytes of the file, and sorts them by start time, then file offset.
func (f *fileReader) sortChunks() error {
	for _, idx := range f.chunks {
		if err := f.checkChunkIndex(idx); err != nil {
			return err
		}
	}
	slices.SortFunc(f.chunks, func(a, b *mcap.ChunkIndex) int { return cmpU64(a.ChunkStartOffset, b.ChunkStartOffset) })
	for i := 1; i < len(f.chunks); i++ {
		a, b := f.chunks[i-1], f.chunks[i]
		if a.ChunkStartOffset+a.ChunkLength > b.ChunkStartOffset {
			return f.errorf("chunk indexes for [%d, +%d) and [%d, +%d) overlap: each chunk must be indexed once",
				a.ChunkStartOffset, a.ChunkLength, b.ChunkStartOffset, b.ChunkLength)
		}
	}
	slices.SortStableFunc(f.chunks, func(a, b *mcap.ChunkIndex) int { return cmpU64(a.MessageStartTime, b.MessageStartTime) })
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// wanted reports whether the messages of topic are returned.
func (f *fileReader) wanted(topic string) bool { return len(f.want) == 0 || f.want[topic] }

// addRecord registers a schema or channel record. A repeated record must
// be identical to the first one with its id. A channel of a wanted topic
// must carry CDR messages.
func (f *fileReader) addRecord(op mcap.OpCode, body []byte) error {
	switch op {
	case mcap.OpSchema:
		s, err := mcap.ParseSchema(body)
		if err != nil {
			return f.errorf("schema record: %v", err)
		}
		if s.ID == 0 {
			return f.errorf("schema %q has the reserved id 0", s.Name)
		}
		if old, ok := f.schemas[s.ID]; ok {
			if old.Name != s.Name || old.Encoding != s.Encoding || !bytes.Equal(old.Data, s.Data) {
				return f.errorf("two different schemas have id %d (%s and %s)", s.ID, old.Name, s.Name)
			}
			return nil
		}
		f.schemas[s.ID] = s
	case mcap.OpChannel:
		c, err := mcap.ParseChannel(body)
		if err != nil {
			return f.errorf("channel record: %v", err)
		}
		if c.SchemaID != 0 && f.schemas[c.SchemaID] == nil {
			return f.errorf("channel %s refers to schema %d, which is not defined before it", c.Topic, c.SchemaID)
		}
		if old, ok := f.channels[c.ID]; ok {
			if old.Topic != c.Topic || old.SchemaID != c.SchemaID || old.MessageEncoding != c.MessageEncoding {
				return f.errorf("two different channels have id %d (%s and %s)", c.ID, old.Topic, c.Topic)
			}
			return nil
		}
		if f.wanted(c.Topic) && c.MessageEncoding != MessageEncodingCDR {
			return f.errorf("topic %s (channel %d) has message encoding %q, want %q: this reader returns CDR messages only (leave the topic out with ReaderOptions.Topics)",
				c.Topic, c.ID, c.MessageEncoding, MessageEncodingCDR)
		}
		f.channels[c.ID] = c
	}
	return nil
}

// checkChunkIndex makes sure a chunk index points inside the data section
// and promises no more than the reader's limit.
func (f *fileReader) checkChunkIndex(idx *mcap.ChunkIndex) error {
	end := idx.ChunkStartOffset + idx.ChunkLength
	switch {
	case end < idx.ChunkStartOffset || idx.ChunkStartOffset < uint64(f.dataPos) || end > uint64(f.dataEnd):
		return f.errorf("chunk index points at bytes [%d, +%d), outside the data section [%d, %d)",
			idx.ChunkStartOffset, idx.ChunkLength, f.dataPos, f.dataEnd)
	case idx.ChunkLength < recordPrefixLen+chunkFixedLen:
		return f.errorf("chunk at offset %d is %d bytes, too short for a chunk record", idx.ChunkStartOffset, idx.ChunkLength)
	case idx.UncompressedSize > uint64(f.limit):
		return f.errorf("chunk at offset %d holds %d bytes, more than the %d-byte limit", idx.ChunkStartOffset, idx.UncompressedSize, f.limit)
	case idx.MessageStartTime > idx.MessageEndTime:
		return f.errorf("chunk at offset %d starts at %d after it ends at %d", idx.ChunkStartOffset, idx.MessageStartTime, idx.MessageEndTime)
	}
	return nil
}

// chunkRecords parses a chunk record body and returns its decompressed
// records and time range. The decompressed size is the chunk's declared
// one, which must be within the reader's limit (and, for zstd, within what
// the compressed bytes can expand to); no decompressor may produce more.
func (f *fileReader) chunkRecords(ctx context.Context, body []byte, off int64) (recs []byte, start, end uint64, err error) {
	if len(body) < chunkFixedLen {
		return nil, 0, 0, f.errorf("chunk at offset %d: %d bytes, too short", off, len(body))
	}
	start = binary.LittleEndian.Uint64(body[0:])
	end = binary.LittleEndian.Uint64(body[8:])
	size := binary.LittleEndian.Uint64(body[16:])
	crc := binary.LittleEndian.Uint32(body[24:])
	clen := uint64(binary.LittleEndian.Uint32(body[28:]))
	rest := body[32:]
	if uint64(len(rest)) < 8 || clen > uint64(len(rest))-8 {
		return nil, 0, 0, f.errorf("chunk at offset %d: compression name of %d bytes runs past the record", off, clen)
	}
	compression := string(rest[:clen])
	rest = rest[clen:]
	rlen := binary.LittleEndian.Uint64(rest)
	rest = rest[8:]
	switch {
	case rlen != uint64(len(rest)):
		return nil, 0, 0, f.errorf("chunk at offset %d: records length %d, but the record holds %d bytes", off, rlen, len(rest))
	case size > uint64(f.limit):
		return nil, 0, 0, f.errorf("chunk at offset %d holds %d bytes, more than the %d-byte limit", off, size, f.limit)
	case start > end:
		return nil, 0, 0, f.errorf("chunk at offset %d starts at %d ns after it ends at %d ns", off, start, end)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, f.cancelled(err, fmt.Sprintf("stopped before the chunk at offset %d", off))
	}
	switch mcap.CompressionFormat(compression) {
	case mcap.CompressionNone:
		if size != rlen {
			return nil, 0, 0, f.errorf("uncompressed chunk at offset %d: %d bytes of records, header says %d", off, rlen, size)
		}
		recs = rest
	case mcap.CompressionZSTD:
		recs, err = f.unzstd(rest, size)
	case mcap.CompressionLZ4:
		if f.lz4 == nil {
			f.lz4 = lz4.NewReader(bytes.NewReader(rest))
		} else {
			f.lz4.Reset(bytes.NewReader(rest))
		}
		if size > uint64(len(rest))*maxLZ4Expansion {
			err = fmt.Errorf("%d compressed bytes cannot hold the %d bytes announced (lz4 expands at most %d-fold)",
				len(rest), size, maxLZ4Expansion)
			break
		}
		// Within that bound the announced size is allocated once, as for
		// zstd, instead of doubling a buffer up to it (which held the old
		// and the new buffer at once: 1.05 GB for a 512 MiB chunk).
		recs, err = readExactly(ctx, f.lz4, size, int(size))
	default:
		return nil, 0, 0, f.errorf("chunk at offset %d uses compression %q (supported: none, zstd, lz4)", off, compression)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, 0, 0, f.cancelled(err, fmt.Sprintf("stopped in the chunk at offset %d", off))
		}
		return nil, 0, 0, f.errorf("%s chunk at offset %d: %v", compression, off, err)
	}
	if crc != 0 {
		if got := crc32.ChecksumIEEE(recs); got != crc {
			return nil, 0, 0, f.errorf("chunk at offset %d: CRC %08x, header says %08x", off, got, crc)
		}
	}
	return recs, start, end, nil
}

// unzstd decompresses a zstd chunk that announces size bytes into one
// buffer of exactly that size. The announced size was checked against the
// reader's limit; it is checked here against what the compressed bytes
// can expand to and against the frame's own content size before the
// buffer is allocated, and the decoder may not write past it.
func (f *fileReader) unzstd(src []byte, size uint64) ([]byte, error) {
	if size > uint64(len(src))*maxZstdExpansion {
		return nil, fmt.Errorf("%d compressed bytes cannot hold the %d bytes announced (zstd expands at most %d-fold)",
			len(src), size, maxZstdExpansion)
	}
	var h zstd.Header
	if err := h.Decode(src); err == nil && h.HasFCS && h.FrameContentSize > size {
		return nil, fmt.Errorf("decompressed data is %d bytes by its zstd frame header, longer than the %d bytes announced", h.FrameContentSize, size)
	}
	if f.zstd == nil {
		var err error
		f.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(f.limit)),
			zstd.WithDecodeAllCapLimit(true))
		if err != nil {
			return nil, err
		}
	}
	out, err := f.zstd.DecodeAll(src, make([]byte, 0, size))
	if size > zstdKeepDecoderBelow {
		// The decoder keeps a reference to the last output it wrote, which
		// would keep a large chunk alive next to the one loaded after it:
		// a decoder that wrote a large chunk is dropped (a new one costs
		// about 0.3 ms, little next to decoding more than 8 MiB).
		f.zstd.Close()
		f.zstd = nil
	}
	switch {
	case errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return nil, fmt.Errorf("decompressed data is longer than the %d bytes announced", size)
	case err != nil:
		return nil, err
	case uint64(len(out)) != size:
		return nil, fmt.Errorf("decompressed data is %d bytes, shorter than the %d announced", len(out), size)
	}
	return out, nil
}

// readExactly decompresses exactly n bytes from r and checks that nothing
// follows them. The buffer starts at a size guessed from the compressed
// size (hint) and doubles up to n as data actually arrives, so a small
// chunk announcing a huge size costs no huge allocation. It stops with
// ctx's error when ctx is done.
func readExactly(ctx context.Context, r io.Reader, n uint64, hint int) ([]byte, error) {
	const maxIdleReads = 100 // reads returning nothing before giving up
	out := make([]byte, 0, min(n, uint64(max(hint, 1<<16))))
	idle := 0
	for uint64(len(out)) < n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(out) == cap(out) {
			out = slices.Grow(out, int(min(n, 2*uint64(cap(out)))-uint64(len(out))))
		}
		k, err := r.Read(out[len(out):int(min(uint64(cap(out)), n))])
		out = out[:len(out)+k]
		switch {
		case errors.Is(err, io.EOF) && uint64(len(out)) < n:
			return nil, fmt.Errorf("decompressed data is %d bytes, shorter than the %d announced", len(out), n)
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		case k == 0:
			if idle++; idle > maxIdleReads {
				return nil, errors.New("the decompressor makes no progress")
			}
		}
	}
	var one [1]byte
	for range maxIdleReads {
		k, err := r.Read(one[:])
		if k != 0 {
			return nil, fmt.Errorf("decompressed data is longer than the %d bytes announced", n)
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, errors.New("the decompressor does not end after the announced size")
}

// message parses a message record body. Data views body. It reports false
// for a message of a topic that is not wanted.
func (f *fileReader) message(body []byte) (Message, bool, error) {
	if len(body) < messagePrefix {
		return Message{}, false, f.errorf("message record of %d bytes, shorter than its %d-byte header", len(body), messagePrefix)
	}
	id := binary.LittleEndian.Uint16(body)
	ch := f.channels[id]
	if ch == nil {
		return Message{}, false, f.errorf("message on channel %d, which is not defined before it", id)
	}
	if !f.wanted(ch.Topic) {
		return Message{}, false, nil
	}
	m := Message{
		Topic:       ch.Topic,
		logTime:     binary.LittleEndian.Uint64(body[6:]),
		publishTime: binary.LittleEndian.Uint64(body[14:]),
		Data:        body[messagePrefix:len(body):len(body)],
	}
	if s := f.schemas[ch.SchemaID]; s != nil {
		m.Type = s.Name
	}
	m.LogTime = nanoTime(m.logTime)
	m.PublishTime = nanoTime(m.publishTime)
	return m, true, nil
}

// nanoTime converts MCAP nanoseconds since the epoch to a time.Time.
func nanoTime(ns uint64) time.Time {
	return time.Unix(int64(ns/1e9), int64(ns%1e9))
}

// forRecords calls fn for every record of a chunk's records.
func (f *fileReader) forRecords(recs []byte, off int64, fn func(op mcap.OpCode, body []byte) error) error {
	for pos := uint64(0); pos < uint64(len(recs)); {
		if uint64(len(recs))-pos < recordPrefixLen {
			return f.errorf("chunk at offset %d ends inside a record header", off)
		}
		op := mcap.OpCode(recs[pos])
		n := binary.LittleEndian.Uint64(recs[pos+1:])
		pos += recordPrefixLen
		if n > uint64(len(recs))-pos {
			return f.errorf("%s record in the chunk at offset %d claims %d bytes, only %d left", op, off, n, uint64(len(recs))-pos)
		}
		if err := fn(op, recs[pos:pos+n]); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// loadChunk reads the chunk idx points at and queues its messages.
func (f *fileReader) loadChunk(ctx context.Context, idx *mcap.ChunkIndex) error {
	off := int64(idx.ChunkStartOffset)
	op, body, _, err := f.recordAt(off, off+int64(idx.ChunkLength))
	if err != nil {
		return err
	}
	if op != mcap.OpChunk {
		return f.errorf("chunk index points at a %s record (offset %d)", op, off)
	}
	recs, _, _, err := f.chunkRecords(ctx, body, off)
	if err != nil {
		return err
	}
	if uint64(len(recs)) != idx.UncompressedSize {
		return f.errorf("chunk at offset %d holds %d bytes, its index says %d", off, len(recs), idx.UncompressedSize)
	}
	hc := &heldChunk{size: int64(len(recs))}
	f.hold(hc.size)
	pos := 0
	err = f.forRecords(recs, off, func(op mcap.OpCode, body []byte) error {
		switch op {
		case mcap.OpSchema, mcap.OpChannel:
			return f.addRecord(op, body)
		case mcap.OpMessage:
			m, ok, err := f.message(body)
			if err != nil || !ok {
				return err
			}
			if m.logTime < idx.MessageStartTime || m.logTime > idx.MessageEndTime {
				return f.errorf("chunk at offset %d holds a message at %d ns, outside its indexed range [%d, %d]",
					off, m.logTime, idx.MessageStartTime, idx.MessageEndTime)
			}
			pos++
			hc.left++
			heap.Push(&f.pending, pendingMsg{msg: m, chunkOff: idx.ChunkStartOffset, pos: pos, chunk: hc})
		}
		return nil
	})
	if hc.left == 0 {
		f.hold(-hc.size)
	}
	return err
}

// wantsChunk reports whether a chunk may hold a message of a wanted topic,
// from the channels its message indexes list.
func (f *fileReader) wantsChunk(idx *mcap.ChunkIndex) bool {
	if len(f.want) == 0 || len(idx.MessageIndexOffsets) == 0 {
		return true
	}
	for id := range idx.MessageIndexOffsets {
		if ch := f.channels[id]; ch == nil || f.want[ch.Topic] {
			return true
		}
	}
	return false
}

// nextMessage returns the next message in log-time order (file order for a
// file read linearly), or io.EOF.
func (f *fileReader) nextMessage(ctx context.Context) (Message, error) {
	if f.linear {
		return f.nextLinear(ctx)
	}
	for f.next < len(f.chunks) {
		idx := f.chunks[f.next]
		if f.pending.Len() > 0 {
			// Load the chunk only if it may hold a message that comes
			// before the earliest pending one (see fileReader).
			top := &f.pending[0]
			if idx.MessageStartTime > top.msg.logTime ||
				idx.MessageStartTime == top.msg.logTime && idx.ChunkStartOffset > top.chunkOff {
				break
			}
		}
		f.next++
		if !f.wantsChunk(idx) {
			continue
		}
		if err := f.loadChunk(ctx, idx); err != nil {
			f.chunks = nil
			return Message{}, err
		}
	}
	if f.pending.Len() == 0 {
		return Message{}, io.EOF
	}
	p := heap.Pop(&f.pending).(pendingMsg)
	if p.chunk.left--; p.chunk.left == 0 {
		f.hold(-p.chunk.size)
	}
	return p.msg, nil
}

// nextLinear reads the data section record by record.
func (f *fileReader) nextLinear(ctx context.Context) (Message, error) {
	for {
		for len(f.chunkRecs) > 0 {
			if len(f.chunkRecs) < recordPrefixLen {
				return f.stopLinear(f.errorf("chunk ends inside a record header"))
			}
			op := mcap.OpCode(f.chunkRecs[0])
			n := binary.LittleEndian.Uint64(f.chunkRecs[1:])
			if n > uint64(len(f.chunkRecs)-recordPrefixLen) {
				return f.stopLinear(f.errorf("%s record in a chunk claims %d bytes, only %d left", op, n, len(f.chunkRecs)-recordPrefixLen))
			}
			body := f.chunkRecs[recordPrefixLen : recordPrefixLen+n]
			f.chunkRecs = f.chunkRecs[recordPrefixLen+n:]
			if len(f.chunkRecs) == 0 {
				f.hold(-f.held)
			}
			m, ok, err := f.linearRecord(op, body)
			if err != nil {
				return f.stopLinear(err)
			}
			if ok {
				if m.logTime < f.chunkStart || m.logTime > f.chunkEnd {
					return f.stopLinear(f.errorf("a chunk holds a message at %d ns, outside its range [%d, %d]", m.logTime, f.chunkStart, f.chunkEnd))
				}
				return m, nil
			}
		}
		if f.pos >= f.dataEnd {
			return Message{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			return f.stopLinear(f.cancelled(err, fmt.Sprintf("stopped at offset %d", f.pos)))
		}
		off := f.pos
		op, body, next, err := f.recordAt(off, f.dataEnd)
		if err != nil {
			return f.stopLinear(err)
		}
		f.pos = next
		switch op {
		case mcap.OpDataEnd:
			f.pos = f.dataEnd
		case mcap.OpChunk:
			recs, start, end, err := f.chunkRecords(ctx, body, off)
			if err != nil {
				return f.stopLinear(err)
			}
			f.chunkRecs, f.chunkStart, f.chunkEnd = recs, start, end
			if len(recs) == 0 {
				f.chunkRecs = nil
			}
			f.hold(int64(len(f.chunkRecs)))
		default:
			m, ok, err := f.linearRecord(op, body)
			if err != nil {
				return f.stopLinear(err)
			}
			if ok {
				return m, nil
			}
		}
	}
}

// linearRecord handles one record of a linear read. Messages must come in
// log-time order: a file read linearly has no index to sort them by, and
// one out of order is refused rather than returned out of order.
func (f *fileReader) linearRecord(op mcap.OpCode, body []byte) (Message, bool, error) {
	switch op {
	case mcap.OpSchema, mcap.OpChannel:
		return Message{}, false, f.addRecord(op, body)
	case mcap.OpMessage:
		m, ok, err := f.message(body)
		if err != nil || !ok {
			return m, ok, err
		}
		if f.anyLog && m.logTime < f.lastLog {
			return Message{}, false, f.errorf("message on %s at %d ns comes after one at %d ns: a file without a chunk index holding messages outside chunks must have them in log-time order (this reader does not sort them)",
				m.Topic, m.logTime, f.lastLog)
		}
		f.lastLog, f.anyLog = m.logTime, true
		return m, true, nil
	}
	return Message{}, false, nil
}

func (f *fileReader) stopLinear(err error) (Message, error) {
	f.pos = f.dataEnd
	f.chunkRecs = nil
	f.hold(-f.held)
	return Message{}, err
}

// close releases the decompressors (the Reader closes the file).
func (f *fileReader) close() error {
	if f.zstd != nil {
		f.zstd.Close()
		f.zstd = nil
	}
	return nil
}

// path names the file in errors.
func (f *fileReader) path() string { return f.name }

// startTime returns the earliest start time of the file's chunks (loadChunk
// checks every message against its chunk's range), or 0 for a file read
// linearly, which has no index to say it.
func (f *fileReader) startTime() (uint64, bool) {
	switch {
	case f.linear:
		return 0, true
	case len(f.chunks) > 0:
		return f.chunks[0].MessageStartTime, true // sorted by start time
	}
	return 0, false
}

// fileTopics lists the file's channels in channel id order, with their
// schemas, QoS profiles and message counts.
func (f *fileReader) fileTopics() ([]Topic, error) {
	ids := make([]uint16, 0, len(f.channels))
	for id := range f.channels {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	topics := make([]Topic, 0, len(ids))
	// One definition string per schema, shared by its channels: a copy
	// per channel made 65,535 channels of one large schema cost 65,535
	// copies of it.
	defs := map[uint16]string{}
	for _, id := range ids {
		ch := f.channels[id]
		t := Topic{Name: ch.Topic, MessageEncoding: ch.MessageEncoding}
		if s := f.schemas[ch.SchemaID]; s != nil {
			def, ok := defs[s.ID]
			if !ok {
				def = string(s.Data)
				defs[s.ID] = def
			}
			t.Type, t.SchemaEncoding, t.Definition = s.Name, s.Encoding, def
		}
		if q, ok := ch.Metadata[QoSMetadataKey]; ok {
			profiles, err := ParseQoSProfiles(q)
			if err != nil {
				return nil, fmt.Errorf("%w (topic %s in %s)", err, ch.Topic, f.name)
			}
			t.OfferedQoSProfiles = profiles
		}
		if f.stats != nil {
			t.MessageCount = f.stats.ChannelMessageCounts[id]
		} else {
			t.MessageCount = f.counts[id]
		}
		topics = append(topics, t)
	}
	return topics, nil
}

// maxLimit bounds ReaderOptions.MaxChunkBytes so int64 arithmetic on it
// cannot overflow.
const maxLimit = math.MaxInt64 / 4
