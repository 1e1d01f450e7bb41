package main

import (
	"io"

	"github.com/fastwam/actionexpert/internal/progress"
)

// progressFlag registers the -progress flag of a long command: auto, on
// or off; long says when auto prints ("for bags of more than 20 chunks").
func progressFlag(fs *cmdFlags, long string) *string {
	return fs.String("progress", string(progress.Auto), "progress lines on stderr: auto ("+long+"), on or off")
}

// progressOut is where a command's progress lines go: stderr, or nil for
// none, as the -progress value and whether this job is long say.
func progressOut(mode string, stderr io.Writer, long bool) (io.Writer, error) {
	m, err := progress.ParseMode(mode)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return m.Writer(stderr, long), nil
}
