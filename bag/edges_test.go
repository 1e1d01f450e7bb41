package bag_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
)

// copyRecorded copies one of the recorded bags of testdata/rosbag2 to a
// new folder and returns it.
func copyRecorded(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", "rosbag2", name)
	dst := filepath.Join(t.TempDir(), name)
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// openWithin opens a bag and fails the test if that takes longer than 5 s
// (a FIFO opened for reading blocks until a writer comes).
func openWithin(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		r, err := bag.OpenWith(context.Background(), path, bag.ReaderOptions{})
		if err == nil {
			r.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("opening %s blocks", path)
		return nil
	}
}

// TestNonRegularBagFiles: a FIFO as metadata.yaml or as a bag's file is
// refused at once, by kind, where os.Open waited for a writer forever.
func TestNonRegularBagFiles(t *testing.T) {
	dir := copyRecorded(t, "humble_mcap")
	meta := filepath.Join(dir, bag.MetadataFile)
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(meta, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := openWithin(t, dir); err == nil || !strings.Contains(err.Error(), "is a named pipe (FIFO), want the bag's metadata.yaml") {
		t.Fatalf("FIFO metadata.yaml: %v", err)
	}
	dir = copyRecorded(t, "humble_mcap")
	file := filepath.Join(dir, "humble_mcap_0.mcap")
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(file, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, file} {
		if err := openWithin(t, p); err == nil || !strings.Contains(err.Error(), "is a named pipe (FIFO), want a bag file (.mcap or .db3)") {
			t.Fatalf("FIFO bag file via %s: %v", p, err)
		}
	}
}

// TestMetadataBounds: a metadata.yaml larger than MaxMetadataBytes is
// refused before it is read; a file listed twice, or more files than the
// reader opens, is refused before any is opened.
func TestMetadataBounds(t *testing.T) {
	dir := copyRecorded(t, "humble_mcap")
	meta := filepath.Join(dir, bag.MetadataFile)
	if err := os.Truncate(meta, bag.MaxMetadataBytes+1); err != nil {
		t.Fatal(err)
	}
	if _, err := bag.Open(dir); err == nil || !strings.Contains(err.Error(), "more than the 4194304 allowed for the bag's metadata.yaml") {
		t.Fatalf("large metadata.yaml: %v", err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "rosbag2", "humble_mcap", bag.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	twice := strings.Replace(string(data), "    - humble_mcap_0.mcap\n", "    - humble_mcap_0.mcap\n    - ./humble_mcap_0.mcap\n", 1)
	if _, err := bag.ParseMetadata([]byte(twice)); err == nil || !strings.Contains(err.Error(), `lists file "./humble_mcap_0.mcap" more than once`) {
		t.Fatalf("file listed twice: %v", err)
	}
	var many strings.Builder
	for i := range 5000 {
		many.WriteString("    - f" + strings.Repeat("x", i%7) + "_" + strconv.Itoa(i) + ".mcap\n")
	}
	lots := strings.Replace(string(data), "    - humble_mcap_0.mcap\n", many.String(), 1)
	if _, err := bag.ParseMetadata([]byte(lots)); err == nil || !strings.Contains(err.Error(), "lists 5000 files, more than the 4096 this reader opens") {
		t.Fatalf("5000 files: %v", err)
	}
}

// TestSymlinkOutOfBag: a symbolic link inside a bag folder that points
// out of it is refused, for a listed file, a globbed one and the
// metadata.yaml; a link that stays inside is read.
func TestSymlinkOutOfBag(t *testing.T) {
	outside := copyRecorded(t, "humble_mcap")
	dir := copyRecorded(t, "humble_mcap")
	file := filepath.Join(dir, "humble_mcap_0.mcap")
	if err := os.Rename(file, filepath.Join(dir, "inside.mcap")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("inside.mcap", file); err != nil {
		t.Fatal(err)
	}
	if err := openWithin(t, dir); err != nil {
		t.Fatalf("link inside the folder: %v", err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "humble_mcap_0.mcap"), file); err != nil {
		t.Fatal(err)
	}
	if err := openWithin(t, dir); err == nil || !strings.Contains(err.Error(), "outside the bag folder") {
		t.Fatalf("listed file linking out: %v", err)
	}
	meta := filepath.Join(dir, bag.MetadataFile)
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "inside.mcap")); err != nil {
		t.Fatal(err)
	}
	if err := openWithin(t, dir); err == nil || !strings.Contains(err.Error(), "outside the bag folder") {
		t.Fatalf("globbed file linking out: %v", err)
	}
	if err := os.Symlink(filepath.Join(outside, bag.MetadataFile), meta); err != nil {
		t.Fatal(err)
	}
	if err := openWithin(t, dir); err == nil || !strings.Contains(err.Error(), "metadata.yaml resolves to") {
		t.Fatalf("metadata.yaml linking out: %v", err)
	}
}
