package qnnrt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// Link makes input in of graph dst read output out of graph src in place:
// dst's Qnn_Tensor_t for that input points at the very memory src's
// execute writes (the same client buffer), so a chain of graphs hands its
// tensors on without a host copy, within one context or across the
// session's contexts. Both graphs must belong to s; the two tensors must
// have the same data type, shape and quantization.
//
// From then on the input cannot be written (SetInput, InputBuffer,
// ShareInputs and a non-nil Run entry are refused), and an execute of dst
// fails until src has executed successfully (the last execute of src, if
// it failed, counts). One output may feed several inputs. A link lasts as
// long as the session.
func (s *Session) Link(src *Graph, out string, dst *Graph, in string) error {
	o, t, unlock, err := s.lockPair("Link", src, out, dst, in)
	if err != nil {
		return err
	}
	defer unlock()
	if o.shared != nil && !o.shared.owner {
		return fmt.Errorf("qnnrt: Link: output %q of graph %q writes into another graph's input (BindOutput); it cannot also feed a link", out, src.info.Name)
	}
	if o.info.DataType != t.info.DataType || !slices.Equal(o.info.Dims, t.info.Dims) || o.info.Quant != t.info.Quant {
		return fmt.Errorf("qnnrt: Link: output %q of graph %q is %s (%s) but input %q of graph %q is %s (%s); they must match",
			out, src.info.Name, o.info.Shape(), describeTensor(o.info), in, dst.info.Name, t.info.Shape(), describeTensor(t.info))
	}
	switch {
	case t.link == o:
		return nil
	case t.link != nil:
		return fmt.Errorf("qnnrt: Link: input %q of graph %q already reads output %q of graph %q", in, dst.info.Name, t.link.info.Name, t.linkGraph.info.Name)
	case t.shared != nil:
		return fmt.Errorf("qnnrt: Link: input %q of graph %q lives in a shared buffer (ShareInputs); it cannot also read another graph's output", in, dst.info.Name)
	}
	if err := t.raw.free(); err != nil {
		return err
	}
	t.buf, t.link, t.linkGraph, t.set = o.buf, o, src, true
	o.linkedBy = append(o.linkedBy, t)
	v := &t.slot.V2.tensorV1
	if o.shared == nil {
		v.MemType = memTypeRaw
		v.ClientBuf = clientBuffer{Data: o.buf, DataSize: uint32(o.info.Bytes())}
		return nil
	}
	// The output already lives in a shared buffer (LinkShared): the input
	// reads it through a registration in its own context.
	_, err = s.shareInput(src, o, dst, t) // falls back to a RAW view of the shared memory
	return err
}

// lockPair checks that src and dst are two graphs of s, takes the link
// lock and both graphs' locks (in session order, so two callers cannot
// deadlock), and returns output out of src and input in of dst with the
// function that releases the locks. op names the caller in its errors.
func (s *Session) lockPair(op string, src *Graph, out string, dst *Graph, in string) (o, t *ioTensor, unlock func(), err error) {
	if src == nil || dst == nil || src.s != s || dst.s != s {
		return nil, nil, nil, fmt.Errorf("qnnrt: %s: both graphs must belong to this session", op)
	}
	if src == dst {
		return nil, nil, nil, fmt.Errorf("qnnrt: %s: graph %q cannot feed its own input", op, src.info.Name)
	}
	s.linkMu.Lock()
	a, b := src, dst
	if a.pos > b.pos {
		a, b = b, a
	}
	a.mu.Lock()
	b.mu.Lock()
	unlock = func() {
		b.mu.Unlock()
		a.mu.Unlock()
		s.linkMu.Unlock()
	}
	oi, ii := src.OutputIndex(out), dst.InputIndex(in)
	switch {
	case src.closed || dst.closed:
		err = fmt.Errorf("qnnrt: %s: session is closed", op)
	case oi < 0:
		err = fmt.Errorf("qnnrt: %s: graph %q has no output %q", op, src.info.Name, out)
	case ii < 0:
		err = fmt.Errorf("qnnrt: %s: graph %q has no input %q", op, dst.info.Name, in)
	}
	if err != nil {
		unlock()
		return nil, nil, nil, err
	}
	return src.out[oi], dst.in[ii], unlock, nil
}

// LinkShared is Link with the tensor in an rpcmem shared buffer
// registered with both graphs' contexts (once when they share a context):
// the output is written and the input read in place on the DSP side too,
// where Link's RAW client buffer is copied to the DSP at every execute of
// dst. When rpcmem or the registration is unavailable the link stays a
// RAW one, a warning is reported once (Options.Logf, Library.Warnings)
// and it returns false with a nil error.
func (s *Session) LinkShared(src *Graph, out string, dst *Graph, in string) (bool, error) {
	if err := s.Link(src, out, dst, in); err != nil {
		return false, err
	}
	o, t, unlock, err := s.lockPair("LinkShared", src, out, dst, in)
	if err != nil {
		return false, err
	}
	defer unlock()
	if t.shared != nil {
		return true, nil
	}
	l := s.lib
	fallback := func(reason error) (bool, error) {
		l.warnOnce("shared-links", "qnnrt: shared buffers unavailable for chained tensors, using RAW client buffers (every execute copies %s of graph %q): %v",
			in, dst.info.Name, reason)
		return false, nil
	}
	if l.core[fnMemRegister] == 0 || l.core[fnMemDeRegister] == 0 {
		return fallback(fmt.Errorf("provider %s has no memRegister/memDeRegister", l.provider))
	}
	rpc, err := l.rpcmem()
	if err != nil {
		return fallback(err)
	}
	tmp, err := allocC(4096)
	if err != nil {
		return false, err
	}
	defer tmp.free()
	if o.shared == nil {
		sb, err := src.register(rpc, o, tmp)
		if err != nil {
			return fallback(err)
		}
		// The output moves into the shared buffer; inputs already linked
		// to its RAW memory follow it. Those may belong to graphs not
		// locked here: holding execMu keeps their executes out.
		s.execMu.Lock()
		defer s.execMu.Unlock()
		o.shared = sb
		if err := o.raw.free(); err != nil {
			return false, errors.Join(err, src.unregister(o))
		}
		o.buf = sb.ptr
		ov := &o.slot.V2.tensorV1
		ov.MemType = memTypeMemHandle
		ov.ClientBuf = clientBuffer{}
		*ov.memHandle() = sb.handle
		for _, u := range o.linkedBy {
			u.buf = sb.ptr
			if u.shared == nil {
				u.slot.V2.ClientBuf.Data = sb.ptr
			}
		}
	}
	return s.shareInput(src, o, dst, t)
}

// shareInput points input t of dst at output o's shared buffer through a
// registration in dst's context (the owner's handle when src and dst share
// a context); both graphs are locked.
func (s *Session) shareInput(src *Graph, o *ioTensor, dst *Graph, t *ioTensor) (bool, error) {
	h := o.shared.handle
	var own uintptr
	if dst.ctx != src.ctx {
		tmp, err := allocC(4096)
		if err != nil {
			return false, err
		}
		defer tmp.free()
		if own, err = dst.registerFD(t, o.shared.fd, tmp); err != nil {
			s.lib.warnOnce("shared-links", "qnnrt: shared buffers unavailable for chained tensors, using RAW client buffers (every execute copies %s of graph %q): %v",
				t.info.Name, dst.info.Name, err)
			t.buf = o.buf
			t.slot.V2.MemType = memTypeRaw
			t.slot.V2.ClientBuf = clientBuffer{Data: o.buf, DataSize: uint32(o.info.Bytes())}
			return false, nil
		}
		h = own
	}
	t.shared = &sharedBuffer{rpc: o.shared.rpc, ptr: o.shared.ptr, fd: o.shared.fd, handle: own}
	t.buf = o.shared.ptr
	v := &t.slot.V2.tensorV1
	v.MemType = memTypeMemHandle
	v.ClientBuf = clientBuffer{}
	*v.memHandle() = h
	dst.stats.Shared = append(dst.stats.Shared, t.info.Name)
	return true, nil
}

// linkedErr refuses a write to an input that reads another graph's output.
func (g *Graph) linkedErr(t *ioTensor) error {
	return fmt.Errorf("qnnrt: graph %q input %q reads output %q of graph %q (Session.Link); it cannot be written",
		g.info.Name, t.info.Name, t.link.info.Name, t.linkGraph.info.Name)
}

// RunChain executes graphs in order, each with the inputs it holds (set
// before, or linked to an earlier graph's output), checking ctx before
// each one: a cancellation stops the chain between graphs. It returns the
// timing of each graph that ran. Reading results is left to ReadOutput
// (or to the graphs' links).
func (s *Session) RunChain(ctx context.Context, graphs ...*Graph) ([]Timing, error) {
	times := make([]Timing, 0, len(graphs))
	for i, g := range graphs {
		if g == nil || g.s != s {
			return times, fmt.Errorf("qnnrt: RunChain: graph %d does not belong to this session", i)
		}
		if err := ctx.Err(); err != nil {
			return times, fmt.Errorf("qnnrt: chain stopped before graph %q (%d of %d): %w", g.info.Name, i+1, len(graphs), err)
		}
		tm, err := g.Run(ctx, make([][]float32, len(g.info.Inputs)), make([][]float32, len(g.info.Outputs)))
		if err != nil {
			return times, fmt.Errorf("qnnrt: chain graph %q (%d of %d): %w", g.info.Name, i+1, len(graphs), err)
		}
		times = append(times, tm)
	}
	return times, nil
}

// ReadOutput converts output i, as the last successful execute left it,
// into dst (one float32 per element).
func (g *Graph) ReadOutput(i int, dst []float32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return g.closedErr()
	}
	if i < 0 || i >= len(g.out) {
		return fmt.Errorf("qnnrt: graph %q has no output %d (it has %d)", g.info.Name, i, len(g.out))
	}
	t := g.out[i]
	if len(dst) != t.info.Elements() {
		return fmt.Errorf("qnnrt: graph %q output %q: buffer has %d values, want %d (%s)", g.info.Name, t.info.Name, len(dst), t.info.Elements(), t.info.Shape())
	}
	g.s.execMu.Lock()
	written := t.written
	g.s.execMu.Unlock()
	if !written {
		return fmt.Errorf("qnnrt: graph %q output %q holds no result: the graph has not executed successfully", g.info.Name, t.info.Name)
	}
	t.codec.decode(dst, t.buf)
	g.stats.BytesRead += uint64(t.info.Bytes())
	return nil
}

// ReadOutputBytes copies output i, as the last successful execute left it,
// into dst byte for byte in the output's own data type (which it
// returns): len(dst) must be the output's size in bytes. It is the one
// copy for a caller whose buffer already has the graph's type (an F16 K/V
// hand-off slot fed by F16 graphs), without ReadOutput's float32 decode.
func (g *Graph) ReadOutputBytes(i int, dst []byte) (DataType, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, g.closedErr()
	}
	if i < 0 || i >= len(g.out) {
		return 0, fmt.Errorf("qnnrt: graph %q has no output %d (it has %d)", g.info.Name, i, len(g.out))
	}
	t := g.out[i]
	if len(dst) != t.info.Bytes() {
		return 0, fmt.Errorf("qnnrt: graph %q output %q: buffer has %d bytes, want %d (%s %s)", g.info.Name, t.info.Name, len(dst), t.info.Bytes(), t.info.DataType, t.info.Shape())
	}
	g.s.execMu.Lock()
	written := t.written
	g.s.execMu.Unlock()
	if !written {
		return 0, fmt.Errorf("qnnrt: graph %q output %q holds no result: the graph has not executed successfully", g.info.Name, t.info.Name)
	}
	copy(dst, unsafe.Slice((*byte)(t.buf), len(dst)))
	g.stats.BytesRead += uint64(len(dst))
	return t.info.DataType, nil
}

// OutputAddress returns the address of output i's buffer, for tests and
// diagnostics that check where a chain's tensors live.
func (g *Graph) OutputAddress(i int) (uintptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || i < 0 || i >= len(g.out) {
		return 0, fmt.Errorf("qnnrt: graph %q has no open output %d", g.info.Name, i)
	}
	return uintptr(g.out[i].buf), nil
}

// InputAddress returns the address of input i's buffer (0 before it was
// first written), for tests and diagnostics.
func (g *Graph) InputAddress(i int) (uintptr, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || i < 0 || i >= len(g.in) {
		return 0, fmt.Errorf("qnnrt: graph %q has no open input %d", g.info.Name, i)
	}
	return uintptr(unsafe.Pointer(g.in[i].buf)), nil
}
