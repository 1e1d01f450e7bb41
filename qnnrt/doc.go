// Package qnnrt is a pure-Go runtime for offline-prepared QNN context
// binaries on the Qualcomm Hexagon NPU (the QNN HTP backend). It loads the
// QNN backend and system libraries with purego, without SDK headers and
// without cgo, mirrors the few C structs it needs (layout.go, checked
// against the API 2.32 layout table in tests) and drives the C API through
// the providers' function tables.
//
// A Library holds the loaded libraries and the chosen providers (core API
// 2.18 or later, system API 1.1 or later). ReadContextInfo and Inspect read
// a context binary's metadata (graphs, tensors, types, shapes,
// quantization, SoC and build ids). A Session is resident: it creates the
// log, backend, device, optional profile and power vote, creates the
// context from the binary once and retrieves its graphs. A Graph executes
// with buffers the runtime owns outside the Go heap, converting float32
// to and from FLOAT_16, BFLOAT_16 and UFIXED_POINT_8/16 as the graph's
// tensors require; inputs that stay constant over many executes can live in
// registered rpcmem shared buffers (ShareInputs), with a reported fallback
// to RAW buffers.
//
// A session may hold several contexts (SessionOptions.ContextPaths), one
// per binary, on one backend and device, registered as one HTP spill-fill
// group (QnnHtpContext_CustomConfig_t REGISTER_MULTI_CONTEXTS with
// QnnHtpContext_GroupRegistration_t; see Session.SpillFillGroup). Graphs of
// a session execute one at a time and can be chained: Session.Link points
// one graph's input at another's output buffer (no host copy),
// Session.LinkShared does it through one rpcmem buffer registered with
// both contexts, Session.BindOutput registers an output as a region (memType
// CUSTOM, QnnMemHtp_Descriptor_t SHARED_BUFFER) of another graph's shared
// input so the producer writes its slice of it in place, and
// Session.RunChain runs graphs in order, honouring cancellation between
// them.
//
// Logging: sessions create their QNN logger with a real QnnLog_Callback_t
// (one per process, made with purego.NewCallback) that formats each line
// with libc's vsnprintf and hands it, rate-limited, to Options.LogSink.
// The callback may run on threads the library creates; that works with and
// without cgo (purego's own runtime/cgo replacement accepts foreign
// threads; TestLogCallbackWithoutCgo checks it).
//
// Performance votes go in two setPowerConfig calls, the DCVS part and the
// RPC part (sent only when SessionOptions.RPCVote asks for it); Session.PerfStatus
// says what became of each. A failing profiler never fails an execute.
//
// QNN failures are *Error values carrying the code, its name, the
// library's message and the ERROR lines the library logged during the
// call. errors.Is(err, ErrSubsystemRestart) identifies a DSP subsystem
// restart (1007): close the session and create a new one.
package qnnrt
