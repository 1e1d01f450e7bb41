package qnnrt

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// multiGraphBinary has three graphs with different I/O counts, types,
// ranks and quantization, so a wrong graph-info stride or tensor layout
// shows up as wrong names or shapes.
func multiGraphBinary() qnnfake.Binary {
	q8 := &qnnfake.ScaleOffset{Scale: 0.25, Offset: -128}
	q16 := &qnnfake.ScaleOffset{Scale: 1.0 / 1024, Offset: -32768}
	return qnnfake.Binary{SocModel: 69, Arch: 79, BuildID: "v2.43.0.260127150333_193827", Graphs: []qnnfake.Graph{
		qnnfake.ActionStepGraph(qnnfake.DataTypeFloat16, smallDims()),
		{Name: "encoder", Inputs: []qnnfake.Tensor{
			{ID: 3, Name: "pixels", DataType: qnnfake.DataTypeUFixed8, Dims: []uint32{1, 8, 8, 3}, Quant: q8},
		}, Outputs: []qnnfake.Tensor{
			{ID: 9, Name: "features", DataType: qnnfake.DataTypeUFixed16, Dims: []uint32{1, 16}, Quant: q16},
			{ID: 10, Name: "logits", DataType: qnnfake.DataTypeBF16, Dims: []uint32{5}},
		}},
		{Name: "scalar", Inputs: []qnnfake.Tensor{
			{ID: 1, Name: "x", DataType: qnnfake.DataTypeFloat32, Dims: []uint32{1}},
			{ID: 2, Name: "y", DataType: qnnfake.DataTypeFloat32, Dims: []uint32{2, 2}},
		}, Outputs: []qnnfake.Tensor{
			{ID: 7, Name: "z", DataType: qnnfake.DataTypeFloat32, Dims: []uint32{2, 2}},
		}},
	}}
}

func compareInfo(t *testing.T, got *ContextInfo, want qnnfake.Binary) {
	t.Helper()
	if len(got.Graphs) != len(want.Graphs) {
		t.Fatalf("%d graphs, want %d", len(got.Graphs), len(want.Graphs))
	}
	if got.BuildID != want.BuildID {
		t.Errorf("build id %q, want %q", got.BuildID, want.BuildID)
	}
	for i, wg := range want.Graphs {
		g := got.Graphs[i]
		if g.Name != wg.Name {
			t.Errorf("graph %d named %q, want %q", i, g.Name, wg.Name)
		}
		cmp := func(kind string, have []TensorInfo, w []qnnfake.Tensor) {
			if len(have) != len(w) {
				t.Errorf("graph %q: %d %ss, want %d", wg.Name, len(have), kind, len(w))
				return
			}
			for k, wt := range w {
				h := have[k]
				if h.Name != wt.Name || h.ID != wt.ID || uint32(h.DataType) != wt.DataType || !slices.Equal(h.Dims, wt.Dims) {
					t.Errorf("graph %q %s %d: %q id %d %s %s, want %q id %d %#x %v",
						wg.Name, kind, k, h.Name, h.ID, h.DataType, h.Shape(), wt.Name, wt.ID, wt.DataType, wt.Dims)
				}
				if wt.Quant == nil {
					if h.Quant.Defined {
						t.Errorf("%s %q: float tensor reported as quantized: %+v", kind, h.Name, h.Quant)
					}
				} else if !h.Quant.Defined || h.Quant.Encoding != encodingScaleOffset || h.Quant.Scale != wt.Quant.Scale || h.Quant.Offset != wt.Quant.Offset {
					t.Errorf("%s %q: quantization %+v, want scale %g offset %d", kind, h.Name, h.Quant, wt.Quant.Scale, wt.Quant.Offset)
				}
			}
		}
		cmp("input", g.Inputs, wg.Inputs)
		cmp("output", g.Outputs, wg.Outputs)
	}
}

func TestMetadataVersions(t *testing.T) {
	want := multiGraphBinary()
	for _, biv := range []uint32{1, 2, 3} {
		for _, gi3 := range []bool{false, true} {
			for _, tv := range []uint32{1, 2} {
				t.Run(fmt.Sprintf("binaryinfo%d_graphinfo3=%v_tensor%d", biv, gi3, tv), func(t *testing.T) {
					fk := fakeLib(t, qnnfake.Variant{})
					fk.SetBinaryInfoVersion(biv)
					fk.SetGraphInfoV3(gi3)
					fk.SetTensorVersion(tv)
					l := openFake(t, fk)
					path := writeBinary(t, want)
					info, err := l.ReadContextInfo(path)
					if err != nil {
						t.Fatal(err)
					}
					compareInfo(t, info, want)
					if info.BinaryInfoVersion != biv {
						t.Errorf("binary info version %d, want %d", info.BinaryInfoVersion, biv)
					}
					wantStride := graphInfoStrideOld
					if gi3 {
						wantStride = graphInfoStrideV3
					}
					if info.GraphInfoStride != wantStride {
						t.Errorf("graph-info stride %d, want %d", info.GraphInfoStride, wantStride)
					}
					// v3 carries the SoC model itself; v2 and v3 carry it and
					// the DSP architecture in the platform info; v1 has neither.
					wantSoc, wantArch := want.SocModel, want.Arch
					if biv == 1 {
						wantSoc, wantArch = 0, 0
					}
					if info.SocModel != wantSoc || info.DSPArch != wantArch {
						t.Errorf("SoC model %d arch %d, want %d and %d", info.SocModel, info.DSPArch, wantSoc, wantArch)
					}
					if info.BackendID != 6 || info.CoreAPI != (Version{2, 32, 0}) || info.BackendAPI != (Version{5, 43, 0}) ||
						info.ContextBlobSize != uint64(len(want.Marshal())-0x40) {
						t.Errorf("backend %d core API %v backend API %v blob size %d", info.BackendID, info.CoreAPI, info.BackendAPI, info.ContextBlobSize)
					}
					if info.Format != (Version{2, 3, 0}) || info.Path != path || info.Size != int64(len(want.Marshal())) {
						t.Errorf("format %v path %q size %d", info.Format, info.Path, info.Size)
					}
					for _, g := range info.Graphs {
						for _, ts := range [][]TensorInfo{g.Inputs, g.Outputs} {
							for _, ti := range ts {
								if ti.Version != tv {
									t.Errorf("tensor %q version %d, want %d", ti.Name, ti.Version, tv)
								}
							}
						}
					}
					// A session built from the same metadata executes every graph.
					s := newSession(t, l, SessionOptions{ContextPath: path})
					for _, wg := range want.Graphs {
						gr, err := s.Graph(wg.Name)
						if err != nil {
							t.Fatal(err)
						}
						in := randomInputs(wg, 3)
						out := outputsFor(wg)
						if _, err := gr.Run(t.Context(), in, out); err != nil {
							t.Fatalf("graph %q: %v", wg.Name, err)
						}
						exp := qnnfake.Expected(wg, in)
						for j := range out {
							if !slices.Equal(out[j], exp[j]) {
								t.Errorf("graph %q output %d = %v, want %v", wg.Name, j, out[j][:min(4, len(out[j]))], exp[j][:min(4, len(exp[j]))])
							}
						}
					}
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					checkClean(t, fk)
				})
			}
		}
	}
}

func TestMetadataErrors(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	good := multiGraphBinary().Marshal()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Malformed payload behind a valid container header: the system
	// library's own verdict.
	bad := slices.Clone(good)
	copy(bad[0x40:], "NOTQNN!!")
	_, err := l.ReadContextInfo(write("badmagic.bin", bad))
	if c, ok := Code(err); !ok || c != 30010 || !strings.Contains(err.Error(), "QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY (30010)") ||
		!strings.Contains(err.Error(), "systemContextGetMetaData") || !strings.Contains(err.Error(), "badmagic.bin") {
		t.Errorf("malformed payload: %v", err)
	}
	// Truncated and padded files fail before the library sees them.
	for name, data := range map[string][]byte{"trunc.bin": good[:len(good)-3], "pad.bin": append(slices.Clone(good), 0, 0)} {
		if _, err := l.ReadContextInfo(write(name, data)); err == nil || !strings.Contains(err.Error(), "truncated or padded") {
			t.Errorf("%s: %v", name, err)
		}
	}
	path := write("good.bin", good)
	fk.FailCall("systemContextCreate", 30002, 1)
	if _, err := l.ReadContextInfo(path); err == nil || !strings.Contains(err.Error(), "systemContextCreate: QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED (30002)") {
		t.Errorf("systemContextCreate failure: %v", err)
	}
	fk.FailCall("systemContextFree", 30000, 1)
	if _, err := l.ReadContextInfo(path); err == nil || !strings.Contains(err.Error(), "systemContextFree: QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE (30000)") {
		t.Errorf("systemContextFree failure: %v", err)
	}
	fk.SetBinaryInfoVersion(4)
	if _, err := l.ReadContextInfo(path); err == nil || !strings.Contains(err.Error(), "binary info version 4; this runtime reads versions 1, 2 and 3") {
		t.Errorf("unknown binary info version: %v", err)
	}
	fk.SetBinaryInfoVersion(3)
	fk.SetTensorVersion(5)
	if _, err := l.ReadContextInfo(path); err == nil || !strings.Contains(err.Error(), "Qnn_Tensor_t version 5") {
		t.Errorf("unknown tensor version: %v", err)
	}
	fk.SetTensorVersion(2)
	if _, err := l.ParseContextInfo(good); err != nil {
		t.Errorf("ParseContextInfo: %v", err)
	}
	if _, err := l.ParseContextInfo(good[:10]); err == nil || !strings.Contains(err.Error(), "shorter than the 40-byte header") {
		t.Errorf("ParseContextInfo of 10 bytes: %v", err)
	}
	// The injected systemContextFree failure leaves that one handle alive
	// in the test double; nothing else may be.
	if fk.LiveHandles() != 1 || fk.DoubleFrees() != 0 {
		t.Errorf("%d live handles, %d double frees; want 1 and 0", fk.LiveHandles(), fk.DoubleFrees())
	}
}

func TestListing(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	path := writeBinary(t, multiGraphBinary())
	var buf bytes.Buffer
	if err := Inspect(&buf, path, libOpts(fk)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, s := range []string{
		"context binary " + path,
		"format          2.3",
		"binary info     v3 (graph-info stride 88)",
		"build id        v2.43.0.260127150333_193827",
		"SoC model       69",
		"DSP arch        v79",
		"backend         6 (HTP)",
		"core API        2.32.0",
		`graph "action_step": 6 input(s), 1 output(s)`,
		`graph "encoder": 1 input(s), 2 output(s)`,
		"video_keys", "FLOAT_16", "[2,1,3,8]",
		"pixels", "UFIXED_POINT_8", "[1,8,8,3]", "scale 0.25 offset -128",
		"features", "UFIXED_POINT_16", "scale 0.0009765625 offset -32768",
		"logits", "BFLOAT_16", "[5]",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("listing lacks %q:\n%s", s, out)
		}
	}
	if strings.Count(out, "  in  ") != 9 || strings.Count(out, "  out ") != 4 {
		t.Errorf("listing has %d input and %d output lines, want 9 and 4:\n%s", strings.Count(out, "  in  "), strings.Count(out, "  out "), out)
	}
	checkClean(t, fk)
	if err := Inspect(&buf, path+".missing", libOpts(fk)); err == nil {
		t.Error("Inspect of a missing file succeeded")
	}
}
