package bag_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/bag/bagtest"
	"github.com/fastwam/actionexpert/msgs"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(ents)
}

// splitBag writes a bag folder of n files, file i holding two diagnostics
// messages at i s and i s + 500 ms, as rosbag2 splits a recording: the
// files follow one another in time. sqlite chooses the storage. It
// returns the folder and the messages in log-time order.
func splitBag(t *testing.T, n int, sqlite bool) (string, []written) {
	t.Helper()
	times := make([][]time.Duration, n)
	for i := range times {
		times[i] = []time.Duration{time.Duration(i) * time.Second, time.Duration(i)*time.Second + 500*time.Millisecond}
	}
	return timedBag(t, sqlite, times)
}

// timedBag writes a bag folder whose file i holds diagnostics messages at
// 100 s plus times[i] (each time in order), listed in that order. It
// returns the folder and the messages in the order the reader must return
// them: by log time, ties in the order the files are listed.
func timedBag(t *testing.T, sqlite bool, times [][]time.Duration) (string, []written) {
	t.Helper()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "split")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := &bag.Metadata{Version: 5, StorageIdentifier: "mcap", StartingTime: time.Unix(100, 0)}
	if sqlite {
		meta.StorageIdentifier = bag.StorageSQLite3
	}
	var want []written
	seq := uint64(0)
	for i, ts := range times {
		var ms []bagtest.Message
		for _, d := range ts {
			at := time.Unix(100, 0).Add(d)
			data := mustCDR(t, diagMsg(seq))
			seq++
			ms = append(ms, bagtest.Message{Topic: topicDiag, LogTime: at, Data: data})
			want = append(want, written{topicDiag, msgs.TypeDiagnosticArray, at, data, nil})
		}
		meta.MessageCount += uint64(len(ms))
		var name string
		if sqlite {
			name = fmt.Sprintf("split_%d.db3", i)
			db, err := bagtest.CreateDB(filepath.Join(dir, name), []bagtest.Topic{{Name: topicDiag, Type: msgs.TypeDiagnosticArray}}, ms)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		} else {
			name = fmt.Sprintf("split_%d.mcap", i)
			part := filepath.Join(tmp, name)
			w, err := bag.Create(part, bag.WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.AddTopic(topicDiag, msgs.TypeDiagnosticArray, bag.DefaultQoS()); err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if err := w.Write(m.Topic, m.LogTime, m.Data); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(part, name+"_0.mcap"), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		meta.RelativeFilePaths = append(meta.RelativeFilePaths, name)
	}
	// As rosbag2 writes it, message_count is the topics' total.
	meta.Topics = []bag.TopicMetadata{{Name: topicDiag, Type: msgs.TypeDiagnosticArray, SerializationFormat: "cdr", MessageCount: meta.MessageCount}}
	slices.SortStableFunc(want, func(a, b written) int { return a.at.Compare(b.at) })
	if err := os.WriteFile(filepath.Join(dir, bag.MetadataFile), meta.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, want
}

// TestManyFilesOneOpen reads bags of 300 files that follow one another in
// time and counts the descriptors the reader holds: one after Open, and
// while reading at most two (one file: an MCAP file takes one, a sqlite3
// database two, the walk's connection and the blob reads'). It held all
// 300 files open from Open to Close before.
func TestManyFilesOneOpen(t *testing.T) {
	for _, tc := range []struct {
		name             string
		sqlite, reversed bool
	}{{"mcap", false, false}, {"sqlite3", true, false}, {"mcap listed last first", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, want := splitBag(t, 300, tc.sqlite)
			if tc.reversed {
				// The first file listed, the last in time, stays open from
				// Open on; the others are opened in time order, one at a
				// time, not all those that start before it.
				meta, err := bag.ReadMetadata(dir)
				if err != nil {
					t.Fatal(err)
				}
				slices.Reverse(meta.RelativeFilePaths)
				if err := os.WriteFile(filepath.Join(dir, bag.MetadataFile), meta.Encode(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			base := openFDs(t)
			r, err := bag.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if n := openFDs(t) - base; n > 1 {
				t.Errorf("the open bag holds %d descriptors, want 1", n)
			}
			if tp := r.Topics(); len(tp) != 1 || tp[0].MessageCount != 600 {
				t.Errorf("topics %+v, want one with 600 messages", tp)
			}
			var got []bag.Message
			most := 0
			for m, err := range r.Messages(t.Context()) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
				most = max(most, openFDs(t)-base)
			}
			checkMessages(t, got, want)
			t.Logf("at most %d descriptors open while reading", most)
			if most > 2 {
				t.Errorf("%d descriptors open at once while reading, want at most 2", most)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if n := openFDs(t) - base; n > 0 {
				t.Errorf("%d descriptors left open after Close", n)
			}
		})
	}
}

// TestReopenedFileMustBeTheSame: a file the reader closed after opening
// the bag and opens again to read its messages must be the file it
// checked: one replaced meanwhile is refused, naming it.
func TestReopenedFileMustBeTheSame(t *testing.T) {
	dir, _ := splitBag(t, 3, false)
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	second := filepath.Join(dir, "split_1.mcap")
	data, err := os.ReadFile(second)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(second); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, bytes.Clone(data), 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range r.Messages(t.Context()) {
		if err != nil {
			if !strings.Contains(err.Error(), second+" changed since the bag was opened") {
				t.Fatalf("after %d messages: %v", n, err)
			}
			if n != 2 {
				t.Errorf("refused after %d messages, want 2 (the first file's)", n)
			}
			return
		}
		n++
	}
	t.Fatal("a file replaced after the bag was opened was read")
}

// TestFilesOpenedInTime: files listed out of time order, or whose times
// overlap and tie, are merged as when all were open: by log time, ties in
// the order the files are listed. A file not open yet is opened before a
// message of a later-listed file at its start time is returned.
func TestFilesOpenedInTime(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name  string
		times [][]time.Duration
	}{
		{"listed out of order", [][]time.Duration{{2 * s, 2*s + 1}, {0, 1}, {3 * s}, {s, s + 1}}},
		{"overlapping", [][]time.Duration{{0, 2 * s, 4 * s}, {s, 3 * s}, {s, 5 * s}}},
		// The first file is read first; then the third (earlier start);
		// at 5 s the second, listed before it, comes first.
		{"tie with a file not open", [][]time.Duration{{0}, {5 * s}, {s, 5 * s}}},
		{"empty file", [][]time.Duration{{0}, {}, {s}}},
	} {
		for _, sqlite := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sqlite=%v", tc.name, sqlite), func(t *testing.T) {
				dir, want := timedBag(t, sqlite, tc.times)
				r, err := bag.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				checkMessages(t, readAll(t, r), want)
			})
		}
	}
}

// TestSingleSQLiteFileMustBeTheSame: a bag of one sqlite3 file, which the
// reader keeps open from Open on, is read from that file only: a copy
// renamed over it between Open and the first read is refused, naming it,
// as a reopened file of a split bag is (TestReopenedFileMustBeTheSame).
// SQLite opens the blob reads' connection by name at the first message:
// it used to read the new file without a word.
func TestSingleSQLiteFileMustBeTheSame(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("db3 path=%v", single), func(t *testing.T) {
			dir, _ := writeSQLiteBag(t, 3)
			file := filepath.Join(dir, "rec_0.db3")
			path := dir
			if single {
				path = file
			}
			r, err := bag.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			other := filepath.Join(t.TempDir(), "other.db3")
			if err := os.WriteFile(other, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(other, file); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, err := range r.Messages(t.Context()) {
				if err != nil {
					if !strings.Contains(err.Error(), file+" changed since the bag was opened") {
						t.Fatalf("after %d messages: %v", n, err)
					}
					return
				}
				n++
			}
			t.Fatalf("%d messages read from a file renamed over the bag after Open", n)
		})
	}
}
