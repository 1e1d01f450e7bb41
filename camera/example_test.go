package camera_test

import (
	"context"
	"fmt"
	"log"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/worldmodel"
)

// Running an image bag through the world model's front end: each
// observation's two images become LIBERO's 224 × 448 frame (then the VAE,
// the prefill and the action expert, with the state and the instruction's
// text cache entry).
func ExampleOpenBag() {
	ctx := context.Background()
	br, err := camera.OpenBag(ctx, "../golden/imagebag", camera.ReadOptions{}) // default topics, 40 ms tolerance
	if err != nil {
		log.Fatal(err)
	}
	defer br.Close()
	pre, err := worldmodel.NewPreprocessor(worldmodel.LiberoFrame())
	if err != nil {
		log.Fatal(err)
	}
	frame := make([]byte, worldmodel.FrameHeight*worldmodel.FrameWidth*3)
	for o, err := range br.All(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		if err := pre.Frame(frame, o.Images...); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %s: %d×%d + %d×%d, state[0] %.2f, %q\n", o.Seq, o.Stamp.UTC().Format("15:04:05.000"),
			o.Images[0].Width, o.Images[0].Height, o.Images[1].Width, o.Images[1].Height, o.State[0], o.Instruction)
	}
	fmt.Printf("%+v\n", br.Stats())
	// Output:
	// 0 22:13:20.003: 128×128 + 64×64, state[0] -0.30, "put the black bowl on the plate"
	// 1 22:13:20.103: 128×128 + 64×64, state[0] -0.29, "put the black bowl on the plate"
	// 2 22:13:20.203: 128×128 + 64×64, state[0] -0.28, "open the top drawer of the cabinet"
	// 3 22:13:20.303: 128×128 + 64×64, state[0] -0.27, "open the top drawer of the cabinet"
	// {Messages:14 Observations:4 UnpairedFrames:0}
}
