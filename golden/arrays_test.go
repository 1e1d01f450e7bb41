package golden_test

import (
	"archive/zip"
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
)

// TestParseArrays reads named arrays of every dtype the reader decodes, with
// their shapes, and ignores the members it was not asked for.
func TestParseArrays(t *testing.T) {
	img, err := npztest.Bytes(
		npztest.Array{Name: "f", Shape: []int{2, 3}, Data: []float32{1, 2, 3, 4, 5, 6}},
		npztest.Array{Name: "i", Shape: []int{2}, Data: []int64{-7, 40}},
		npztest.Array{Name: "d", Shape: []int{1}, Data: []float64{0.1}},
		npztest.Array{Name: "b", Shape: []int{3}, Data: []bool{true, false, true}},
		npztest.Array{Name: "unread", Shape: []int{1}, Data: []float32{float32(math.NaN())}},
	)
	if err != nil {
		t.Fatal(err)
	}
	got, err := golden.ParseArrays(t.Context(), "ok", img, "f", "i", "d", "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || !slices.Equal(got["f"].Shape, []int{2, 3}) || !slices.Equal(got["f"].Data, []float32{1, 2, 3, 4, 5, 6}) ||
		!slices.Equal(got["i"].Data, []float32{-7, 40}) || got["d"].Data[0] != float32(0.1) ||
		!slices.Equal(got["b"].Data, []float32{1, 0, 1}) {
		t.Errorf("read %v", got)
	}
	rows, err := got["f"].Rows(2, -1)
	if err != nil || len(rows) != 2 || !slices.Equal(rows[1], []float32{4, 5, 6}) {
		t.Errorf("Rows(2, -1) = %v, %v", rows, err)
	}
	for _, want := range [][]int{{3, -1}, {2}, {2, 3, 1}} {
		if _, err := got["f"].Rows(want...); err == nil || !strings.Contains(err.Error(), "shape [2 3]") {
			t.Errorf("Rows(%v) of [2 3]: %v", want, err)
		}
	}
}

// TestParseArraysHostile: every way an archive can differ from what was
// asked for is an error naming the array and the reason.
func TestParseArraysHostile(t *testing.T) {
	good := npztest.Array{Name: "x", Shape: []int{2}, Data: []float32{1, 2}}
	mk := func(arrays ...npztest.Array) []byte {
		b, err := npztest.Bytes(arrays...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	npy, err := npztest.NPY(good)
	if err != nil {
		t.Fatal(err)
	}
	zipOf := func(ms ...npztest.Member) []byte {
		b, err := npztest.Zip(ms...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	short := npztest.Raw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,), }\n", make([]byte, 8))
	fortran := npztest.Raw(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", make([]byte, 16))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		img  []byte
		keys []string
		want string
	}{
		{"not a zip", nil, []byte("PK nonsense"), []string{"x"}, "not a readable .npz archive"},
		{"missing", nil, mk(good), []string{"x", "y"}, `array "y" is missing`},
		{"asked twice", nil, mk(good), []string{"x", "x"}, `array "x" requested twice`},
		{"NaN", nil, mk(npztest.Array{Name: "x", Shape: []int{2}, Data: []float32{1, float32(math.NaN())}}), []string{"x"}, `array "x" element 1 is NaN`},
		{"Inf", nil, mk(npztest.Array{Name: "x", Shape: []int{1}, Data: []float64{math.Inf(-1)}}), []string{"x"}, `array "x" element 0 is -Inf`},
		{"two members", nil, zipOf(npztest.Member{Name: "x.npy", Data: npy}, npztest.Member{Name: "x.npy", Data: npy}), []string{"x"}, "appears twice"},
		{"declares more data than it holds", nil, zipOf(npztest.Member{Name: "x.npy", Data: short}), []string{"x"}, "4000 bytes of data, but the member holds 8"},
		{"Fortran order", nil, zipOf(npztest.Member{Name: "x.npy", Data: fortran}), []string{"x"}, "Fortran-ordered"},
		{"size lie", nil, zipOf(npztest.Member{Name: "x.npy", Raw: npy,
			Header: &zip.FileHeader{Method: zip.Store, CompressedSize64: uint64(len(npy)), UncompressedSize64: 1 << 30}}), []string{"x"}, "stored zip entry claims"},
		{"cancelled", cancelled, mk(good), []string{"x"}, "context canceled"},
	} {
		ctx := tc.ctx
		if ctx == nil {
			ctx = t.Context()
		}
		got, err := golden.ParseArrays(ctx, tc.name, tc.img, tc.keys...)
		if err == nil || got != nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: got %v, want an error naming the file and containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := golden.LoadTinyArrays(t.Context(), "tiny/none.npz", "x"); err == nil || !strings.Contains(err.Error(), "none.npz") {
		t.Errorf("missing embedded file: %v", err)
	}
}
