package msgs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Kinds of codec errors. Every error returned by the codec is an *Error whose
// Kind is one of these, so errors.Is(err, ErrTruncated) and friends tell a
// caller why a message was rejected.
var (
	// ErrEncapsulation: the message does not start with the CDR little-endian
	// encapsulation header 00 01 00 00.
	ErrEncapsulation = errors.New("bad CDR encapsulation")
	// ErrTruncated: a field, a length or a sequence runs past the end of the
	// message.
	ErrTruncated = errors.New("truncated CDR message")
	// ErrTensorShape: a tensor's shape, element type and byte count disagree.
	ErrTensorShape = errors.New("tensor shape does not match its data")
	// ErrMalformed: any other invalid content (a bool that is neither 0 nor 1,
	// a string without its terminating NUL, bytes after the message, a value
	// too large to encode, a destination of the wrong size).
	ErrMalformed = errors.New("malformed message")
)

// Error is a codec error: what was wrong (Msg), where (Path, a ROS field path
// such as "VideoKVCache.keys" or "ActionChunk.actions[3].values") and its
// Kind, one of the Err* values of this package.
type Error struct {
	Path string
	Kind error
	Msg  string
}

// Error formats the error as "msgs: <path>: <message>".
func (e *Error) Error() string { return "msgs: " + e.Path + ": " + e.Msg }

// Unwrap returns the error's Kind.
func (e *Error) Unwrap() error { return e.Kind }

func newError(path string, kind error, format string, args ...any) *Error {
	return &Error{Path: path, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// cdrHeader is the encapsulation header of a little-endian plain CDR (XCDR1)
// message: representation identifier CDR_LE (0x0001) and zero options.
const cdrHeader = "\x00\x01\x00\x00"

// maxTrailing is the number of bytes a message may carry after its last
// field: RTPS serialized payloads are padded to a multiple of four bytes and
// some middlewares hand that padding over with the message.
const maxTrailing = 3

// encoder writes CDR fields. It runs twice per message: first in sizing mode
// (buf unused) to validate the message and compute its exact size, then in
// write mode appending to a buffer grown once to that size, so a large
// tensor payload is copied exactly once.
type encoder struct {
	sizing bool
	buf    []byte
	off    int // bytes since the origin (the first byte after the header)
	size   int // the message size measured by the sizing pass
	err    error
}

func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *encoder) align(n int) {
	p := (n - e.off%n) % n
	if !e.sizing {
		for range p {
			e.buf = append(e.buf, 0)
		}
	}
	e.off += p
}

func (e *encoder) u8(v uint8) {
	if !e.sizing {
		e.buf = append(e.buf, v)
	}
	e.off++
}

func (e *encoder) boolean(v bool) {
	var b uint8
	if v {
		b = 1
	}
	e.u8(b)
}

func (e *encoder) u32(v uint32) {
	e.align(4)
	if !e.sizing {
		e.buf = binary.LittleEndian.AppendUint32(e.buf, v)
	}
	e.off += 4
}

func (e *encoder) i32(v int32) { e.u32(uint32(v)) }

func (e *encoder) f32(v float32) { e.u32(math.Float32bits(v)) }

func (e *encoder) f64(v float64) { e.u64(math.Float64bits(v)) }

func (e *encoder) u64(v uint64) {
	e.align(8)
	if !e.sizing {
		e.buf = binary.LittleEndian.AppendUint64(e.buf, v)
	}
	e.off += 8
}

// seqLen writes a sequence or string length, failing when n does not fit
// the uint32 of the wire format.
func (e *encoder) seqLen(path string, n int) {
	if uint64(n) > math.MaxUint32 {
		e.fail(newError(path, ErrMalformed, "%d elements do not fit a CDR sequence (at most %d)", n, uint32(math.MaxUint32)))
	}
	e.u32(uint32(n))
}

func (e *encoder) str(path, s string) {
	e.seqLen(path, len(s)+1)
	if !e.sizing {
		e.buf = append(e.buf, s...)
		e.buf = append(e.buf, 0)
	}
	e.off += len(s) + 1
}

func (e *encoder) raw(b []byte) {
	if !e.sizing {
		e.buf = append(e.buf, b...)
	}
	e.off += len(b)
}

// The AppendCDR methods run an encoder in two passes over their message:
//
//	var e encoder
//	e.startSizing()
//	m.encode(&e)
//	if !e.startWriting(dst) {
//		return dst, e.err
//	}
//	m.encode(&e)
//	return e.finish(dst)
//
// Calling encode directly (not through a function value) keeps the encoder
// on the stack: appending into a large enough dst allocates nothing.

func (e *encoder) startSizing() { *e = encoder{sizing: true} }

// startWriting ends the sizing pass and prepares to append the header and
// the message to dst, growing it once. It reports false when the sizing
// pass failed.
func (e *encoder) startWriting(dst []byte) bool {
	if e.err != nil {
		return false
	}
	e.size = e.off
	e.buf = append(slices.Grow(dst, len(cdrHeader)+e.size), cdrHeader...)
	e.off = 0
	e.sizing = false
	return true
}

// finish returns the encoded message, or dst and an error when the writing
// pass did not produce what the sizing pass measured.
func (e *encoder) finish(dst []byte) ([]byte, error) {
	if e.off != e.size || e.err != nil {
		// Both passes run the same code over the same value; a difference
		// means the value changed concurrently.
		return dst, newError("message", ErrMalformed, "message changed while being encoded")
	}
	return e.buf, nil
}

// pathElem is one step of a decoder's field path: a field name or, when
// name is empty, a sequence index.
type pathElem struct {
	name  string
	index int
}

// maxPath is the deepest field path the decoder records (DiagnosticArray
// .status[i].values[j] needs 5 levels).
const maxPath = 8

// decoder reads CDR fields with bounds checks. The first failure is kept in
// err and every later read returns zero values, so decode functions read
// straight through and the caller checks err once. The UnmarshalCDR methods
// run it as
//
//	var d decoder
//	if !d.start(data, "Type") {
//		return d.err
//	}
//	v.decode(&d)
//	if err := d.finish(); err != nil {
//		return err
//	}
//
// calling decode directly so that the decoder stays on the stack.
type decoder struct {
	data   []byte
	origin int // index in data of the first byte after the header
	pos    int
	err    error
	path   [maxPath]pathElem
	depth  int // entries of path in use (may exceed maxPath; extra levels are not recorded)

	// empty8 counts the empty int64 and float64 sequences decoded: Fast
	// DDS's rmw_serialize (Humble) reports the size it estimated, which
	// counts up to 7 bytes of alignment for each, as the message's
	// length; finish allows that many more bytes at the end.
	empty8 int
}

func (d *decoder) enter(name string) {
	if d.depth < maxPath {
		d.path[d.depth] = pathElem{name: name}
	}
	d.depth++
}

func (d *decoder) enterIndex(i int) {
	if d.depth < maxPath {
		d.path[d.depth] = pathElem{index: i}
	}
	d.depth++
}

func (d *decoder) leave() { d.depth-- }

// pathTo formats the current path followed by field (when not empty).
func (d *decoder) pathTo(field string) string {
	var b strings.Builder
	for i, p := range d.path[:min(d.depth, maxPath)] {
		switch {
		case p.name == "":
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.index))
			b.WriteByte(']')
		case i > 0:
			b.WriteByte('.')
			b.WriteString(p.name)
		default:
			b.WriteString(p.name)
		}
	}
	if field != "" {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(field)
	}
	return b.String()
}

func (d *decoder) failf(field string, kind error, format string, args ...any) {
	if d.err == nil {
		d.err = newError(d.pathTo(field), kind, format, args...)
	}
}

func (d *decoder) left() int { return len(d.data) - d.pos }

// need reports whether n more bytes are available, failing otherwise.
func (d *decoder) need(field string, n int, what string) bool {
	if d.err != nil {
		return false
	}
	if n > d.left() {
		d.failf(field, ErrTruncated, "%s needs %d bytes at offset %d, only %d left", what, n, d.pos-d.origin, d.left())
		return false
	}
	return true
}

func (d *decoder) align(field string, n int) bool {
	p := (n - (d.pos-d.origin)%n) % n
	if !d.need(field, p, "alignment padding") {
		return false
	}
	d.pos += p
	return true
}

func (d *decoder) u8(field string) uint8 {
	if !d.need(field, 1, "uint8") {
		return 0
	}
	v := d.data[d.pos]
	d.pos++
	return v
}

func (d *decoder) boolean(field string) bool {
	if !d.need(field, 1, "bool") {
		return false
	}
	v := d.data[d.pos]
	if v > 1 {
		d.failf(field, ErrMalformed, "bool is %d at offset %d, want 0 or 1", v, d.pos-d.origin)
		return false
	}
	d.pos++
	return v == 1
}

func (d *decoder) u32(field string) uint32 {
	if !d.align(field, 4) || !d.need(field, 4, "uint32") {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.data[d.pos:])
	d.pos += 4
	return v
}

func (d *decoder) i32(field string) int32 { return int32(d.u32(field)) }

func (d *decoder) f32(field string) float32 { return math.Float32frombits(d.u32(field)) }

func (d *decoder) f64(field string) float64 { return math.Float64frombits(d.u64(field)) }

func (d *decoder) u64(field string) uint64 {
	if !d.align(field, 8) || !d.need(field, 8, "uint64") {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.data[d.pos:])
	d.pos += 8
	return v
}

// seqLen reads a sequence length and checks that the elements can fit in
// what is left of the message, each taking at least minSize bytes, so that
// no allocation is ever sized by an unchecked length. It returns -1 on
// failure.
func (d *decoder) seqLen(field string, minSize int, elem string) int {
	n := d.u32(field)
	if d.err != nil {
		return -1
	}
	// Sequence elements start aligned; the first element's padding is at
	// most 7 bytes and is not counted, which only makes the check looser
	// by a constant.
	if need := uint64(n) * uint64(minSize); need > uint64(d.left()) {
		d.failf(field, ErrTruncated, "sequence of %d %s needs at least %d bytes, only %d left", n, elem, need, d.left())
		return -1
	}
	return int(n)
}

// view returns the next n bytes without copying them. The result's capacity
// is its length, so appending to it never writes into the message.
func (d *decoder) view(field string, n int) []byte {
	if !d.need(field, n, "data") {
		return nil
	}
	b := d.data[d.pos : d.pos+n : d.pos+n]
	d.pos += n
	return b
}

func (d *decoder) str(field string) string { return d.strReuse(field, "") }

// strReuse reads a string and returns old when it has the same bytes, so
// that decoding into a reused message does not allocate a string that
// has not changed.
func (d *decoder) strReuse(field, old string) string {
	n := d.u32(field)
	if d.err != nil {
		return ""
	}
	if n == 0 {
		// Not valid XCDR1 (the length counts the NUL), but some encoders
		// write an empty string that way; it is unambiguous.
		return ""
	}
	if uint64(n) > uint64(d.left()) {
		d.failf(field, ErrTruncated, "string length %d runs past the end of the message (%d bytes left)", n, d.left())
		return ""
	}
	b := d.data[d.pos : d.pos+int(n)]
	if b[n-1] != 0 {
		d.failf(field, ErrMalformed, "string of length %d does not end with NUL", n)
		return ""
	}
	d.pos += int(n)
	if string(b[:n-1]) == old {
		return old
	}
	return string(b[:n-1])
}

// start checks the encapsulation header of data and prepares to decode the
// body; root names the message type in error paths. It reports false (with
// d.err set) when the header is missing or not CDR little-endian.
func (d *decoder) start(data []byte, root string) bool {
	*d = decoder{data: data, origin: len(cdrHeader), pos: len(cdrHeader)}
	d.enter(root)
	if len(data) < len(cdrHeader) {
		d.err = newError(root, ErrTruncated, "message is %d bytes, shorter than the 4-byte CDR encapsulation header", len(data))
		return false
	}
	if data[0] != cdrHeader[0] || data[1] != cdrHeader[1] {
		d.err = newError(root, ErrEncapsulation, "encapsulation %02x %02x is not CDR little-endian (want 00 01, the header 00 01 00 00)", data[0], data[1])
		return false
	}
	return true
}

// finish returns the decoding error, if any, or an error when more than
// padding follows the message.
func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if allowed := maxTrailing + 7*d.empty8; d.left() > allowed {
		return newError(d.pathTo(""), ErrMalformed, "%d unexpected bytes after the message (at most %d bytes of padding allowed)", d.left(), allowed)
	}
	return nil
}
