package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestObject(t *testing.T) {
	in := ` { "a" : 1 , "b\u0063":[1,{"x":"}]"}] ,"s":"q\"}" , "e":{}}  `
	var keys, raws []string
	if err := Object([]byte(in), func(k string, raw []byte) error {
		keys, raws = append(keys, k), append(raws, string(raw))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, "|") != "a|bc|s|e" || strings.Join(raws, "|") != `1|[1,{"x":"}]"}]|"q\"}"|{}` {
		t.Errorf("keys %q raws %q", keys, raws)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"a":1,"a":2}`, `the key "a" appears twice in one object`},
		{`{"a":1,"\u0061":2}`, `the key "a" appears twice in one object`},
		{`[1]`, "is a JSON array, want an object"},
		{`{"a":1`, "unexpected end of JSON input"},
		{`{"a":1}x`, "invalid character 'x' after top-level value"},
	} {
		err := Object([]byte(tc.in), func(string, []byte) error { return nil })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestNoDuplicates(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":{"b":1,"c":[{"d":1},{"d":2}]},"e":"a"}`, ""},
		{`[1, "x", null, {"k": [true]}]`, ""},
		{`{"a":{"b":1,"c":[{"d":1,"d":2}]}}`, `in "a": in "c": the key "d" appears twice in one object`},
		{`[{"k":1},{"k":1,"k":1}]`, `the key "k" appears twice`},
		{`{"x":1,"x":1}`, `the key "x" appears twice`},
	} {
		err := NoDuplicates([]byte(tc.in))
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzNoDuplicates: the walk never panics, accepts only valid JSON, and
// accepts every valid JSON text whose objects, decoded, keep all their keys.
func FuzzNoDuplicates(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\"}"}],"c":{}}`, `{"a":1,"a":2}`, `[{"\u00e9":1}," ]"]`, `"x"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := NoDuplicates(b)
		if err == nil && !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		_ = Object(b, func(string, []byte) error { return nil })
	})
}
