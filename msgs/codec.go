package msgs

// This file holds the CDR layout of every message: one encode and one decode
// function per type, fields in .msg order. Decoded sequences of length zero
// are nil, so a decoded zero-value message equals the zero value.
//
// The data path's types spell out their AppendCDR and UnmarshalCDR instead
// of calling svccodec.go's appendMessage and unmarshalMessage: through those
// the encoder or decoder escapes to the heap (its address goes to a method
// called through an interface or a generic dictionary), one allocation per
// message, which TestHostPathSmall and the executor's benchmark count.

// Minimum wire sizes of sequence elements, used to bound allocations by the
// bytes actually left in a message.
const (
	minActionRow        = 4           // values length
	minKeyValue         = 4 + 4       // two string lengths
	minDiagnosticStatus = 1 + 3*4 + 4 // level, three string lengths, values length
	minTensorShapeDim   = 4           // one uint32
	minBool             = 1           // one byte
	minFloat32          = 4           // one float32
	minByte             = 1           // one byte
)

// --- builtin_interfaces/Time ---

func (m *Time) encode(e *encoder) {
	e.i32(m.Sec)
	e.u32(m.Nanosec)
}

func (m *Time) decode(d *decoder) {
	m.Sec = d.i32("sec")
	m.Nanosec = d.u32("nanosec")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Time) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Time) AppendCDR(dst []byte) ([]byte, error) {
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
func (m *Time) UnmarshalCDR(data []byte) error {
	var v Time
	var d decoder
	if !d.start(data, "Time") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// --- std_msgs/Header ---

func (m *Header) encode(e *encoder) {
	m.Stamp.encode(e)
	e.str("Header.frame_id", m.FrameID)
}

func (m *Header) decode(d *decoder) {
	d.enter("stamp")
	m.Stamp.decode(d)
	d.leave()
	m.FrameID = d.strReuse("frame_id", m.FrameID)
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *Header) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *Header) AppendCDR(dst []byte) ([]byte, error) {
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
func (m *Header) UnmarshalCDR(data []byte) error {
	var v Header
	var d decoder
	if !d.start(data, "Header") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// --- Tensor ---

// encode writes the tensor; path names it in a validation error.
func (t *Tensor) encode(e *encoder, path string) {
	if e.sizing {
		if err := t.validate(path); err != nil {
			e.fail(err)
			return
		}
	}
	e.seqLen("Tensor.shape", len(t.Shape))
	for _, v := range t.Shape {
		e.u32(v)
	}
	e.u8(t.DType)
	e.seqLen("Tensor.data", len(t.Data))
	e.raw(t.Data)
}

// decode reads the tensor, its Data viewing the message, and validates it.
func (t *Tensor) decode(d *decoder) {
	n := d.seqLen("shape", minTensorShapeDim, "uint32 dimensions")
	t.Shape = reuse(t.Shape, n)
	for i := range t.Shape {
		t.Shape[i] = d.u32("shape")
	}
	t.DType = d.u8("dtype")
	n = d.seqLen("data", minByte, "bytes")
	t.Data = nil
	if n > 0 {
		t.Data = d.view("data", n)
	}
	if d.err == nil {
		if err := t.validate(""); err != nil {
			err.Path = d.pathTo("") // named only on failure: no allocation otherwise
			d.err = err
		}
	}
}

// MarshalCDR encodes the message as CDR, encapsulation header included. It
// fails when the tensor does not pass Validate.
func (t *Tensor) MarshalCDR() ([]byte, error) { return t.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to
// dst, growing it at most once, so the payload is copied once.
func (t *Tensor) AppendCDR(dst []byte) ([]byte, error) {
	var e encoder
	e.startSizing()
	t.encode(&e, "Tensor")
	if !e.startWriting(dst) {
		return dst, e.err
	}
	t.encode(&e, "Tensor")
	return e.finish(dst)
}

// UnmarshalCDR decodes a CDR message into t, which is left unchanged on
// error. t.Data views data (no copy): data must outlive t and stay unchanged.
func (t *Tensor) UnmarshalCDR(data []byte) error {
	var v Tensor
	var d decoder
	if !d.start(data, "Tensor") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*t = v
	return nil
}

// --- VideoKVCache ---

func (m *VideoKVCache) encode(e *encoder) {
	m.Header.encode(e)
	e.u64(m.Seq)
	e.u32(m.VisibleVideoTokens)
	m.Keys.encode(e, "VideoKVCache.keys")
	m.Values.encode(e, "VideoKVCache.values")
}

func (m *VideoKVCache) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	m.Seq = d.u64("seq")
	m.VisibleVideoTokens = d.u32("visible_video_tokens")
	d.enter("keys")
	m.Keys.decode(d)
	d.leave()
	d.enter("values")
	m.Values.decode(d)
	d.leave()
}

// MarshalCDR encodes the message as CDR, encapsulation header included. It
// fails when a tensor does not pass Validate.
func (m *VideoKVCache) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to
// dst, growing it at most once, so each payload is copied once.
func (m *VideoKVCache) AppendCDR(dst []byte) ([]byte, error) {
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
// error. The tensors' Data view data (no copy): data must outlive m and stay
// unchanged. Each tensor is validated (shape against byte count).
func (m *VideoKVCache) UnmarshalCDR(data []byte) error {
	var v VideoKVCache
	var d decoder
	if !d.start(data, "VideoKVCache") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalCDRReuse decodes a CDR message into m like UnmarshalCDR, but in
// place, reusing m's shape slices and its frame id when unchanged, so that
// decoding a stream of messages of one layout allocates nothing. On error
// m holds unspecified values. The tensors' Data view data.
func (m *VideoKVCache) UnmarshalCDRReuse(data []byte) error {
	var d decoder
	if !d.start(data, "VideoKVCache") {
		return d.err
	}
	m.decode(&d)
	return d.finish()
}

// --- TextContext ---

func (m *TextContext) encode(e *encoder) {
	m.Header.encode(e)
	e.u64(m.Seq)
	e.str("TextContext.instruction", m.Instruction)
	m.Context.encode(e, "TextContext.context")
	e.seqLen("TextContext.attention_mask", len(m.AttentionMask))
	for _, v := range m.AttentionMask {
		e.boolean(v)
	}
}

func (m *TextContext) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	m.Seq = d.u64("seq")
	m.Instruction = d.strReuse("instruction", m.Instruction)
	d.enter("context")
	m.Context.decode(d)
	d.leave()
	n := d.seqLen("attention_mask", minBool, "bools")
	m.AttentionMask = reuse(m.AttentionMask, n)
	for i := range m.AttentionMask {
		m.AttentionMask[i] = d.boolean("attention_mask")
	}
}

// reuse returns s resized to n elements, in its own array when that is
// large enough, or nil for n <= 0 (a decoded empty sequence is nil; a
// failed length read is negative).
func reuse[T any](s []T, n int) []T {
	if n <= 0 {
		return nil
	}
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// MarshalCDR encodes the message as CDR, encapsulation header included. It
// fails when the context tensor does not pass Validate.
func (m *TextContext) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *TextContext) AppendCDR(dst []byte) ([]byte, error) {
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
// error. Context.Data views data (no copy): data must outlive m and stay
// unchanged.
func (m *TextContext) UnmarshalCDR(data []byte) error {
	var v TextContext
	var d decoder
	if !d.start(data, "TextContext") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalCDRReuse decodes a CDR message into m like UnmarshalCDR, but in
// place, reusing m's shape and mask slices and its strings when unchanged.
// On error m holds unspecified values. Context.Data views data.
func (m *TextContext) UnmarshalCDRReuse(data []byte) error {
	var d decoder
	if !d.start(data, "TextContext") {
		return d.err
	}
	m.decode(&d)
	return d.finish()
}

// --- ActionRow ---

func (m *ActionRow) encode(e *encoder) {
	e.seqLen("ActionRow.values", len(m.Values))
	for _, v := range m.Values {
		e.f32(v)
	}
}

func (m *ActionRow) decode(d *decoder) {
	n := d.seqLen("values", minFloat32, "float32 values")
	if n > 0 {
		m.Values = make([]float32, n)
		for i := range m.Values {
			m.Values[i] = d.f32("values")
		}
	}
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ActionRow) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ActionRow) AppendCDR(dst []byte) ([]byte, error) {
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
func (m *ActionRow) UnmarshalCDR(data []byte) error {
	var v ActionRow
	var d decoder
	if !d.start(data, "ActionRow") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// --- ActionChunk ---

func (m *ActionChunk) encode(e *encoder) {
	m.Header.encode(e)
	e.u64(m.Seq)
	e.u64(m.KVSeq)
	e.u64(m.ContextSeq)
	e.seqLen("ActionChunk.actions", len(m.Actions))
	for i := range m.Actions {
		m.Actions[i].encode(e)
	}
	e.u32(m.Steps)
	e.f32(m.Shift)
	e.u64(m.NoiseSeed)
	e.str("ActionChunk.backend", m.Backend)
	e.f32(m.DenoiseMs)
	e.f32(m.ReceiveToPublishMs)
	e.f32(m.InputAgeMs)
	e.boolean(m.DryRun)
	e.boolean(m.Clipped)
	e.boolean(m.StaleInput)
	e.f64(m.Dt)
	e.u32(m.InferenceDelay)
	e.str("ActionChunk.rtc_mode", m.RTCMode)
	e.u64(m.RTCPrevSeq)
	e.u32(m.RTCShift)
	e.u32(m.RTCDelay)
	e.u32(m.RTCHorizon)
	e.str("ActionChunk.rtc_schedule", m.RTCSchedule)
	e.f32(m.RTCMaxGuidance)
}

func (m *ActionChunk) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	m.Seq = d.u64("seq")
	m.KVSeq = d.u64("kv_seq")
	m.ContextSeq = d.u64("context_seq")
	n := d.seqLen("actions", minActionRow, "ActionRows")
	if n > 0 {
		m.Actions = make([]ActionRow, n)
		d.enter("actions")
		for i := range m.Actions {
			d.enterIndex(i)
			m.Actions[i].decode(d)
			d.leave()
			if d.err != nil {
				break
			}
		}
		d.leave()
	}
	m.Steps = d.u32("steps")
	m.Shift = d.f32("shift")
	m.NoiseSeed = d.u64("noise_seed")
	m.Backend = d.str("backend")
	m.DenoiseMs = d.f32("denoise_ms")
	m.ReceiveToPublishMs = d.f32("receive_to_publish_ms")
	m.InputAgeMs = d.f32("input_age_ms")
	m.DryRun = d.boolean("dry_run")
	m.Clipped = d.boolean("clipped")
	m.StaleInput = d.boolean("stale_input")
	m.Dt = d.f64("dt")
	m.InferenceDelay = d.u32("inference_delay")
	m.RTCMode = d.str("rtc_mode")
	m.RTCPrevSeq = d.u64("rtc_prev_seq")
	m.RTCShift = d.u32("rtc_shift")
	m.RTCDelay = d.u32("rtc_delay")
	m.RTCHorizon = d.u32("rtc_horizon")
	m.RTCSchedule = d.str("rtc_schedule")
	m.RTCMaxGuidance = d.f32("rtc_max_guidance")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *ActionChunk) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *ActionChunk) AppendCDR(dst []byte) ([]byte, error) {
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
func (m *ActionChunk) UnmarshalCDR(data []byte) error {
	var v ActionChunk
	var d decoder
	if !d.start(data, "ActionChunk") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// --- diagnostic_msgs/KeyValue ---

func (m *KeyValue) encode(e *encoder) {
	e.str("KeyValue.key", m.Key)
	e.str("KeyValue.value", m.Value)
}

func (m *KeyValue) decode(d *decoder) {
	m.Key = d.str("key")
	m.Value = d.str("value")
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *KeyValue) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *KeyValue) AppendCDR(dst []byte) ([]byte, error) {
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
func (m *KeyValue) UnmarshalCDR(data []byte) error {
	var v KeyValue
	var d decoder
	if !d.start(data, "KeyValue") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// --- diagnostic_msgs/DiagnosticStatus ---

func (m *DiagnosticStatus) encode(e *encoder) {
	e.u8(m.Level)
	e.str("DiagnosticStatus.name", m.Name)
	e.str("DiagnosticStatus.message", m.Message)
	e.str("DiagnosticStatus.hardware_id", m.HardwareID)
	e.seqLen("DiagnosticStatus.values", len(m.Values))
	for i := range m.Values {
		m.Values[i].encode(e)
	}
}

func (m *DiagnosticStatus) decode(d *decoder) {
	m.Level = d.u8("level")
	m.Name = d.str("name")
	m.Message = d.str("message")
	m.HardwareID = d.str("hardware_id")
	n := d.seqLen("values", minKeyValue, "KeyValues")
	if n > 0 {
		m.Values = make([]KeyValue, n)
		d.enter("values")
		for i := range m.Values {
			d.enterIndex(i)
			m.Values[i].decode(d)
			d.leave()
			if d.err != nil {
				break
			}
		}
		d.leave()
	}
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *DiagnosticStatus) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *DiagnosticStatus) AppendCDR(dst []byte) ([]byte, error) {
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
func (m *DiagnosticStatus) UnmarshalCDR(data []byte) error {
	var v DiagnosticStatus
	var d decoder
	if !d.start(data, "DiagnosticStatus") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}

// --- diagnostic_msgs/DiagnosticArray ---

func (m *DiagnosticArray) encode(e *encoder) {
	m.Header.encode(e)
	e.seqLen("DiagnosticArray.status", len(m.Status))
	for i := range m.Status {
		m.Status[i].encode(e)
	}
}

func (m *DiagnosticArray) decode(d *decoder) {
	d.enter("header")
	m.Header.decode(d)
	d.leave()
	n := d.seqLen("status", minDiagnosticStatus, "DiagnosticStatuses")
	if n > 0 {
		m.Status = make([]DiagnosticStatus, n)
		d.enter("status")
		for i := range m.Status {
			d.enterIndex(i)
			m.Status[i].decode(d)
			d.leave()
			if d.err != nil {
				break
			}
		}
		d.leave()
	}
}

// MarshalCDR encodes the message as CDR, encapsulation header included.
func (m *DiagnosticArray) MarshalCDR() ([]byte, error) { return m.AppendCDR(nil) }

// AppendCDR appends the CDR encoding of the message (header included) to dst.
func (m *DiagnosticArray) AppendCDR(dst []byte) ([]byte, error) {
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
func (m *DiagnosticArray) UnmarshalCDR(data []byte) error {
	var v DiagnosticArray
	var d decoder
	if !d.start(data, "DiagnosticArray") {
		return d.err
	}
	v.decode(&d)
	if err := d.finish(); err != nil {
		return err
	}
	*m = v
	return nil
}
