package rosparam

import (
	"reflect"
	"testing"
)

// FuzzApplyParamsYAML feeds arbitrary params files to the reader: it must
// not panic, a file it refuses must leave the configuration as it was, and
// a file it accepts must give the same configuration when applied again
// (the reader is deterministic and applies nothing twice). The seeds are in
// testdata/fuzz/FuzzApplyParamsYAML: small files for each rule of the
// format and each refusal.
func FuzzApplyParamsYAML(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxParamsFile {
			return // ApplyParamsFile refuses it before parsing
		}
		before := toy{Name: "keep", Bound: []float64{1}}
		p := before
		err := ApplyParamsYAML(&p, setToy, data, "/ns/exec")
		if err != nil {
			if !reflect.DeepEqual(p, before) {
				t.Fatalf("a refused file changed the configuration: %+v (%v)", p, err)
			}
			return
		}
		q := before
		if err := ApplyParamsYAML(&q, setToy, data, "/ns/exec"); err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("a second application differs: %+v / %+v, %v", p, q, err)
		}
	})
}
