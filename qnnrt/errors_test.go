package qnnrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestErrorFormatAndMatching(t *testing.T) {
	e := &Error{Op: `graphExecute "action_step"`, Code: 1007, Name: ErrorName(1007), Message: "DSP went away"}
	want := `qnnrt: graphExecute "action_step": QNN_COMMON_ERROR_SYSTEM_COMMUNICATION (1007): DSP went away`
	if e.Error() != want {
		t.Errorf("Error() = %q, want %q", e.Error(), want)
	}
	wrapped := fmt.Errorf("step 3: %w", e)
	if !errors.Is(wrapped, ErrSubsystemRestart) || errors.Is(wrapped, ErrSubsystemFatal) {
		t.Errorf("1007: Is(restart)=%v Is(fatal)=%v, want true false", errors.Is(wrapped, ErrSubsystemRestart), errors.Is(wrapped, ErrSubsystemFatal))
	}
	fatal := &Error{Op: "graphExecute", Code: 1011, Name: ErrorName(1011)}
	if errors.Is(fatal, ErrSubsystemRestart) || !errors.Is(fatal, ErrSubsystemFatal) {
		t.Error("1011 must match ErrSubsystemFatal only")
	}
	if fatal.Error() != "qnnrt: graphExecute: QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL (1011)" {
		t.Errorf("no-message format: %q", fatal.Error())
	}
	if !errors.Is(wrapped, &Error{Code: 1007}) || errors.Is(wrapped, &Error{Code: 6004}) {
		t.Error("matching by code")
	}
	if c, ok := Code(wrapped); !ok || c != 1007 {
		t.Errorf("Code = %d, %v", c, ok)
	}
	if _, ok := Code(errors.New("plain")); ok {
		t.Error("Code of a plain error")
	}
	if ErrorName(4242) != "QNN_ERROR_4242" {
		t.Errorf("unknown code name %q", ErrorName(4242))
	}
	if errorCode(0xABCD_0000_1388) != 5000 {
		t.Error("errorCode must keep the low 16 bits")
	}
}

func header(major, minor uint32, off, size uint64, total int) []byte {
	b := make([]byte, total)
	binary.BigEndian.PutUint32(b[0:], major)
	binary.BigEndian.PutUint32(b[4:], minor)
	binary.LittleEndian.PutUint64(b[headerPayloadOffset:], off)
	binary.LittleEndian.PutUint64(b[headerPayloadSize:], size)
	return b
}

func TestMapContextBinaryRejectsNonBinaries(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := header(2, 3, 0x40, 16, 0x50)
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty.bin", nil, "is empty"},
		{"short.bin", []byte("hello"), "shorter than the 40-byte header"},
		{"elf.bin", append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 60)...), "is not a QNN context binary: header starts 7f 45 4c 46"},
		{"truncated.bin", good[:0x48], "payload offset 64 + size 16 != file size 72"},
		{"padded.bin", append(append([]byte{}, good...), 0), "!= file size 81"},
		{"badoffset.bin", header(2, 3, 0x10, 0x40, 0x50), "payload offset 16"},
	} {
		p := write(tc.name, tc.data)
		m, err := mapContextBinary(p)
		if err == nil {
			m.unmap()
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: error %q, want it to name the file and contain %q", tc.name, err, tc.want)
		}
	}
	if _, err := mapContextBinary(filepath.Join(dir, "missing.bin")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := mapContextBinary(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	m, err := mapContextBinary(write("good.bin", good))
	if err != nil {
		t.Fatal(err)
	}
	if m.format != (Version{2, 3, 0}) || len(m.data) != len(good) {
		t.Errorf("format %v, %d bytes", m.format, len(m.data))
	}
	if err := m.unmap(); err != nil || m.unmap() != nil {
		t.Errorf("unmap twice: %v", err)
	}
	// Format 2.2 has no payload size to check.
	if _, err := checkHeader("old", header(2, 2, 0, 0, 0x40)); err != nil {
		t.Errorf("format 2.2: %v", err)
	}
}

func actionInfo() *ContextInfo {
	ti := func(name string, dims ...uint32) TensorInfo {
		return TensorInfo{Name: name, DataType: Float32, Dims: dims}
	}
	return &ContextInfo{Graphs: []GraphInfo{{
		Name:    "g",
		Inputs:  []TensorInfo{ti("a", 1, 4), ti("b", 2)},
		Outputs: []TensorInfo{ti("y", 1, 4)},
	}}}
}

func TestContextInfoCheck(t *testing.T) {
	spec := GraphSpec{Name: "g",
		Inputs:  []TensorSpec{{Name: "b", Dims: []uint32{2}}, {Name: "a", Dims: []uint32{1, 4}}},
		Outputs: []TensorSpec{{Name: "y"}}}
	if err := actionInfo().Check(spec); err != nil {
		t.Fatalf("matching spec (inputs in another order): %v", err)
	}
	for _, tc := range []struct {
		mut  func(*ContextInfo, *GraphSpec)
		want string
	}{
		{func(c *ContextInfo, s *GraphSpec) { s.Name = "h" }, `no graph "h"; it has ["g"]`},
		{func(c *ContextInfo, s *GraphSpec) { s.Inputs[1].Dims = []uint32{1, 5} }, `input "a" has shape [1,4], want [1,5]`},
		{func(c *ContextInfo, s *GraphSpec) { s.Inputs = s.Inputs[:1] }, `has input "a" that the expected contract does not name`},
		{func(c *ContextInfo, s *GraphSpec) { s.Outputs[0].Name = "z" }, `has no output "z"; its outputs are ["y"]`},
		{func(c *ContextInfo, s *GraphSpec) { c.Graphs[0].Inputs[0].DataType = Int32 }, `tensor "a" has data type INT_32`},
	} {
		c := actionInfo()
		s := spec
		s.Inputs = append([]TensorSpec(nil), spec.Inputs...)
		s.Outputs = append([]TensorSpec(nil), spec.Outputs...)
		tc.mut(c, &s)
		if err := c.Check(s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
	}
}

// TestErrorNames checks names against facts of the public QNN 2.25
// headers' error enums (value = MIN_ERROR base of the component + offset):
// one code of each component, the Saver's dummy return value among them,
// which read QNN_ERROR_4950 before.
func TestErrorNames(t *testing.T) {
	for code, want := range map[uint64]string{
		0:            "QNN_SUCCESS",
		3110:         "QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE",
		4010:         "QNN_BACKEND_ERROR_INCONSISTENT_CONFIG",
		4950:         "QNN_SAVER_ERROR_DUMMY_RETVALUE",
		4951:         "QNN_SAVER_ERROR_ALREADY_INSTANTIATED",
		5013:         "QNN_CONTEXT_ERROR_TIMED_OUT",
		6038:         "QNN_GRAPH_ERROR_EARLY_TERMINATION",
		7007:         "QNN_TENSOR_ERROR_INCOMPATIBLE_TENSOR_UPDATE",
		9004:         "QNN_SIGNAL_ERROR_TIMEOUT",
		10001:        "QNN_ERROR_INVALID_ERROR_HANDLE",
		12002:        "QNN_PROFILE_ERROR_INCOMPATIBLE_EVENT",
		13006:        "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_FAILED",
		30010:        "QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY",
		1<<16 + 1007: "QNN_ERROR_66543", // not a code: ErrorName takes the code, not the handle
	} {
		if got := ErrorName(code); got != want {
			t.Errorf("ErrorName(%d) = %q, want %q", code, got, want)
		}
	}
	named := 0
	for c := uint64(0); c <= 0xFFFF; c++ {
		if !strings.HasPrefix(ErrorName(c), "QNN_ERROR_") || c == 10000 || c == 10001 {
			named++
		}
	}
	if named != 114 {
		t.Errorf("%d codes named, want the headers' 114", named)
	}
}

// TestPropertyAnswer: the device-capability answer names both codes (the
// Saver answers 4950, its dummy return value).
func TestPropertyAnswer(t *testing.T) {
	for ret, want := range map[uint64]string{4950: "4950 QNN_SAVER_ERROR_DUMMY_RETVALUE", 1000: "1000 QNN_PROPERTY_NOT_SUPPORTED", 2000: "2000 QNN_PROPERTY_ERROR_UNKNOWN_KEY"} {
		if got := propertyAnswer(ret); got != want {
			t.Errorf("propertyAnswer(%d) = %q, want %q", ret, got, want)
		}
	}
}
