// Package strictjson walks JSON objects without copying their values, and
// refuses a key that appears twice in one object.
//
// encoding/json keeps the last of two equal keys silently, so a file can
// say one thing to a reader that stops at the first and another to this
// one. The walk also lets a caller look at the size of a value before it
// decodes it: a value is handed over as the raw bytes of the input it
// spans, and decoding it is the caller's choice.
package strictjson

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Object calls fn with each member of the JSON object b, in order: the
// key, decoded as encoding/json decodes it, and the raw bytes of its value
// (a slice of b, leading and trailing spaces removed). It refuses b when it
// is not valid JSON, not an object, or has a key twice; and stops at the
// first error fn returns.
func Object(b []byte, fn func(key string, raw []byte) error) error {
	if err := valid(b); err != nil {
		return err
	}
	return object(b, skip(b, 0), fn)
}

// NoDuplicates refuses a JSON text that is invalid or that has a key twice
// in any of its objects, at any depth.
func NoDuplicates(b []byte) error {
	if err := valid(b); err != nil {
		return err
	}
	return noDuplicates(b, skip(b, 0))
}

// valid returns encoding/json's syntax error for invalid JSON; it decodes
// nothing of a valid text.
func valid(b []byte) error {
	if json.Valid(b) {
		return nil
	}
	err := json.Unmarshal(b, new(struct{}))
	if err == nil {
		err = fmt.Errorf("invalid JSON")
	}
	return err
}

func noDuplicates(b []byte, i int) error {
	switch b[i] {
	case '{':
		return object(b, i, func(key string, raw []byte) error {
			if err := noDuplicates(raw, 0); err != nil {
				return fmt.Errorf("in %s: %w", quote(key), err)
			}
			return nil
		})
	case '[':
		for j := skip(b, i+1); b[j] != ']'; {
			if err := noDuplicates(b, j); err != nil {
				return err
			}
			j = skip(b, end(b, j))
			if b[j] == ',' {
				j = skip(b, j+1)
			}
		}
	}
	return nil
}

// object walks the object starting at b[i] of a valid JSON text.
func object(b []byte, i int, fn func(string, []byte) error) error {
	if b[i] != '{' {
		return fmt.Errorf("is a JSON %s, want an object", kind(b[i]))
	}
	seen := map[string]bool{}
	for j := skip(b, i+1); b[j] != '}'; {
		k := end(b, j)
		key, err := decodeKey(b[j:k])
		if err != nil {
			return err
		}
		if seen[key] {
			return fmt.Errorf("the key %s appears twice in one object; refusing the ambiguous JSON (a decoder keeps one of them silently)", quote(key))
		}
		seen[key] = true
		v := skip(b, skip(b, k)+1) // past the colon
		e := end(b, v)
		if err := fn(key, b[v:e]); err != nil {
			return err
		}
		j = skip(b, e)
		if b[j] == ',' {
			j = skip(b, j+1)
		}
	}
	return nil
}

func decodeKey(q []byte) (string, error) {
	plain := utf8.Valid(q)
	for _, c := range q[1 : len(q)-1] {
		if c == '\\' || c < 0x20 {
			plain = false
			break
		}
	}
	if plain {
		return string(q[1 : len(q)-1]), nil
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return "", err
	}
	return s, nil
}

// skip returns the index of the first byte at or after i that is not JSON
// whitespace (len(b) at the end).
func skip(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// end returns the index just past the value starting at b[i] of a valid
// JSON text.
func end(b []byte, i int) int {
	switch b[i] {
	case '"':
		for j := i + 1; ; j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = end(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// kind names the JSON type of a value from its first byte.
func kind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// Kind names the JSON type of the raw value raw ("string", "number",
// "object", ...), as Object hands it over.
func Kind(raw []byte) string { return kind(raw[0]) }

// quote quotes a key for a message, shortened when long.
func quote(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "..."
	}
	return strconv.Quote(s)
}
