//go:build !race

package worldmodel

// raceEnabled reports a race-detector build (see race_test.go).
const raceEnabled = false
