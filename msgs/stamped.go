package msgs

// --- StampedAction ---

func (m *StampedAction) encode(e *encoder) {
	m.Header.encode(e)
	e.seqLen("StampedAction.values", len(m.Values))
	for _, v := range m.Values {
		e.f32(v)
	}
	e.u64(m.ChunkSeq)
	e.u32(m.Row)
	e.u32(m.Aggregated)
	e.boolean(m.Held)
}

func (m *StampedAction) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	n := d.seqLen("values", minFloat32, "float32 values")
	m.Values = reuse(m.Values, n)
	for i := range m.Values {
		m.Values[i] = d.f32("values")
	}
	m.ChunkSeq = d.u64("chunk_seq")
	m.Row = d.u32("row")
	m.Aggregated = d.u32("aggregated")
	m.Held = d.boolean("held")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *StampedAction) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to
// dst; the executor appends every action to one reused buffer.
func (m *StampedAction) AppendCDR(dst []byte) ([]byte, error) {
	var e encoder
	e.startSizing()
	m.encode(&e)
	if !e.startWriting(dst) {
		return dst, e.err
	}
	m.encode(&e)
	return e.finish(dst)
}

// UnmarshalCDR decodes a CDR message into m, which is left unchanged on error.
func (m *StampedAction) UnmarshalCDR(data []byte) error {
	var v StampedAction
	var d decoder
	if !d.start(data, "StampedAction") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}
