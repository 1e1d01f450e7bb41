package replay

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// Recorded is one ActionChunk recorded in a bag.
type Recorded struct {
	LogTime time.Time
	Chunk   msgs.ActionChunk
}

// Schedule is how a recorded chunk was denoised, as the chunk itself says.
type Schedule struct {
	Steps int
	Shift float32
	// NoiseSeed is the node's noise_seed parameter: the chunk's seed minus
	// the seq of its VideoKVCache.
	NoiseSeed uint64
	Backend   string
}

// Recording is what a first pass over a bag found: the inputs to feed and
// the chunks to compare with.
type Recording struct {
	Path   string
	Topics params.Topics // the node's topics, fully qualified, as looked up in the bag

	KVCount, ContextCount int       // input messages
	Start                 time.Time // log time of the first input
	// KVShape and ContextShape are the tensor shapes of the first
	// decodable VideoKVCache (keys) and TextContext; nil when none is.
	KVShape, ContextShape []uint32

	Recorded []Recorded // the ActionChunks on the actions topic, in log-time order
	// Schedule is taken from the first recorded chunk; nil without one.
	// ScheduleVaries is set when later chunks disagree with it.
	Schedule       *Schedule
	ScheduleVaries bool
	// Dt is the first recorded chunk's dt (seconds), 0 without one.
	Dt float64

	// World is set for an image bag (see ScanImages): the inputs are the
	// world model's for each observation; nil for a bag of the node's
	// inputs.
	World *WorldRecording
}

// Scan reads a bag (a rosbag2 folder, MCAP or sqlite3, or a single .mcap
// or .db3 file) once: it
// checks that the node's input topics are there with the node's types,
// counts the inputs, notes their shapes and collects the ActionChunks
// recorded on the actions topic. Topic names must be fully qualified (see
// ResolveTopics).
func Scan(ctx context.Context, path string, topics params.Topics) (*Recording, error) {
	// Only the node's topics are read: another topic of the bag may hold
	// what this reader does not decode (a non-CDR channel, say).
	r, err := bag.OpenWith(ctx, path, bag.ReaderOptions{Topics: []string{topics.KVCache, topics.Context, topics.Actions}})
	if err != nil {
		return nil, fmt.Errorf("replay: open bag: %w", err)
	}
	defer r.Close()
	types := map[string]string{}
	for _, t := range r.Topics() {
		types[t.Name] = t.Type
	}
	listing := func() string {
		var parts []string
		for _, t := range r.Topics() {
			parts = append(parts, fmt.Sprintf("%s (%s)", t.Name, t.Type))
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, ", ")
	}
	for _, want := range []struct {
		param, name, typ string
		required         bool
	}{
		{"topics.kv_cache", topics.KVCache, msgs.TypeVideoKVCache, true},
		{"topics.context", topics.Context, msgs.TypeTextContext, true},
		{"topics.actions", topics.Actions, msgs.TypeActionChunk, false},
	} {
		got, ok := types[want.name]
		switch {
		case !ok && want.required:
			return nil, fmt.Errorf("replay: bag %s has no topic %s (%s); its topics: %s; name the node's topic with -p %s:=NAME or -namespace",
				path, want.name, want.typ, listing(), want.param)
		case ok && got != want.typ:
			return nil, fmt.Errorf("replay: topic %s of bag %s has type %s, want %s", want.name, path, got, want.typ)
		}
	}

	rec := &Recording{Path: path, Topics: topics}
	for m, err := range r.Messages(ctx) {
		if err != nil {
			return nil, fmt.Errorf("replay: read bag %s: %w", path, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("replay: scan %s: %w", path, err)
		}
		switch m.Topic {
		case topics.KVCache, topics.Context:
			if rec.KVCount+rec.ContextCount == 0 {
				rec.Start = m.LogTime
			}
			rec.note(m)
		case topics.Actions:
			if err := rec.noteAction(m); err != nil {
				return nil, err
			}
		}
	}
	if rec.KVCount == 0 {
		return nil, fmt.Errorf("replay: bag %s has no messages on %s", path, topics.KVCache)
	}
	return rec, nil
}

// noteAction keeps an ActionChunk recorded on the actions topic and its
// schedule.
func (rec *Recording) noteAction(m bag.Message) error {
	var c msgs.ActionChunk
	if err := c.UnmarshalCDR(m.Data); err != nil {
		return fmt.Errorf("replay: bag %s: the ActionChunk recorded at log time %s does not decode: %w",
			rec.Path, fmtTime(m.LogTime), err)
	}
	rec.Recorded = append(rec.Recorded, Recorded{LogTime: m.LogTime, Chunk: c})
	s := Schedule{Steps: int(c.Steps), Shift: c.Shift, NoiseSeed: c.NoiseSeed - c.KVSeq, Backend: c.Backend}
	if rec.Schedule == nil {
		rec.Schedule, rec.Dt = &s, c.Dt
	} else if *rec.Schedule != s {
		rec.ScheduleVaries = true
	}
	return nil
}

// scanActions reads the ActionChunks recorded on the actions topic (a
// bag without that topic has none; one of another type is an error).
func (rec *Recording) scanActions(ctx context.Context) error {
	r, err := bag.OpenWith(ctx, rec.Path, bag.ReaderOptions{Topics: []string{rec.Topics.Actions}})
	if err != nil {
		return fmt.Errorf("replay: open bag: %w", err)
	}
	defer r.Close()
	for _, t := range r.Topics() {
		if t.Name == rec.Topics.Actions && t.Type != msgs.TypeActionChunk {
			return fmt.Errorf("replay: topic %s of bag %s has type %s, want %s", t.Name, rec.Path, t.Type, msgs.TypeActionChunk)
		}
	}
	for m, err := range r.Messages(ctx) {
		if err != nil {
			return fmt.Errorf("replay: read bag %s: %w", rec.Path, err)
		}
		if m.Topic != rec.Topics.Actions {
			continue
		}
		if err := rec.noteAction(m); err != nil {
			return err
		}
	}
	return nil
}

// note counts an input and keeps the first decodable shapes.
func (rec *Recording) note(m bag.Message) {
	if m.Topic == rec.Topics.KVCache {
		rec.KVCount++
		var kv msgs.VideoKVCache
		if rec.KVShape == nil && kv.UnmarshalCDR(m.Data) == nil {
			rec.KVShape = kv.Keys.Shape
		}
		return
	}
	rec.ContextCount++
	var c msgs.TextContext
	if rec.ContextShape == nil && c.UnmarshalCDR(m.Data) == nil {
		rec.ContextShape = c.Context.Shape
	}
}

// ApplySchedule sets the steps, shift and noise seed of p to those the
// recorded chunks were denoised with, so that the replay denoises alike,
// and the control period to their dt when it is one the parameter
// accepts. It does nothing without recorded chunks or when they carry no
// usable schedule.
func (rec *Recording) ApplySchedule(p *params.Params) {
	s := rec.Schedule
	if s == nil || s.Steps < 1 || s.Steps > 1000 || !(s.Shift > 0) {
		return
	}
	p.Steps, p.Shift, p.NoiseSeed = s.Steps, float64(s.Shift), s.NoiseSeed
	if rec.Dt >= 1e-6 && rec.Dt <= 60 {
		p.ControlPeriod = time.Duration(math.Round(rec.Dt * float64(time.Second)))
	}
}

// VideoTokens is the number of cached video tokens of the first decodable
// VideoKVCache, 0 when there is none; a CPU backend is sized with it.
func (rec *Recording) VideoTokens() int {
	if len(rec.KVShape) != 4 {
		return 0
	}
	return int(rec.KVShape[2])
}

// ContextTokens is the number of context tokens of the first decodable
// TextContext, 0 when there is none; a CPU backend is sized with it.
func (rec *Recording) ContextTokens() int {
	if len(rec.ContextShape) != 3 {
		return 0
	}
	return int(rec.ContextShape[1])
}

// fmtTime prints a time as ROS prints stamps: seconds.nanoseconds.
func fmtTime(t time.Time) string {
	return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

func stampTime(t msgs.Time) time.Time {
	return time.Unix(int64(t.Sec), int64(t.Nanosec))
}
