package msgs

// This file holds the codec helpers of the lifecycle_msgs, rcl_interfaces
// and rosgraph_msgs types (lifecycle.go, rclparams.go): the CDR field kinds
// the node's own messages do not use (int64, float64 sequences, string
// sequences, bounded sequences) and the two-pass Marshal/Unmarshal of small
// messages. These messages are small (service requests and responses,
// events), so the generic helpers below trade the stack-only encoder of
// codec.go for less code.

// Minimum wire sizes of the elements of these types' sequences, not counting
// alignment padding, used to bound allocations by the bytes left.
const (
	minString                = 4                             // length
	minInt64                 = 8                             // one int64
	minFloat64               = 8                             // one float64
	minState                 = 1 + 4                         // id, label length
	minTransitionDescription = 3 * minState                  // transition, start, goal
	minParameterValue        = 1 + 1 + 8 + 8 + 4 + 5*4       // type, bool, int64, float64, string, 5 sequence lengths
	minParameter             = 4 + minParameterValue         // name, value
	minSetParametersResult   = 1 + 4                         // successful, reason
	minRange                 = 8 + 8 + 8                     // from, to, step
	minParameterDescriptor   = 4 + 1 + 4 + 4 + 1 + 1 + 4 + 4 // name, type, 2 strings, 2 bools, 2 sequence lengths
)

// codec is what every message of this file's kind implements.
type codec interface {
	encode(e *encoder)
	decode(d *decoder)
}

// appendMessage runs the two-pass encoder over m, appending to dst.
func appendMessage(m codec, dst []byte) ([]byte, error) {
	var e encoder
	e.startSizing()
	m.encode(&e)
	if !e.startWriting(dst) {
		return dst, e.err
	}
	m.encode(&e)
	return e.finish(dst)
}

// unmarshalMessage decodes data into a fresh value and stores it in m only
// when the whole message decoded; root names the type in error paths.
func unmarshalMessage[T any, PT interface {
	*T
	codec
}](m PT, data []byte, root string) error {
	var v T
	var d decoder
	if !d.start(data, root) {
		return d.err
	}
	PT(&v).decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// encodeSeq writes a sequence of messages; path names it in errors.
func encodeSeq[T any, PT interface {
	*T
	encode(*encoder)
}](e *encoder, path string, s []T) {
	e.seqLen(path, len(s))
	for i := range s {
		PT(&s[i]).encode(e)
	}
}

// decodeSeq reads the n messages of the sequence field, n being what
// seqLen or boundedLen read (and checked against the bytes left); nil for
// n <= 0.
func decodeSeq[T any, PT interface {
	*T
	decode(*decoder)
}](d *decoder, field string, n int) []T {
	if n <= 0 {
		return nil
	}
	out := make([]T, n)
	d.enter(field)
	for i := range out {
		d.enterIndex(i)
		PT(&out[i]).decode(d)
		d.leave()
		if d.err != nil {
			break
		}
	}
	d.leave()
	return out
}

// decodeValues reads a sequence of primitive values of at least minSize
// bytes each with read. An empty sequence of 8-byte values is counted in
// d.empty8 (see decoder.empty8).
func decodeValues[T any](d *decoder, field string, minSize int, elem string, read func(string) T) []T {
	n := d.seqLen(field, minSize, elem)
	if n == 0 && minSize == 8 {
		d.empty8++
	}
	if n <= 0 {
		return nil
	}
	out := make([]T, n)
	for i := range out {
		out[i] = read(field)
	}
	return out
}

func (e *encoder) i64(v int64) { e.u64(uint64(v)) }

func (d *decoder) i64(field string) int64 { return int64(d.u64(field)) }

// boundedLen writes the length of a bounded sequence (T[<=max]), failing
// when n exceeds the bound.
func (e *encoder) boundedLen(path string, n, bound int) {
	if n > bound {
		e.fail(newError(path, ErrMalformed, "%d elements in a sequence bounded to at most %d", n, bound))
	}
	e.seqLen(path, n)
}

// boundedLen reads the length of a bounded sequence, failing (-1) when it
// exceeds the bound or the bytes left.
func (d *decoder) boundedLen(field string, bound, minSize int, elem string) int {
	n := d.seqLen(field, minSize, elem)
	if n > bound {
		d.failf(field, ErrMalformed, "sequence of %d %s, bounded to at most %d", n, elem, bound)
		return -1
	}
	return n
}

func (e *encoder) strings(path string, s []string) {
	e.seqLen(path, len(s))
	for _, v := range s {
		e.str(path, v)
	}
}

func (d *decoder) strings(field string) []string {
	n := d.seqLen(field, minString, "strings")
	if n <= 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str(field)
		if d.err != nil {
			return nil
		}
	}
	return out
}

func (e *encoder) bytesSeq(path string, b []byte) {
	e.seqLen(path, len(b))
	e.raw(b)
}

// bytesSeq reads a byte sequence into a copy (these messages are small and
// outlive their buffers).
func (d *decoder) bytesSeq(field string) []byte {
	n := d.seqLen(field, minByte, "bytes")
	if n <= 0 {
		return nil
	}
	b := d.view(field, n)
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func (e *encoder) bools(path string, v []bool) {
	e.seqLen(path, len(v))
	for _, b := range v {
		e.boolean(b)
	}
}

func (d *decoder) bools(field string) []bool {
	return decodeValues(d, field, minBool, "bools", d.boolean)
}

func (e *encoder) int64s(path string, v []int64) {
	e.seqLen(path, len(v))
	for _, x := range v {
		e.i64(x)
	}
}

func (d *decoder) int64s(field string) []int64 {
	return decodeValues(d, field, minInt64, "int64 values", d.i64)
}

func (e *encoder) float64s(path string, v []float64) {
	e.seqLen(path, len(v))
	for _, x := range v {
		e.f64(x)
	}
}

func (d *decoder) float64s(field string) []float64 {
	return decodeValues(d, field, minFloat64, "float64 values", d.f64)
}

func (d *decoder) uint8s(field string) []uint8 { return d.bytesSeq(field) }
