// Package qnnfake is a test double of the Qualcomm QNN runtime libraries
// (libQnnHtp.so, libQnnSystem.so and libcdsprpc.so in one C library,
// libfakeqnn) and the Go package that builds it and drives its control API.
//
// The C source, csrc/fakeqnn.c, implements the QNN C ABI exactly as
// /work/shared/qnn/layout-api2.32.txt states (struct layouts, function-table
// indices, enum values and error codes) and behaves as the shared QNN README
// and the project's test-double contract describe: guarded function tables
// sized for the advertised API version, tracked handles with double-free
// detection, a simple context-binary format (see Binary.Marshal), metadata in
// binary-info version 1, 2 or 3, validated executes computing a deterministic
// function of every input (see Expected), shared-memory registration,
// profiling, HTP power votes and failure injection.
//
// Tests call New to get a fresh, independent instance of the library and
// hand Lib.Path to the runtime under test as its backend, system and rpcmem
// library. The package uses purego and no cgo.
//
// What a runtime sees (codes are the layout file's; the details of every
// error go to LastError):
//   - Handles are opaque non-pointer values, never reused. Freeing an
//     unknown or freed handle returns the API's INVALID_HANDLE code
//     (backend 4011, context 5002, profile 12000, log 11004, device 14000,
//     memory 8001, system context 30000, power config 13001) and counts a
//     double free; so does rpcmem_free of an unknown pointer.
//   - Binaries: the system API answers 30001 for an empty buffer and 30010
//     for anything malformed, truncated, padded or of a format other than
//     2.3; contextCreateFromBinary answers 5000, 5005 and 5004 for the
//     same cases. The metadata returned belongs to the system-context
//     handle and is overwritten (its old memory poisoned) by the next call.
//   - graphExecute matches tensors to the graph by id (any order), and
//     answers 6000 for wrong counts, 6001 for a bad graph handle (or one
//     whose context was freed), 6004 for any tensor mismatch and 12000 for
//     a bad profile handle. Outputs follow Expected bit for bit.
//   - memRegister answers 8002 for an fd and offset already registered in
//     the context, 8003 for an fd that is not a live rpcmem buffer, 8004
//     for a region larger than the buffer, 8005 for another memory type.
//     contextFree with registered memory answers 1005 and frees nothing.
//   - contextCreateFromBinary accepts a QNN_CONTEXT_CONFIG_OPTION_CUSTOM
//     config carrying QnnHtpContext_CustomConfig_t REGISTER_MULTI_CONTEXTS
//     (the spill-fill group registration) and answers 5010 for one it
//     refuses (see ContextRecords); binaries carry per-graph spill-fill
//     sizes (Graph.SpillFill), reported in graph-info v3's HTP graph blob
//     info and binary-info v1/v2's HTP hardware-info blob.
//   - The record of calls: ContextRecords (each context's group
//     registration) and ExecuteRecords (each execute's graph, context and
//     tensor addresses), so tests see chained graphs share memory.
//   - setPowerConfig needs DCVS_V3 contextId equal to the power config id
//     (13001 otherwise) and records every config of an accepted call.
//   - Table entries the double does not implement answer 1000.
//   - Logging: logCreate's callback (QnnLog_Callback_t, which takes a
//     va_list) receives the library's lines up to the handle's level, through
//     the most recently created live log handle: INFO on logCreate,
//     backendCreate, contextCreateFromBinary and setPowerConfig, WARN when
//     deviceCreate gets no config, VERBOSE before a binary is deserialized,
//     DEBUG after each execute and on logFree, and ERROR with the reason of
//     every error returned (the text LastError gives, then "(error <code>)").
//     Timestamps are a sequence number (1, 2, ...). The callback runs with
//     the library's lock held and must not call into the library.
package qnnfake

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed csrc/fakeqnn.c
var source []byte

// Variant selects a build of the test double.
type Variant struct {
	NoCoreProviders   bool // omit QnnInterface_getProviders
	NoSystemProviders bool // omit QnnSystemInterface_getProviders
	NoRPCMem          bool // omit the rpcmem_* symbols
}

// defines are the preprocessor flags that select v in fakeqnn.c.
func (v Variant) defines() []string {
	var d []string
	if v.NoCoreProviders {
		d = append(d, "-DFAKEQNN_NO_CORE_PROVIDERS")
	}
	if v.NoSystemProviders {
		d = append(d, "-DFAKEQNN_NO_SYSTEM_PROVIDERS")
	}
	if v.NoRPCMem {
		d = append(d, "-DFAKEQNN_NO_RPCMEM")
	}
	return d
}

// fileName names the library built for v.
func (v Variant) fileName() string {
	name := "libfakeqnn"
	if v.NoCoreProviders {
		name += "-nocore"
	}
	if v.NoSystemProviders {
		name += "-nosystem"
	}
	if v.NoRPCMem {
		name += "-norpcmem"
	}
	return name + ".so"
}

// compileFlags are the gcc flags of every build. -ffp-contract=off keeps gcc
// from fusing multiplies and adds, so the outputs match Expected bit for bit.
func compileFlags() []string {
	return []string{"-std=c11", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-ffp-contract=off", "-pthread"}
}

// Build compiles the test double with gcc into dir and returns the .so path.
// The library is written under a temporary name and renamed into place, so
// concurrent builds into the same directory are safe.
func Build(dir string, v Variant) (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("qnnfake: build: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("qnnfake: build: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("qnnfake: build: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "fakeqnn.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("qnnfake: build: %w", err)
	}
	obj := filepath.Join(tmp, v.fileName())
	args := append(append(append([]string{}, compileFlags()...), v.defines()...), "-o", obj, src, "-lm")
	cmd := exec.Command(gcc, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("qnnfake: build: gcc %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	dst := filepath.Join(dir, v.fileName())
	if err := os.Rename(obj, dst); err != nil {
		return "", fmt.Errorf("qnnfake: build: %w", err)
	}
	return dst, nil
}

// cacheDir is the os.TempDir-based directory holding the builds of this
// exact source and flag set, shared by every test binary on the machine.
func cacheDir() string {
	h := sha256.New()
	h.Write(source)
	h.Write([]byte(strings.Join(compileFlags(), " ")))
	return filepath.Join(os.TempDir(), "qnnfake-"+hex.EncodeToString(h.Sum(nil))[:16])
}

// cachedBuild returns the library for v from the build cache, building it
// when it is not there yet.
func cachedBuild(v Variant) (string, error) {
	dir := cacheDir()
	path := filepath.Join(dir, v.fileName())
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("qnnfake: build cache: %w", err)
	}
	return Build(dir, v)
}

// copyFile copies src to dst (a new file).
func copyFile(dst, src string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}
