//go:build cgo

package qnnrt

// cgoBuild reports whether the test binary was built with cgo.
const cgoBuild = true
