//go:build !race

package bag_test

const raceEnabled = false
