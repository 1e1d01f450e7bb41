package main

import (
	"context"
	"fmt"
	"iter"
	"os"
	"slices"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/replay"
	"github.com/fastwam/actionexpert/worldmodel"
)

// imageBagReader is camera's image-bag reader behind
// replay.ObservationReader.
type imageBagReader struct{ opts camera.ReadOptions }

// newImageBagReader reads image bags with the default topics (one camera
// topic per camera of frame, the proprio and the instruction topics).
func newImageBagReader(frame worldmodel.FrameConfig) (imageBagReader, error) {
	t := camera.DefaultTopics()
	if len(t.Cameras) != len(frame.Cameras) {
		return imageBagReader{}, fmt.Errorf("the image bag's default topics name %d cameras (%v), the world model's frame takes %d", len(t.Cameras), t.Cameras, len(frame.Cameras))
	}
	return imageBagReader{opts: camera.ReadOptions{Topics: t}}, nil
}

// Inputs are the camera, proprio and instruction topics.
func (r imageBagReader) Inputs() []string {
	t := r.opts.Topics
	return append(slices.Clone(t.Cameras), t.Proprio, t.Instruction)
}

// Observations walks the bag at path. Each observation's images and state
// are copies (camera's reader reuses its buffers); its log time is its
// stamp.
func (r imageBagReader) Observations(ctx context.Context, path string) iter.Seq2[replay.Observation, error] {
	return func(yield func(replay.Observation, error) bool) {
		br, err := camera.OpenBag(ctx, path, r.opts)
		if err != nil {
			yield(replay.Observation{}, err)
			return
		}
		defer br.Close()
		for o, err := range br.All(ctx) {
			if err != nil {
				yield(replay.Observation{}, err)
				return
			}
			obs := replay.Observation{Stamp: o.Stamp, LogTime: o.Stamp, State: slices.Clone(o.State), Instruction: o.Instruction}
			for _, im := range o.Images {
				obs.Images = append(obs.Images, worldmodel.Image{Width: im.Width, Height: im.Height, Pix: slices.Clone(im.Pix)})
			}
			if !yield(obs, nil) {
				return
			}
		}
	}
}

// embeddedObservation is the first observation of the embedded image
// policy bag (golden/policy), fastwam policy's input with no flags.
func embeddedObservation(ctx context.Context, wm *cliWorld) (iter.Seq2[replay.Observation, error], string, error) {
	r, err := newImageBagReader(wm.frame)
	if err != nil {
		return nil, "", err
	}
	tmp, err := os.MkdirTemp("", "fastwam-policy-*")
	if err != nil {
		return nil, "", fmt.Errorf("embedded policy bag: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir, err := golden.ExtractPolicyBag(tmp)
	if err != nil {
		return nil, "", err
	}
	for obs, err := range r.Observations(ctx, dir) {
		if err != nil {
			return nil, "", fmt.Errorf("embedded policy bag: %w", err)
		}
		return func(yield func(replay.Observation, error) bool) { yield(obs, nil) },
			"the first observation of the embedded " + "golden/policy" + " bag", nil
	}
	return nil, "", fmt.Errorf("embedded policy bag: no observation")
}

// defaultImageTopics are the topics of an image bag fastwam reads.
func defaultImageTopics() []string {
	t := camera.DefaultTopics()
	return append(slices.Clone(t.Cameras), t.Proprio, t.Instruction)
}
