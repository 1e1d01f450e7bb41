package msgs_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

func TestNumElements(t *testing.T) {
	for _, tc := range []struct {
		shape []uint32
		want  int
		err   bool
	}{
		{nil, 0, false},
		{[]uint32{}, 0, false},
		{[]uint32{7}, 7, false},
		{[]uint32{30, 1, 98, 3072}, 9031680, false},
		{[]uint32{4, 0, 9}, 0, false},
		{[]uint32{math.MaxUint32, 1 << 31}, math.MaxUint32 << 31, false},
		{[]uint32{math.MaxUint32, math.MaxUint32}, 0, true}, // > MaxInt
		{[]uint32{math.MaxUint32, math.MaxUint32, 2}, 0, true},
		{[]uint32{math.MaxUint32, math.MaxUint32, math.MaxUint32, 0}, 0, true},
	} {
		got, err := msgs.Tensor{Shape: tc.shape}.NumElements()
		if tc.err {
			if !errors.Is(err, msgs.ErrTensorShape) {
				t.Errorf("%v: err = %v, want ErrTensorShape", tc.shape, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: got %d, %v; want %d", tc.shape, got, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		t    msgs.Tensor
		want string // "" = valid
	}{
		{msgs.Tensor{}, ""},
		{msgs.NewTensorF32([]uint32{2, 2}, []float32{1, 2, 3, 4}), ""},
		{msgs.Tensor{Shape: []uint32{3}, DType: msgs.DTypeFloat16, Data: make([]byte, 6)}, ""},
		{msgs.Tensor{Shape: []uint32{3}, DType: msgs.DTypeFloat16, Data: make([]byte, 12)},
			"msgs: Tensor: shape [3] needs 6 bytes of float16, got 12"},
		{msgs.Tensor{Data: []byte{1, 2, 3, 4}}, "msgs: Tensor: shape [] needs 0 bytes of float32, got 4"},
		{msgs.Tensor{Shape: []uint32{1}, DType: 2, Data: make([]byte, 4)},
			"msgs: Tensor: dtype 2 is not DTYPE_FLOAT32 (0) or DTYPE_FLOAT16 (1)"},
		{msgs.Tensor{Shape: []uint32{1 << 31, 1 << 31}, Data: nil},
			"msgs: Tensor: shape [2147483648 2147483648] needs 2^64 or more bytes of float32, got 0"},
	} {
		err := tc.t.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.t, err)
			}
			continue
		}
		if err == nil || err.Error() != tc.want || !errors.Is(err, msgs.ErrTensorShape) {
			t.Errorf("%v: got %v, want %s", tc.t, err, tc.want)
		}
	}
}

func TestNewTensorF32Copies(t *testing.T) {
	shape := []uint32{2}
	data := []float32{1.25, -3}
	tn := msgs.NewTensorF32(shape, data)
	shape[0], data[0] = 9, 9
	if !slices.Equal(tn.Shape, []uint32{2}) {
		t.Fatalf("shape %v follows the caller's slice", tn.Shape)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(tn.Data)); got != 1.25 {
		t.Fatalf("data[0] = %v, want 1.25 (a copy)", got)
	}
	if want := f32Bytes(1.25, -3); string(tn.Data) != string(want) {
		t.Fatalf("data % x, want little-endian % x", tn.Data, want)
	}
}

func TestDecodeF32Into(t *testing.T) {
	want := []float32{1.5, -2.25, 0, float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32}
	var tn msgs.Tensor
	if err := tn.UnmarshalCDR(golden(t, "tensor_f32")); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	if err := tn.DecodeF32Into(got); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element %d: %v, want %v", i, got[i], want[i])
		}
	}

	if err := tn.UnmarshalCDR(golden(t, "tensor_f16")); err != nil {
		t.Fatal(err)
	}
	got = make([]float32, 3)
	if err := tn.DecodeF32Into(got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []float32{1, -2, 65504}) {
		t.Fatalf("f16 decoded %v, want [1 -2 65504]", got)
	}

	err := tn.DecodeF32Into(make([]float32, 4))
	if !errors.Is(err, msgs.ErrMalformed) || err.Error() != "msgs: Tensor: destination has 4 elements, shape [3] has 3" {
		t.Fatalf("wrong destination size: %v", err)
	}
	bad := msgs.Tensor{Shape: []uint32{30, 1, 98, 3072}, Data: make([]byte, 100)}
	err = bad.DecodeF32Into(make([]float32, 9031680))
	if !errors.Is(err, msgs.ErrTensorShape) || !strings.Contains(err.Error(), "needs 36126720 bytes of float32, got 100") {
		t.Fatalf("inconsistent tensor: %v", err)
	}
	if err := (msgs.Tensor{}).DecodeF32Into(nil); err != nil {
		t.Fatalf("empty tensor: %v", err)
	}
}

// numpyF16SHA256 is the SHA-256 of the little-endian float32 bytes of all
// 65536 float16 bit patterns converted by numpy 1.24.2:
//
//	h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
//	hashlib.sha256(h.astype(np.float32).astype('<f4').tobytes()).hexdigest()
const numpyF16SHA256 = "f4fdd084f85448d28c84f20fabf4022ba938e40b7f382d2727dec6f41ac6267a"

// TestFloat16Conversion converts every float16 bit pattern (zeros,
// subnormals, normals, infinities, NaN payloads) and compares with numpy.
func TestFloat16Conversion(t *testing.T) {
	data := make([]byte, 2*65536)
	for i := range 65536 {
		binary.LittleEndian.PutUint16(data[2*i:], uint16(i))
	}
	tn := msgs.Tensor{Shape: []uint32{256, 256}, DType: msgs.DTypeFloat16, Data: data}
	got := make([]float32, 65536)
	if err := tn.DecodeF32Into(got); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(f32Bytes(got...))
	if hex.EncodeToString(sum[:]) != numpyF16SHA256 {
		t.Fatalf("float16 conversion differs from numpy; some values: 0x0001→%#x 0x7c01→%#x 0xfc00→%#x",
			math.Float32bits(got[0x0001]), math.Float32bits(got[0x7c01]), math.Float32bits(got[0xfc00]))
	}
	// Spot values from the same numpy run.
	for h, bits := range map[int]uint32{0x0001: 864026624, 0x03ff: 947896320, 0x7bff: 1199562752,
		0x7c00: 2139095040, 0x7c01: 2139103232, 0x8001: 3011510272, 0xffff: 4294959104} {
		if math.Float32bits(got[h]) != bits {
			t.Errorf("f16 %#04x → %#08x, numpy %#08x", h, math.Float32bits(got[h]), bits)
		}
	}
}

func TestTensorString(t *testing.T) {
	got := msgs.NewTensorF32([]uint32{2, 3}, make([]float32, 6)).String()
	if got != "Tensor{shape [2 3], float32, 24 bytes}" {
		t.Fatalf("String() = %q", got)
	}
}
