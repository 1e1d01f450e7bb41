package camera_test

import (
	"bytes"
	"image/jpeg"
	"testing"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// The decoders against their baselines, measured in the same run:
//
//	go test -run '^$' -bench . -benchmem ./camera
//
// BenchmarkDecodeImage (a 640 × 480 bgr8 frame with padded rows, from its
// CDR bytes: decode the message, convert to RGB8) against BenchmarkCopyFrame
// (a plain copy of the same number of bytes); BenchmarkDecodeJPEG (the
// whole DecodeCompressed of a 640 × 480 JPEG) against BenchmarkJPEGOnly
// (image/jpeg's Decode of the same bytes, nothing else).

const benchW, benchH = 640, 480

func benchRaw(b *testing.B) []byte {
	m, err := camera.EncodeImage(pattern(benchW, benchH, 1), "bgr8", 4)
	if err != nil {
		b.Fatal(err)
	}
	m.Header.FrameID = "agentview_optical"
	cdr, err := m.MarshalCDR()
	if err != nil {
		b.Fatal(err)
	}
	return cdr
}

func BenchmarkDecodeImage(b *testing.B) {
	cdr := benchRaw(b)
	var fd camera.FrameDecoder
	var img worldmodel.Image
	b.SetBytes(int64(benchW * benchH * 3))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fd.Decode(&img, msgs.TypeImage, cdr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCopyFrame(b *testing.B) {
	src := make([]byte, benchW*benchH*3)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		copy(dst, src)
	}
}

func benchJPEG(b *testing.B) []byte {
	m, err := camera.EncodeCompressed(pattern(benchW, benchH, 1), camera.JPEG, 90)
	if err != nil {
		b.Fatal(err)
	}
	return m.Data
}

func BenchmarkDecodeJPEG(b *testing.B) {
	m := msgs.CompressedImage{Format: "rgb8; jpeg compressed bgr8", Data: benchJPEG(b)}
	var img worldmodel.Image
	var lim camera.Limits
	b.SetBytes(int64(benchW * benchH * 3))
	b.ReportAllocs()
	for b.Loop() {
		if err := lim.DecodeCompressed(&img, &m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkJPEGOnly(b *testing.B) {
	data := benchJPEG(b)
	b.SetBytes(int64(benchW * benchH * 3))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}
