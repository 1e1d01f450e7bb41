package main

import (
	"bytes"
	"fmt"

	"github.com/fastwam/actionexpert/camera"
	"github.com/fastwam/actionexpert/internal/regfile"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/worldmodel"
)

// readImageFile reads a PNG or JPEG camera image file as RGB8 with the
// camera decoder a CompressedImage gets (camera.Limits.DecodeCompressed):
// the file at most camera.DefaultMaxCompressedBytes, its header's size
// checked against the limits before any pixel is decoded. The format is
// told by the file's first bytes, not its name.
func readImageFile(path string) (worldmodel.Image, error) {
	data, err := regfile.ReadFile(path, "camera image", camera.DefaultMaxCompressedBytes)
	if err != nil {
		return worldmodel.Image{}, err
	}
	var format string
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		format = "png"
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		format = "jpeg"
	default:
		return worldmodel.Image{}, fmt.Errorf("camera image %s: not a PNG or JPEG file (its first bytes are % x)", path, data[:min(len(data), 8)])
	}
	var img worldmodel.Image
	if err := camera.DefaultLimits().DecodeCompressed(&img, &msgs.CompressedImage{Format: format, Data: data}); err != nil {
		return worldmodel.Image{}, fmt.Errorf("camera image %s: %w", path, err)
	}
	return img, nil
}
