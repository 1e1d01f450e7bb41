package msgs

import "math/bits"

// --- SharedTensor ---

func (t *SharedTensor) encode(e *encoder) {
	e.seqLen("SharedTensor.shape", len(t.Shape))
	for _, v := range t.Shape {
		e.u32(v)
	}
	e.u8(t.DType)
	e.u64(t.Offset)
	e.u64(t.Length)
}

func (t *SharedTensor) decode(d *decoder) {
	n := d.seqLen("shape", minTensorShapeDim, "uint32 dimensions")
	t.Shape = reuse(t.Shape, n)
	for i := range t.Shape {
		t.Shape[i] = d.u32("shape")
	}
	t.DType = d.u8("dtype")
	t.Offset = d.u64("offset")
	t.Length = d.u64("length")
}

// Bytes is the byte count the tensor's shape and dtype need, checked
// against Length: an unknown dtype, a product that overflows or a length
// that differs is an error naming what was declared.
func (t *SharedTensor) Bytes() (uint64, error) {
	size, name, ok := elemSize(t.DType)
	if !ok {
		return 0, newError("SharedTensor", ErrTensorShape, "dtype %d is not DTYPE_FLOAT32 (%d) or DTYPE_FLOAT16 (%d)", t.DType, DTypeFloat32, DTypeFloat16)
	}
	need := uint64(size)
	for _, dim := range t.Shape {
		hi, lo := bits.Mul64(need, uint64(dim))
		if hi != 0 {
			return 0, newError("SharedTensor", ErrTensorShape, "shape %v needs 2^64 or more bytes of %s", t.Shape, name)
		}
		need = lo
	}
	if need != t.Length {
		return 0, newError("SharedTensor", ErrTensorShape, "shape %v needs %d bytes of %s, length says %d", t.Shape, need, name, t.Length)
	}
	return need, nil
}

// --- KVHandoff ---

func (m *KVHandoff) encode(e *encoder) {
	m.Header.encode(e)
	e.u64(m.Seq)
	e.u32(m.VisibleVideoTokens)
	e.str("KVHandoff.segment", m.Segment)
	e.u32(m.Slot)
	e.u64(m.Generation)
	m.Keys.encode(e)
	m.Values.encode(e)
}

func (m *KVHandoff) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	m.Seq = d.u64("seq")
	m.VisibleVideoTokens = d.u32("visible_video_tokens")
	m.Segment = d.strReuse("segment", m.Segment)
	m.Slot = d.u32("slot")
	m.Generation = d.u64("generation")
	d.enter("keys")
	m.Keys.decode(d)
	d.leave()
	d.enter("values")
	m.Values.decode(d)
	d.leave()
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *KVHandoff) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *KVHandoff) AppendCDR(dst []byte) ([]byte, error) {
	var e encoder
	e.startSizing()
	m.encode(&e)
	if !e.startWriting(dst) {
		return dst, e.err
	}
	m.encode(&e)
	return e.finish(dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on
// error. Nothing in it is checked against a segment: see kvshm.
func (m *KVHandoff) UnmarshalCDR(data []byte) error {
	var v KVHandoff
	if err := v.UnmarshalCDRReuse(data); err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalCDRReuse decodes a CDR message into m in place, reusing its
// shape slices and segment name when unchanged (no allocation for a stream
// of one layout). On error m holds unspecified values.
func (m *KVHandoff) UnmarshalCDRReuse(data []byte) error {
	var d decoder
	if !d.start(data, "KVHandoff") {
		return d.err
	}
	m.decode(&d)
	return d.finish()
}
