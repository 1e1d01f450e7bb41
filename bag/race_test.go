//go:build race

package bag_test

// raceEnabled: the race detector keeps shadow memory for what a test
// touches, so resident-memory growth is not asserted under it.
const raceEnabled = true
