//go:build race

package node

// raceEnabled: the race detector's runtime allocates on its own, so
// allocation counts are not asserted under it.
const raceEnabled = true
