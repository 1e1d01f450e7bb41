package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWeightsConfigBesideIsNotWaitedOn: a FIFO where the configuration
// beside the weights would be is not opened for reading (os.ReadFile would
// wait for a writer forever), and a configuration naming a key twice is
// not described as found; the loader reports both.
func TestWeightsConfigBesideIsNotWaitedOn(t *testing.T) {
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(w, []byte("\x02\x00\x00\x00\x00\x00\x00\x00{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "w.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if wc := readWeightsConfig(w, nil); wc.found {
		t.Errorf("a FIFO was read as the configuration: %+v", wc)
	}
	if err := os.Remove(filepath.Join(dir, "w.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"num_layers":1,"num_layers":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if wc := readWeightsConfig(w, nil); wc.found {
		t.Errorf("a configuration with a duplicate key was described as found: %+v", wc)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"num_layers":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if wc := readWeightsConfig(w, nil); !wc.found || wc.cfg.NumLayers != 2 {
		t.Errorf("config.json: %+v", wc)
	}
}
