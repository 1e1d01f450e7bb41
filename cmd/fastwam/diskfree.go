package main

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// freeBytes returns the bytes an unprivileged user may still write on the
// filesystem that holds folder dir.
func freeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// bagChunkBytes is what one chunk adds to a bag: the float32 payloads of
// its VideoKVCache (keys, values elements), TextContext (context elements,
// mask bytes) and ActionChunk (actions elements), and msgOverhead for each
// message's headers, fields and the MCAP record around it (a lower bound
// of the real size).
func bagChunkBytes(keys, values, context, mask, actions int) uint64 {
	const msgOverhead = 512
	return 4*uint64(keys+values+context+actions) + uint64(mask) + 3*msgOverhead
}

// checkBagChunks refuses a -chunks whose bag would not fit in the free
// space of the filesystem out goes on (measured now): the error names the
// flag, the value, the size it implies and the range that fits.
func checkBagChunks(chunks int, perChunk uint64, out string) error {
	if chunks < 1 {
		return usageError("-chunks %d: want at least 1", chunks)
	}
	parent := filepath.Dir(filepath.Clean(out))
	free, err := freeBytes(parent)
	if err != nil {
		return err
	}
	fit := free / perChunk
	if uint64(chunks) <= fit {
		return nil
	}
	if fit == 0 {
		return usageError("-chunks %d: one chunk takes about %s and %s has %s free", chunks, byteSize(float64(perChunk)), parent, byteSize(float64(free)))
	}
	return usageError("-chunks %d: want 1 to %d: the bag would take at least %s (%s a chunk), more than the %s free in %s",
		chunks, fit, byteSize(float64(chunks)*float64(perChunk)), byteSize(float64(perChunk)), byteSize(float64(free)), parent)
}

// byteSize prints a byte count with an SI unit.
func byteSize(b float64) string {
	for _, u := range []string{"B", "kB", "MB", "GB", "TB", "PB"} {
		if b < 1000 {
			return fmt.Sprintf("%.3g %s", b, u)
		}
		b /= 1000
	}
	return fmt.Sprintf("%.3g EB", b)
}
