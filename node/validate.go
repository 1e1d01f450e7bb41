package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/msgs"
)

// Reason names why an input was rejected. Each reason is logged once and
// counted in the diagnostics as rejected.<reason>.
type Reason string

// Rejection reasons.
const (
	RejectDecode       Reason = "decode"        // not a valid CDR message of the topic's type
	RejectDType        Reason = "dtype"         // a tensor element type the node does not read
	RejectShape        Reason = "shape"         // tensor shape or payload size against the backend's contract
	RejectMask         Reason = "mask"          // attention mask length, or every token masked
	RejectVisibleVideo Reason = "visible_video" // visible_video_tokens beyond the cached tokens
	RejectNonFinite    Reason = "nonfinite"     // a NaN or infinite element
	RejectNoStamp      Reason = "no_stamp"      // header stamp zero
	RejectStale        Reason = "stale"         // older than max_input_age on arrival
	RejectOutOfOrder   Reason = "out_of_order"  // stamp older than the last accepted one
	RejectDuplicate    Reason = "duplicate"     // stamp equal to the last accepted one
	RejectSHM          Reason = "shm"           // a KVHandoff whose segment or descriptor is refused (kvshm)
	RejectSHMStale     Reason = "shm_stale"     // a KVHandoff whose slot was overwritten before it was read
	RejectTorn         Reason = "torn"          // a slot overwritten or truncated during the worker's copy
)

// Drop names why a valid input was not turned into a chunk. Counted as
// dropped.<drop>.
type Drop string

// Drop reasons.
const (
	DropSuperseded  Drop = "superseded"    // replaced in the worker's slot by a newer pair
	DropUnpaired    Drop = "unpaired"      // its partner can no longer arrive in order
	DropPairTimeout Drop = "pair_timeout"  // no partner within sync.timeout
	DropOverflow    Drop = "pair_overflow" // pushed out of a full pairing buffer
	DropInactive    Drop = "inactive"      // arrived while the node was not active
	DropShutdown    Drop = "shutdown"      // abandoned by an orderly shutdown
)

// inputError is a rejected input: which topic, why, and the details.
type inputError struct {
	topic  string
	reason Reason
	err    error
}

func (e *inputError) Error() string {
	return fmt.Sprintf("%s rejected (%s): %v", e.topic, e.reason, e.err)
}

func reject(topic string, r Reason, format string, args ...any) *inputError {
	return &inputError{topic: topic, reason: r, err: fmt.Errorf(format, args...)}
}

// kvInput is a decoded VideoKVCache whose tensors view the received bytes.
type kvInput struct {
	raw    []byte // the message's bytes, handed back to the transport when done
	msg    msgs.VideoKVCache
	stamp  time.Time     // header stamp
	recv   time.Time     // arrival on the node's clock (sim time with use_sim_time): pairing timeouts
	mono   time.Time     // arrival on the monotonic clock: measured latencies
	decode time.Duration // the receive path's decoding and checks
	lease  kvshm.Lease   // kv_transport shm: the slot the tensors view
}

// ctxInput is a decoded TextContext whose tensor views the received bytes.
type ctxInput struct {
	raw    []byte
	msg    msgs.TextContext
	stamp  time.Time
	recv   time.Time
	mono   time.Time
	decode time.Duration
	refs   atomic.Int32 // holders: the receive path or pairing buffer, and pairs (see recycler)
}

func stampTime(t msgs.Time) time.Time {
	return time.Unix(int64(t.Sec), int64(t.Nanosec))
}

// decodeKV decodes a VideoKVCache and checks everything that costs no pass
// over the payload: types, shapes and sizes against the contract.
// The message is decoded into in, reused (see recycler).
func decodeKV(in *kvInput, topic string, data []byte, d expert.Dims) *inputError {
	if err := in.msg.UnmarshalCDRReuse(data); err != nil {
		return decodeError(topic, err)
	}
	return checkKV(in, topic, d)
}

// checkKV checks a decoded cache's tensors and visibility against the
// contract.
func checkKV(in *kvInput, topic string, d expert.Dims) *inputError {
	want := [...]uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.AttnWidth())}
	if e := checkTensor(topic, "keys", in.msg.Keys, want[:]); e != nil {
		return e
	}
	if e := checkTensor(topic, "values", in.msg.Values, want[:]); e != nil {
		return e
	}
	if v := in.msg.VisibleVideoTokens; int64(v) > int64(d.VideoTokens) {
		return reject(topic, RejectVisibleVideo, "visible_video_tokens %d exceeds the %d cached video tokens", v, d.VideoTokens)
	}
	in.stamp = stampTime(in.msg.Header.Stamp)
	return nil
}

// decodeContext decodes a TextContext into in and checks its tensor and
// mask.
func decodeContext(in *ctxInput, topic string, data []byte, d expert.Dims) *inputError {
	if err := in.msg.UnmarshalCDRReuse(data); err != nil {
		return decodeError(topic, err)
	}
	want := [...]uint32{1, uint32(d.ContextTokens), uint32(d.TextDim)}
	if e := checkTensor(topic, "context", in.msg.Context, want[:]); e != nil {
		return e
	}
	if n := len(in.msg.AttentionMask); n != d.ContextTokens {
		return reject(topic, RejectMask, "attention_mask has %d elements, want %d", n, d.ContextTokens)
	}
	if !slices.Contains(in.msg.AttentionMask, true) {
		return reject(topic, RejectMask, "attention_mask masks all %d tokens; at least one must be attendable", d.ContextTokens)
	}
	in.stamp = stampTime(in.msg.Header.Stamp)
	return nil
}

// decodeError classifies a decoding failure. The codec validates tensors
// while decoding: a tensor whose element type is unknown or whose payload
// disagrees with its shape is a dtype or shape rejection, anything else a
// decode one. (msgs has one error kind for both tensor cases; the dtype
// case is the one whose message names the dtype.)
func decodeError(topic string, err error) *inputError {
	var me *msgs.Error
	if errors.As(err, &me) && errors.Is(err, msgs.ErrTensorShape) {
		if strings.HasPrefix(me.Msg, "dtype ") {
			return &inputError{topic: topic, reason: RejectDType, err: err}
		}
		return &inputError{topic: topic, reason: RejectShape, err: err}
	}
	return &inputError{topic: topic, reason: RejectDecode, err: err}
}

// checkTensor checks a tensor's element type, its shape against want and
// its payload size against its shape.
func checkTensor(topic, field string, t msgs.Tensor, want []uint32) *inputError {
	if t.DType != msgs.DTypeFloat32 && t.DType != msgs.DTypeFloat16 {
		return reject(topic, RejectDType, "%s: dtype %d, want %d (float32) or %d (float16)", field, t.DType, msgs.DTypeFloat32, msgs.DTypeFloat16)
	}
	if !slices.Equal(t.Shape, want) {
		// Cloned: formatting want itself would move it to the heap on
		// every call, not only on this one.
		return reject(topic, RejectShape, "%s: shape %v, want %v", field, slices.Clone(t.Shape), slices.Clone(want))
	}
	if err := t.Validate(); err != nil {
		return reject(topic, RejectShape, "%s: %w", field, err)
	}
	return nil
}

// stampCheck holds the last accepted stamp of one topic to reject stale,
// duplicate and out-of-order inputs.
type stampCheck struct {
	last time.Time
	seen bool
}

// check validates stamp as the next input of the topic; maxAge 0 disables
// the age check. It records stamp when the input is accepted.
func (s *stampCheck) check(topic string, stamp, now time.Time, maxAge time.Duration) *inputError {
	if stamp.Equal(time.Unix(0, 0)) {
		return reject(topic, RejectNoStamp, "header stamp is zero; the producer must stamp its messages")
	}
	if maxAge > 0 {
		if age := now.Sub(stamp); age > maxAge {
			return reject(topic, RejectStale, "stamp %s is %v old, more than max_input_age %v", fmtStamp(stamp), age.Round(time.Millisecond), maxAge)
		}
	}
	if s.seen {
		switch {
		case stamp.Equal(s.last):
			return reject(topic, RejectDuplicate, "stamp %s repeats the previous message's", fmtStamp(stamp))
		case stamp.Before(s.last):
			return reject(topic, RejectOutOfOrder, "stamp %s is older than the previous %s", fmtStamp(stamp), fmtStamp(s.last))
		}
	}
	s.last, s.seen = stamp, true
	return nil
}

func fmtStamp(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}
