package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
	"github.com/fastwam/actionexpert/worldmodel"
)

// maxStateText bounds the -state value (a list of 8 numbers).
const maxStateText = 4096

// policyOpts are fastwam policy's flags.
type policyOpts struct {
	images      stringList
	state       string
	instruction string
	bag         string
	json        bool
	timeout     time.Duration
	world       worldFlags
	cpu         cpuFlags
	node        nodeFlags
}

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("policy", stdout, stderr, "[flags]\n\n"+
		"Runs the whole policy without ROS: camera images, a proprio state and an instruction through the\n"+
		"world model (image preprocessing, the VAE encoder, the text cache, the proprio token, the video\n"+
		"DiT prefill) to the video K/V cache and the context, then through the node's pipeline exactly as\n"+
		"`fastwam replay` feeds it (pairing, the N-step denoise of the action expert on the CPU backend,\n"+
		"the actions.* post-processing and limits set with -p) to the action chunk, printed as a table\n"+
		"(or JSON with -json) with the time of every stage. One cycle from -image (twice, in camera order),\n"+
		"-state and -instruction; or with -bag, every observation of an image bag. The world model's\n"+
		"files default to the tiny test model (golden/tiny/world) and the action expert's weights to the\n"+
		"embedded tiny weights, so that the command runs with no flags; with no -image it takes the\n"+
		"first observation of the embedded image-policy bag golden/policy.")
	var o policyOpts
	fs.Var(&o.images, "image", "camera image `FILE` (PNG or JPEG; repeatable, in camera order: agentview, then wrist)")
	fs.StringVar(&o.state, "state", "", "the 8 raw proprio values (spec §2.1): comma-separated numbers or a JSON array")
	fs.StringVar(&o.instruction, "instruction", "", "the task's instruction (its text embedding must be in the text cache)")
	fs.StringVar(&o.bag, "bag", "", "image bag `DIR`: run every observation of it instead of -image/-state/-instruction")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON instead of tables")
	fs.DurationVar(&o.timeout, "timeout", replay.DefaultChunkTimeout, "longest wait for one chunk")
	o.world.register(fs.FlagSet)
	o.cpu.register(fs.FlagSet)
	o.node.register(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	if err := checkRanges(durationRange("timeout", o.timeout, maxChunkTimeout), cpuThreadsRange(o.cpu.threads)); err != nil {
		return err
	}
	if o.bag != "" && (len(o.images) > 0 || o.state != "" || o.instruction != "") {
		return usageError("-bag takes the observations from the bag: give it without -image, -state and -instruction")
	}

	p := replay.BaseParams(params.BackendCPU)
	seedParams(&p, &o.cpu, nil)
	if err := o.node.apply(&p); err != nil {
		return err
	}
	if p.Backend != params.BackendCPU {
		return usageError("-p backend:=%s: fastwam policy runs the CPU backend", p.Backend)
	}
	if err := adoptParams("fastwam policy", &p, o.node.names(), setFlags(fs), cpuBindings(&o.cpu)); err != nil {
		return err
	}

	wm, cleanup, err := o.world.open(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	if p.Actions.Post.Norm.NeedsStats() && p.Actions.Post.Stats == "" {
		p.Actions.Post.Stats = wm.statsPath // the checkpoint's dataset_stats.json: the same file as the state's
	}
	observations, source, err := o.observations(ctx, wm)
	if err != nil {
		return err
	}
	d := wm.Dims()
	if err := checkInputSizes(&p, d.VideoTokens, d.ContextTokens, "the world model's output"); err != nil {
		return err
	}
	b, desc, err := o.cpu.open(ctx, d.VideoTokens, d.ContextTokens, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeBackend(b)) }()

	res, err := replay.RunPolicy(ctx, replay.PolicyOptions{
		World: wm, Backend: b, Params: p, Observations: observations, Timeout: o.timeout,
		Logger: replay.NewLogger(stderr, o.node.verbose),
	})
	if err != nil {
		return err
	}
	info := policyInfo{World: wm.desc, Expert: desc, Source: source, Steps: p.Steps, Shift: p.Shift, NoiseSeed: p.NoiseSeed}
	if o.json {
		return writePolicyJSON(stdout, info, res)
	}
	return writePolicyTable(stdout, info, res)
}

// observations are the cycles to run and a description of where they
// come from.
func (o *policyOpts) observations(ctx context.Context, wm *cliWorld) (iter.Seq2[replay.Observation, error], string, error) {
	if o.bag != "" {
		r, err := newImageBagReader(wm.frame)
		if err != nil {
			return nil, "", err
		}
		return r.Observations(ctx, o.bag), "image bag " + o.bag, nil
	}
	if len(o.images) == 0 && o.state == "" && o.instruction == "" {
		return embeddedObservation(ctx, wm)
	}
	n := len(wm.frame.Cameras)
	if len(o.images) != n {
		return nil, "", usageError("%d -image files; the world model's frame takes %d cameras (%s), in that order", len(o.images), n, cameraNames(wm.frame))
	}
	if o.state == "" {
		return nil, "", usageError("-state is needed with -image: the %d raw proprio values", worldmodel.ProprioDim)
	}
	if o.instruction == "" {
		return nil, "", usageError("-instruction is needed with -image")
	}
	state, err := parseState(o.state, worldmodel.ProprioDim)
	if err != nil {
		return nil, "", usageError("-state: %v", err)
	}
	images := make([]worldmodel.Image, n)
	for i, path := range o.images {
		if images[i], err = readImageFile(path); err != nil {
			return nil, "", err
		}
	}
	stamp := time.Unix(replay.DefaultStartUnix, 0)
	obs := replay.Observation{Stamp: stamp, LogTime: stamp, Images: images, State: state, Instruction: o.instruction}
	return func(yield func(replay.Observation, error) bool) { yield(obs, nil) }, strings.Join(o.images, ", "), nil
}

// cameraNames lists the frame's cameras in tile order.
func cameraNames(f worldmodel.FrameConfig) string {
	var names []string
	for _, c := range f.Cameras {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

// parseState reads n finite numbers: comma- or space-separated, or a
// JSON array.
func parseState(s string, n int) ([]float32, error) {
	if len(s) > maxStateText {
		return nil, fmt.Errorf("%d bytes; want at most %d", len(s), maxStateText)
	}
	var vals []float64
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "[") {
		if err := json.Unmarshal([]byte(t), &vals); err != nil {
			return nil, fmt.Errorf("not a JSON array of numbers: %v", err)
		}
	} else {
		for _, f := range strings.FieldsFunc(t, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", f)
			}
			vals = append(vals, v)
		}
	}
	if len(vals) != n {
		return nil, fmt.Errorf("%d values; want %d", len(vals), n)
	}
	out := make([]float32, n)
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
			return nil, fmt.Errorf("value %d is %v; want a finite float32", i, v)
		}
		out[i] = float32(v)
	}
	return out, nil
}

// policyInfo is the header of fastwam policy's output.
type policyInfo struct {
	World, Expert, Source string
	Steps                 int
	Shift                 float64
	NoiseSeed             uint64
}

// writePolicyTable prints each chunk: its stage times, then its actions
// (the expert's, and the executable ones with post-processing).
func writePolicyTable(w io.Writer, info policyInfo, res *replay.PolicyResult) error {
	fmt.Fprintf(w, "world model  %s\naction expert %s\ninputs       %s\nschedule     %d steps, shift %g, noise seed %d + seq\n",
		info.World, info.Expert, info.Source, info.Steps, info.Shift, info.NoiseSeed)
	for _, r := range res.Refused {
		fmt.Fprintf(w, "\nobservation %d (stamp %s): refused by the action limits: %s\n", r.Chunk, fmtStamp(r.Stamp), r.Reason)
	}
	for _, c := range res.Chunks {
		fmt.Fprintf(w, "\nobservation %d  stamp %s  seq %d\n", c.Chunk, fmtStamp(stampOf(c.Model.Header.Stamp)), c.Model.Seq)
		var stages []string
		for _, s := range c.World {
			stages = append(stages, fmt.Sprintf("%s %.2f ms", s.Name, msOf(s.Duration)))
		}
		stages = append(stages, fmt.Sprintf("denoise %.2f ms", c.Model.DenoiseMs), fmt.Sprintf("receive to publish %.2f ms", c.Model.ReceiveToPublishMs))
		fmt.Fprintf(w, "stages       %s\n", strings.Join(stages, ", "))
		if err := writeActions(w, "actions (the expert's output)", c.Model); err != nil {
			return err
		}
		if c.Executable != nil {
			what := "executable actions (" + info.execNote(c.Executable) + ")"
			if err := writeActions(w, what, *c.Executable); err != nil {
				return err
			}
		}
	}
	return nil
}

// execNote says what was done to an executable chunk.
func (policyInfo) execNote(c *msgs.ActionChunk) string {
	if c.Clipped {
		return "post-processed, clipped by the limits"
	}
	return "post-processed"
}

// writeActions prints a chunk's rows.
func writeActions(w io.Writer, title string, c msgs.ActionChunk) error {
	fmt.Fprintf(w, "%s: %d rows, dt %g s\n", title, len(c.Actions), c.Dt)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(c.Actions) > 0 {
		fmt.Fprint(tw, "row\t")
		for j := range c.Actions[0].Values {
			fmt.Fprintf(tw, "a%d\t", j)
		}
		fmt.Fprintln(tw)
	}
	for i, r := range c.Actions {
		fmt.Fprintf(tw, "%d\t", i)
		for _, v := range r.Values {
			fmt.Fprintf(tw, "%.6f\t", v)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// policyJSON is fastwam policy's -json output.
type policyJSON struct {
	WorldModel   string            `json:"world_model"`
	ActionExpert string            `json:"action_expert"`
	Inputs       string            `json:"inputs"`
	Steps        int               `json:"steps"`
	Shift        float64           `json:"shift"`
	NoiseSeed    uint64            `json:"noise_seed"`
	Chunks       []policyChunkJSON `json:"chunks"`
	Refused      []policyRefusal   `json:"refused"`
}

type policyChunkJSON struct {
	Observation int                `json:"observation"`
	Stamp       string             `json:"stamp"`
	Seq         uint64             `json:"seq"`
	StagesMs    map[string]float64 `json:"stages_ms"`
	Actions     [][]float32        `json:"actions"`
	Executable  [][]float32        `json:"executable,omitempty"`
	Clipped     bool               `json:"clipped,omitempty"`
	Dt          float64            `json:"dt"`
}

type policyRefusal struct {
	Observation int    `json:"observation"`
	Stamp       string `json:"stamp"`
	Reason      string `json:"reason"`
}

func writePolicyJSON(w io.Writer, info policyInfo, res *replay.PolicyResult) error {
	out := policyJSON{WorldModel: info.World, ActionExpert: info.Expert, Inputs: info.Source, Steps: info.Steps, Shift: info.Shift,
		NoiseSeed: info.NoiseSeed, Chunks: []policyChunkJSON{}, Refused: []policyRefusal{}}
	for _, c := range res.Chunks {
		j := policyChunkJSON{Observation: c.Chunk, Stamp: fmtStamp(stampOf(c.Model.Header.Stamp)), Seq: c.Model.Seq,
			StagesMs: map[string]float64{"denoise": float64(c.Model.DenoiseMs), "receive_to_publish": float64(c.Model.ReceiveToPublishMs)},
			Actions:  rows(c.Model), Dt: c.Model.Dt}
		for _, s := range c.World {
			j.StagesMs[s.Name] = msOf(s.Duration)
		}
		if c.Executable != nil {
			j.Executable, j.Clipped = rows(*c.Executable), c.Executable.Clipped
		}
		out.Chunks = append(out.Chunks, j)
	}
	for _, r := range res.Refused {
		out.Refused = append(out.Refused, policyRefusal{Observation: r.Chunk, Stamp: fmtStamp(r.Stamp), Reason: r.Reason})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func rows(c msgs.ActionChunk) [][]float32 {
	out := make([][]float32, len(c.Actions))
	for i, r := range c.Actions {
		out[i] = r.Values
	}
	return out
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func stampOf(t msgs.Time) time.Time { return time.Unix(int64(t.Sec), int64(t.Nanosec)) }

// fmtStamp prints a time as ROS prints stamps: seconds.nanoseconds.
func fmtStamp(t time.Time) string { return fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()) }
