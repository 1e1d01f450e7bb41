//go:build race

package worldmodel

// raceEnabled: under the race detector sync.Pool drops items at random
// (purego's SyscallN draws its call record from one), so an OpenBLAS call
// may allocate; the allocation tests then log instead of asserting.
const raceEnabled = true
