package worldmodel

import (
	"fmt"
	"math"
	"slices"
)

// MaxImageSide bounds every side of a camera image, of a tile and of a
// camera image after its resize (spec §1.2): 8192 covers every camera in
// use (the largest checked against Pillow is 1080 × 1920) with room, and
// keeps the coefficient tables and the scratch small.
const MaxImageSide = 8192

// Libero's tile and frame (spec §0): two 224 × 224 tiles side by side.
const (
	TileSize    = 224
	FrameHeight = 224
	FrameWidth  = 448
)

// Image is one camera image: Height rows of Width RGB pixels, row-major,
// 3 bytes per pixel (R, G, B), so len(Pix) == Height*Width*3.
type Image struct {
	Width, Height int
	Pix           []byte
}

// Concat is the direction in which the camera tiles are joined
// (upstream's concat_multi_camera).
type Concat int

// Concatenation directions.
const (
	Horizontal Concat = iota // tiles side by side: the frame is TileHeight × (n·TileWidth)
	Vertical                 // tiles stacked: the frame is (n·TileHeight) × TileWidth
)

// String names the direction as upstream's configuration does.
func (c Concat) String() string {
	switch c {
	case Horizontal:
		return "horizontal"
	case Vertical:
		return "vertical"
	}
	return fmt.Sprintf("concat(%d)", int(c))
}

// Camera configures one camera of the frame.
type Camera struct {
	Name string // for messages, e.g. "agentview"
	// Flip180 rotates the image by 180° (reverses the rows and the
	// columns) before the crop-resize, as LIBERO's get_libero_image does
	// to raw MuJoCo renders (spec §1.1). Leave it false when the source
	// already delivers training-orientation images.
	Flip180 bool
}

// FrameConfig configures the image preprocessing.
type FrameConfig struct {
	TileWidth, TileHeight int
	// Cameras in tile order: Cameras[0] (the primary, agentview) is the
	// first tile (columns 0..TileWidth-1, or rows 0..TileHeight-1 when
	// vertical). One or two cameras.
	Cameras []Camera
	Concat  Concat
}

// LiberoFrame is the configuration of upstream's LIBERO evaluation
// (spec §1): agentview then wrist, both flipped by 180° (raw renders),
// 224 × 224 tiles side by side.
func LiberoFrame() FrameConfig {
	return FrameConfig{
		TileWidth: TileSize, TileHeight: TileSize,
		Cameras: []Camera{{Name: "agentview", Flip180: true}, {Name: "wrist", Flip180: true}},
		Concat:  Horizontal,
	}
}

// Size is the frame's width and height in pixels.
func (c FrameConfig) Size() (width, height int) {
	n := len(c.Cameras)
	if c.Concat == Vertical {
		return c.TileWidth, n * c.TileHeight
	}
	return n * c.TileWidth, c.TileHeight
}

// Validate checks the configuration.
func (c FrameConfig) Validate() error {
	if c.TileWidth < 1 || c.TileHeight < 1 || c.TileWidth > MaxImageSide || c.TileHeight > MaxImageSide {
		return fmt.Errorf("tile of %d × %d (width × height): want each side in 1..%d", c.TileWidth, c.TileHeight, MaxImageSide)
	}
	if n := len(c.Cameras); n < 1 || n > 2 {
		return fmt.Errorf("%d cameras: want 1 or 2", n)
	}
	if c.Concat != Horizontal && c.Concat != Vertical {
		return fmt.Errorf("concatenation %v: want horizontal or vertical", c.Concat)
	}
	return nil
}

// Preprocessor turns camera images into the model's frame (spec §1). It
// keeps the resize coefficients of the last image size of each camera and
// its scratch, so a steady stream of same-sized images allocates nothing.
// A Preprocessor is not safe for concurrent use.
type Preprocessor struct {
	cfg     FrameConfig
	plans   []*tilePlan
	scratch []byte  // the horizontal pass's rows
	frame   []byte  // Tensor's frame
	accs    []int32 // the vertical pass's accumulators, one tile row
}

// NewPreprocessor checks cfg and returns its preprocessor.
func NewPreprocessor(cfg FrameConfig) (*Preprocessor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("worldmodel: frame configuration: %w", err)
	}
	cfg.Cameras = append([]Camera(nil), cfg.Cameras...)
	return &Preprocessor{cfg: cfg, plans: make([]*tilePlan, len(cfg.Cameras)), accs: make([]int32, 3*cfg.TileWidth)}, nil
}

// Config returns the preprocessor's configuration.
func (p *Preprocessor) Config() FrameConfig {
	c := p.cfg
	c.Cameras = append([]Camera(nil), c.Cameras...)
	return c
}

// Frame writes the u8 frame of the cameras' images, given in the
// configuration's camera order, into dst: height × width × 3 bytes,
// row-major RGB, with (width, height) = Config().Size(). Every image is
// checked before anything is written.
func (p *Preprocessor) Frame(dst []byte, images ...Image) error {
	if len(images) != len(p.cfg.Cameras) {
		return fmt.Errorf("worldmodel: %d images for %d cameras (%s): want one per camera, in that order", len(images), len(p.cfg.Cameras), p.cameraNames())
	}
	fw, fh := p.cfg.Size()
	if len(dst) != fw*fh*3 {
		return fmt.Errorf("worldmodel: frame buffer of %d bytes: want %d × %d × 3 = %d", len(dst), fh, fw, fw*fh*3)
	}
	for i, img := range images {
		if err := checkImage(img); err != nil {
			return fmt.Errorf("worldmodel: camera %d (%s): %w", i, p.cfg.Cameras[i].Name, err)
		}
		if err := p.plan(i, img); err != nil {
			return fmt.Errorf("worldmodel: camera %d (%s): %w", i, p.cfg.Cameras[i].Name, err)
		}
	}
	stride := fw * 3
	for i, img := range images {
		off := i * p.cfg.TileWidth * 3
		if p.cfg.Concat == Vertical {
			off = i * p.cfg.TileHeight * stride
		}
		p.scratch = p.plans[i].run(dst[off:], stride, img, p.cfg.Cameras[i].Flip180, p.scratch, p.accs)
	}
	return nil
}

// Tensor runs Frame into an internal buffer and writes its [1, 3, H, W]
// float32 tensor into dst (see ImageTensor).
func (p *Preprocessor) Tensor(dst []float32, images ...Image) error {
	fw, fh := p.cfg.Size()
	if len(dst) != 3*fw*fh {
		return fmt.Errorf("worldmodel: image tensor of %d values: want 1 × 3 × %d × %d = %d", len(dst), fh, fw, 3*fw*fh)
	}
	if cap(p.frame) < fw*fh*3 {
		p.frame = make([]byte, fw*fh*3)
	}
	frame := p.frame[:fw*fh*3]
	if err := p.Frame(frame, images...); err != nil {
		return err
	}
	return ImageTensor(dst, frame, fw, fh)
}

func (p *Preprocessor) cameraNames() string {
	s := ""
	for i, c := range p.cfg.Cameras {
		if i > 0 {
			s += ", "
		}
		s += c.Name
	}
	return s
}

// ImageTensor writes the [1, 3, height, width] float32 tensor (NCHW, RGB)
// of a u8 frame of height × width × 3 bytes into dst, each value as
// upstream computes it in float32 (spec §1.4): fl32(fl32(v·fl32(2/255)) − 1).
func ImageTensor(dst []float32, frame []byte, width, height int) error {
	if width < 1 || height < 1 || width > 2*MaxImageSide || height > 2*MaxImageSide {
		return fmt.Errorf("worldmodel: frame of %d × %d (width × height): want each side in 1..%d", width, height, 2*MaxImageSide)
	}
	n := width * height
	if len(frame) != 3*n {
		return fmt.Errorf("worldmodel: frame of %d bytes: want %d × %d × 3 = %d", len(frame), height, width, 3*n)
	}
	if len(dst) != 3*n {
		return fmt.Errorf("worldmodel: image tensor of %d values: want 1 × 3 × %d × %d = %d", len(dst), height, width, 3*n)
	}
	const k = float32(2.0 / 255)
	r, g, b := dst[:n], dst[n:2*n], dst[2*n:3*n]
	for i := range n {
		px := frame[3*i : 3*i+3 : 3*i+3]
		// The explicit conversions round the product before the
		// subtraction (no fused multiply-add), as upstream does.
		r[i] = float32(float32(px[0])*k) - 1
		g[i] = float32(float32(px[1])*k) - 1
		b[i] = float32(float32(px[2])*k) - 1
	}
	return nil
}

func checkImage(img Image) error {
	if img.Width < 1 || img.Height < 1 || img.Width > MaxImageSide || img.Height > MaxImageSide {
		return fmt.Errorf("image of %d × %d (width × height): want each side in 1..%d", img.Width, img.Height, MaxImageSide)
	}
	if want := img.Width * img.Height * 3; len(img.Pix) != want {
		return fmt.Errorf("image of %d × %d (width × height) has %d bytes: want %d × %d × 3 = %d (row-major RGB, no padding)",
			img.Width, img.Height, len(img.Pix), img.Height, img.Width, want)
	}
	return nil
}

// CropResizeGeometry is spec §1.2 for a camera image of srcW × srcH and a
// tile of tileW × tileH: the size rw × rh the image is resized to (scale
// s = max(tileW/srcW, tileH/srcH) in float64, each side rounded half to
// even as Python's round does), and the crop's left and top offsets
// (floor division). It refuses a geometry whose rounding would leave the
// resized image smaller than the tile (Pillow's crop would pad it with
// zeros), and one whose resized side exceeds MaxImageSide (an absurd
// aspect ratio).
func CropResizeGeometry(srcW, srcH, tileW, tileH int) (rw, rh, left, top int, err error) {
	if srcW < 1 || srcH < 1 || tileW < 1 || tileH < 1 {
		return 0, 0, 0, 0, fmt.Errorf("image of %d × %d to a tile of %d × %d: want positive sizes", srcW, srcH, tileW, tileH)
	}
	s := max(float64(tileW)/float64(srcW), float64(tileH)/float64(srcH))
	fw, fh := math.RoundToEven(float64(srcW)*s), math.RoundToEven(float64(srcH)*s)
	if fw > MaxImageSide || fh > MaxImageSide {
		return 0, 0, 0, 0, fmt.Errorf("image of %d × %d (width × height) would be resized to %.0f × %.0f to cover a %d × %d tile: want at most %d a side (aspect ratio too extreme)",
			srcW, srcH, fw, fh, tileW, tileH, MaxImageSide)
	}
	rw, rh = int(fw), int(fh)
	if rw < tileW || rh < tileH {
		return 0, 0, 0, 0, fmt.Errorf("image of %d × %d (width × height) is resized to %d × %d, smaller than the %d × %d tile after rounding: refusing the zero padding upstream's crop would add",
			srcW, srcH, rw, rh, tileW, tileH)
	}
	return rw, rh, max((rw-tileW)/2, 0), max((rh-tileH)/2, 0), nil
}

// tilePlan is the resize of one camera's image size to its tile: the
// coefficients of the output columns and rows inside the crop only (each
// output sample depends on its own coefficients alone, so the crop can be
// taken before resizing).
type tilePlan struct {
	srcW, srcH       int
	tileW, tileH     int
	left, top        int
	horiz, vert      bool // whether each pass runs (the size changes)
	hc, vc           coeffs
	hcFlip           coeffs // hc in the unflipped image's columns (see mirrored)
	rowFirst, rowEnd int    // the source rows the tile needs
}

// coeffs are Pillow's fixed-point filter coefficients for count outputs.
type coeffs struct {
	ksize int
	lo    []int   // first input of each output
	n     []int   // number of inputs of each output
	k     []int32 // ksize per output, 22 fraction bits
}

// precision is Pillow's PRECISION_BITS for 8-bit images.
const precision = 22

// makeCoeffs computes Pillow's BILINEAR coefficients (Resample.c,
// precompute_coeffs and normalize_coeffs_8bpc) of the outputs
// first..first+count-1 of a resize of nIn samples to nOut.
func makeCoeffs(nIn, nOut, first, count int) coeffs {
	scale := float64(nIn) / float64(nOut)
	filterscale := max(scale, 1)
	support := 1.0 * filterscale // the triangle's support is 1
	ss := 1.0 / filterscale
	ksize := int(math.Ceil(support))*2 + 1
	c := coeffs{ksize: ksize, lo: make([]int, count), n: make([]int, count), k: make([]int32, count*ksize)}
	w := make([]float64, ksize)
	for i := range count {
		center := (float64(first+i) + 0.5) * scale
		lo := max(int(center-support+0.5), 0) // int() truncates toward zero, as C's cast
		hi := min(int(center+support+0.5), nIn)
		n := hi - lo
		ww := 0.0
		for x := range n {
			t := math.Abs((float64(x+lo) - center + 0.5) * ss)
			w[x] = 0
			if t < 1 {
				w[x] = 1 - t
			}
			ww += w[x]
		}
		k := c.k[i*ksize : (i+1)*ksize]
		for x := range n {
			v := w[x]
			if ww != 0 {
				v /= ww
			}
			if v < 0 {
				k[x] = int32(-0.5 + v*(1<<precision))
			} else {
				k[x] = int32(0.5 + v*(1<<precision))
			}
		}
		c.lo[i], c.n[i] = lo, n
	}
	return c
}

// mirrored is c for an input read in reverse order: output i's inputs
// lo..lo+n-1 of the reversed input are the original's nIn-lo-n..nIn-1-lo,
// with the coefficients reversed. The integer sums are the same in any
// order, so the results are identical; reading forward is faster.
func (c coeffs) mirrored(nIn int) coeffs {
	m := coeffs{ksize: c.ksize, lo: make([]int, len(c.lo)), n: slices.Clone(c.n), k: make([]int32, len(c.k))}
	for i, lo := range c.lo {
		n := c.n[i]
		m.lo[i] = nIn - lo - n
		for x := range n {
			m.k[i*c.ksize+x] = c.k[i*c.ksize+n-1-x]
		}
	}
	return m
}

// clip8 is Pillow's clip8: the accumulator's integer part, clamped.
func clip8(acc int32) byte {
	v := acc >> precision
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}

func newTilePlan(srcW, srcH, tileW, tileH int) (*tilePlan, error) {
	rw, rh, left, top, err := CropResizeGeometry(srcW, srcH, tileW, tileH)
	if err != nil {
		return nil, err
	}
	t := &tilePlan{srcW: srcW, srcH: srcH, tileW: tileW, tileH: tileH, left: left, top: top,
		horiz: rw != srcW, vert: rh != srcH}
	if t.horiz {
		t.hc = makeCoeffs(srcW, rw, left, tileW)
		t.hcFlip = t.hc.mirrored(srcW)
	}
	t.rowFirst, t.rowEnd = top, top+tileH
	if t.vert {
		t.vc = makeCoeffs(srcH, rh, top, tileH)
		t.rowFirst, t.rowEnd = srcH, 0
		for i := range tileH {
			t.rowFirst = min(t.rowFirst, t.vc.lo[i])
			t.rowEnd = max(t.rowEnd, t.vc.lo[i]+t.vc.n[i])
		}
	}
	return t, nil
}

// plan makes (or keeps) camera i's plan for img's size.
func (p *Preprocessor) plan(i int, img Image) error {
	if t := p.plans[i]; t != nil && t.srcW == img.Width && t.srcH == img.Height {
		return nil
	}
	t, err := newTilePlan(img.Width, img.Height, p.cfg.TileWidth, p.cfg.TileHeight)
	if err != nil {
		return err
	}
	p.plans[i] = t
	return nil
}

// run writes the tile of img into dst (row stride in bytes), reading img
// rotated by 180° when flip is set, and returns the (possibly grown)
// scratch. img has the plan's size (Preprocessor.plan); accs has room for
// a tile row's accumulators.
func (t *tilePlan) run(dst []byte, stride int, img Image, flip bool, scratch []byte, accs []int32) []byte {
	w, h := t.srcW, t.srcH
	rows := t.rowEnd - t.rowFirst
	rowBytes := t.tileW * 3
	if cap(scratch) < rows*rowBytes {
		scratch = make([]byte, rows*rowBytes)
	}
	tmp := scratch[:rows*rowBytes]
	// Horizontal pass (or the crop of the columns) of the rows needed,
	// in the flipped image's coordinates: its pixel (x, y) is img's
	// (w-1-x, h-1-y).
	for r := range rows {
		y := t.rowFirst + r
		src, step := img.Pix[y*w*3:(y+1)*w*3], 3
		base := 0
		if flip {
			src = img.Pix[(h-1-y)*w*3 : (h-y)*w*3]
			base, step = (w-1)*3, -3
		}
		out := tmp[r*rowBytes : (r+1)*rowBytes]
		if !t.horiz {
			for xx := range t.tileW {
				s := base + step*(t.left+xx)
				out[3*xx], out[3*xx+1], out[3*xx+2] = src[s], src[s+1], src[s+2]
			}
			continue
		}
		c := &t.hc
		if flip {
			c = &t.hcFlip
		}
		for xx := range t.tileW {
			k := c.k[xx*c.ksize : xx*c.ksize+c.n[xx]]
			in := src[3*c.lo[xx] : 3*(c.lo[xx]+len(k))]
			acc0, acc1, acc2 := int32(1<<(precision-1)), int32(1<<(precision-1)), int32(1<<(precision-1))
			for j, kv := range k {
				px := in[3*j : 3*j+3 : 3*j+3]
				acc0 += int32(px[0]) * kv
				acc1 += int32(px[1]) * kv
				acc2 += int32(px[2]) * kv
			}
			out[3*xx], out[3*xx+1], out[3*xx+2] = clip8(acc0), clip8(acc1), clip8(acc2)
		}
	}
	// Vertical pass (or the crop of the rows) into the frame.
	for yy := range t.tileH {
		out := dst[yy*stride : yy*stride+rowBytes]
		if !t.vert {
			r := t.top + yy - t.rowFirst
			copy(out, tmp[r*rowBytes:(r+1)*rowBytes])
			continue
		}
		c := &t.vc
		k := c.k[yy*c.ksize : yy*c.ksize+c.n[yy]]
		r0 := c.lo[yy] - t.rowFirst
		acc := accs[:rowBytes]
		for x := range acc {
			acc[x] = 1 << (precision - 1)
		}
		// Tap by tap over whole rows: sequential reads.
		for j, kv := range k {
			row := tmp[(r0+j)*rowBytes : (r0+j+1)*rowBytes]
			row = row[:len(acc)]
			for x, v := range row {
				acc[x] += int32(v) * kv
			}
		}
		for x, a := range acc {
			out[x] = clip8(a)
		}
	}
	return scratch
}
