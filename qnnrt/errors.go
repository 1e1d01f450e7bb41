package qnnrt

import (
	"errors"
	"fmt"
)

// LoadError is a QNN library the dynamic loader could not load: which one,
// the path or soname it was given, and the loader's reason. Its text is
// `qnnrt: load <library> library "<path>": <reason>`.
type LoadError struct {
	Library string // "backend", "system" or "rpcmem"
	Path    string // as given: a file path, or a bare name the dynamic loader searches for
	Err     error  // the loader's error (dlerror's text)
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("qnnrt: load %s library %q: %v", e.Library, e.Path, e.Err)
}

// Unwrap returns the loader's error.
func (e *LoadError) Unwrap() error { return e.Err }

// Error is a failed QNN call: the operation, the QNN error code (the low 16
// bits of the returned Qnn_ErrorHandle_t), the code's name, the text the
// library gives for it and the reason the library logged.
type Error struct {
	Op      string // the QNN function and its subject, e.g. `graphExecute "action_step"`
	Code    uint64 // the QNN error code, e.g. 1007
	Name    string // the code's name, e.g. QNN_COMMON_ERROR_SYSTEM_COMMUNICATION
	Message string // the library's message for the code, or "" when it has none
	Log     string // the last ERROR line the library logged during the call, or ""
	// LogFirst is the first ERROR line of the call when it logged more
	// than one: real backends log the root cause first.
	LogFirst string
	LogLines int // how many ERROR lines the library logged during the call
}

// Error formats the error as
// `qnnrt: <op>: <NAME> (<code>): <message>; QNN log: <log>`, or with
// several ERROR lines
// `...; QNN log: <first> (first of <n> ERROR lines; last: <log>)`, leaving
// out the parts that are empty.
func (e *Error) Error() string {
	s := fmt.Sprintf("qnnrt: %s: %s (%d)", e.Op, e.Name, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	switch {
	case e.LogFirst != "" && e.LogFirst != e.Log:
		s += fmt.Sprintf("; QNN log: %s (first of %d ERROR lines; last: %s)", e.LogFirst, e.LogLines, e.Log)
	case e.Log != "" && e.Log != e.Message:
		s += "; QNN log: " + e.Log
	}
	return s
}

// Is reports whether e matches target: ErrSubsystemRestart matches code
// 1007, ErrSubsystemFatal matches 1011, and an *Error target with a non-zero
// Code matches that code.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrSubsystemRestart:
		return e.Code == codeSystemCommunication
	case ErrSubsystemFatal:
		return e.Code == codeSystemCommunicationFatal
	}
	if t, ok := target.(*Error); ok {
		return t.Code != 0 && t.Code == e.Code
	}
	return false
}

// ErrSubsystemRestart matches (errors.Is) a QNN error with code 1007,
// QNN_COMMON_ERROR_SYSTEM_COMMUNICATION: the DSP subsystem restarted and
// the session is lost. Close the session and create a new one (reload the
// context) to go on.
var ErrSubsystemRestart = errors.New("qnnrt: DSP subsystem restart (QNN error 1007)")

// ErrSubsystemFatal matches (errors.Is) a QNN error with code 1011,
// QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL: communication with the DSP
// failed in a way a reload is not expected to fix.
var ErrSubsystemFatal = errors.New("qnnrt: fatal DSP communication failure (QNN error 1011)")

// Code returns the QNN error code carried by err (or by an error it wraps),
// and false when err carries none.
func Code(err error) (uint64, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Code, true
	}
	return 0, false
}

const (
	codeSuccess                  = 0
	codeNotSupported             = 1000
	codeSystemCommunication      = 1007
	codeSystemCommunicationFatal = 1011
)

// errorCode extracts the code from a Qnn_ErrorHandle_t.
func errorCode(ret uint64) uint64 { return ret & 0xFFFF }

// ErrorName returns the QNN name of an error code (for example
// "QNN_COMMON_ERROR_SYSTEM_COMMUNICATION" for 1007), or "QNN_ERROR_<code>"
// for a code the runtime does not know. The names are those of the public
// QNN headers' error enums (core API, system API, HTP perf
// infrastructure, Saver); a code several enums share (1000, 1002, ...)
// has its QnnCommon.h name.
func ErrorName(code uint64) string {
	switch code {
	case 0:
		return "QNN_SUCCESS"
	case 1000:
		return "QNN_COMMON_ERROR_NOT_SUPPORTED"
	case 1002:
		return "QNN_COMMON_ERROR_MEM_ALLOC"
	case 1003:
		return "QNN_COMMON_ERROR_SYSTEM"
	case 1004:
		return "QNN_COMMON_ERROR_INVALID_ARGUMENT"
	case 1005:
		return "QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED"
	case 1006:
		return "QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED"
	case 1007:
		return "QNN_COMMON_ERROR_SYSTEM_COMMUNICATION"
	case 1008:
		return "QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES"
	case 1009:
		return "QNN_COMMON_ERROR_LOADING_BINARIES"
	case 1010:
		return "QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE"
	case 1011:
		return "QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL"
	case 1100:
		return "QNN_COMMON_ERROR_GENERAL"
	case 2000:
		return "QNN_PROPERTY_ERROR_UNKNOWN_KEY"
	case 3000:
		return "QNN_OP_PACKAGE_ERROR_LIBRARY_ALREADY_INITIALIZED"
	case 3001:
		return "QNN_OP_PACKAGE_ERROR_LIBRARY_NOT_INITIALIZED"
	case 3002:
		return "QNN_OP_PACKAGE_ERROR_INVALID_HANDLE"
	case 3100:
		return "QNN_OP_PACKAGE_ERROR_INVALID_INFRASTRUCTURE"
	case 3101:
		return "QNN_OP_PACKAGE_ERROR_INVALID_INFO"
	case 3110:
		return "QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE"
	case 3200:
		return "QNN_OP_PACKAGE_ERROR_INVALID_ARGUMENT"
	case 4000:
		return "QNN_BACKEND_ERROR_CANNOT_INITIALIZE"
	case 4002:
		return "QNN_BACKEND_ERROR_TERMINATE_FAILED"
	case 4003:
		return "QNN_BACKEND_ERROR_NOT_SUPPORTED"
	case 4004:
		return "QNN_BACKEND_ERROR_INVALID_ARGUMENT"
	case 4005:
		return "QNN_BACKEND_ERROR_OP_PACKAGE_NOT_FOUND"
	case 4006:
		return "QNN_BACKEND_ERROR_OP_PACKAGE_IF_PROVIDER_NOT_FOUND"
	case 4007:
		return "QNN_BACKEND_ERROR_OP_PACKAGE_REGISTRATION_FAILED"
	case 4008:
		return "QNN_BACKEND_ERROR_OP_PACKAGE_UNSUPPORTED_VERSION"
	case 4009:
		return "QNN_BACKEND_ERROR_OP_PACKAGE_DUPLICATE"
	case 4010:
		return "QNN_BACKEND_ERROR_INCONSISTENT_CONFIG"
	case 4011:
		return "QNN_BACKEND_ERROR_INVALID_HANDLE"
	case 4012:
		return "QNN_BACKEND_ERROR_INVALID_CONFIG"
	case 4950:
		return "QNN_SAVER_ERROR_DUMMY_RETVALUE"
	case 4951:
		return "QNN_SAVER_ERROR_ALREADY_INSTANTIATED"
	case 5000:
		return "QNN_CONTEXT_ERROR_INVALID_ARGUMENT"
	case 5001:
		return "QNN_CONTEXT_ERROR_CTX_DOES_NOT_EXIST"
	case 5002:
		return "QNN_CONTEXT_ERROR_INVALID_HANDLE"
	case 5003:
		return "QNN_CONTEXT_ERROR_NOT_FINALIZED"
	case 5004:
		return "QNN_CONTEXT_ERROR_BINARY_VERSION"
	case 5005:
		return "QNN_CONTEXT_ERROR_CREATE_FROM_BINARY"
	case 5006:
		return "QNN_CONTEXT_ERROR_GET_BINARY_SIZE_FAILED"
	case 5007:
		return "QNN_CONTEXT_ERROR_GET_BINARY_FAILED"
	case 5008:
		return "QNN_CONTEXT_ERROR_BINARY_CONFIGURATION"
	case 5009:
		return "QNN_CONTEXT_ERROR_SET_PROFILE"
	case 5010:
		return "QNN_CONTEXT_ERROR_INVALID_CONFIG"
	case 5011:
		return "QNN_CONTEXT_ERROR_BINARY_SUBOPTIMAL"
	case 5012:
		return "QNN_CONTEXT_ERROR_ABORTED"
	case 5013:
		return "QNN_CONTEXT_ERROR_TIMED_OUT"
	case 6000:
		return "QNN_GRAPH_ERROR_INVALID_ARGUMENT"
	case 6001:
		return "QNN_GRAPH_ERROR_INVALID_HANDLE"
	case 6002:
		return "QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST"
	case 6003:
		return "QNN_GRAPH_ERROR_INVALID_NAME"
	case 6004:
		return "QNN_GRAPH_ERROR_INVALID_TENSOR"
	case 6005:
		return "QNN_GRAPH_ERROR_INVALID_OP_CONFIG"
	case 6006:
		return "QNN_GRAPH_ERROR_SET_PROFILE"
	case 6007:
		return "QNN_GRAPH_ERROR_UNCONNECTED_NODE"
	case 6020:
		return "QNN_GRAPH_ERROR_CREATE_FAILED"
	case 6021:
		return "QNN_GRAPH_ERROR_OPTIMIZATION_FAILED"
	case 6022:
		return "QNN_GRAPH_ERROR_FINALIZE_FAILED"
	case 6023:
		return "QNN_GRAPH_ERROR_GRAPH_NOT_FINALIZED"
	case 6024:
		return "QNN_GRAPH_ERROR_GRAPH_FINALIZED"
	case 6025:
		return "QNN_GRAPH_ERROR_EXECUTION_ASYNC_FIFO_FULL"
	case 6030:
		return "QNN_GRAPH_ERROR_SIGNAL_IN_USE"
	case 6031:
		return "QNN_GRAPH_ERROR_ABORTED"
	case 6032:
		return "QNN_GRAPH_ERROR_PROFILE_IN_USE"
	case 6033:
		return "QNN_GRAPH_ERROR_TIMED_OUT"
	case 6034:
		return "QNN_GRAPH_ERROR_SUBGRAPH"
	case 6035:
		return "QNN_GRAPH_ERROR_DISABLED"
	case 6036:
		return "QNN_GRAPH_ERROR_DYNAMIC_TENSOR_SHAPE"
	case 6037:
		return "QNN_GRAPH_ERROR_TENSOR_SPARSITY"
	case 6038:
		return "QNN_GRAPH_ERROR_EARLY_TERMINATION"
	case 7001:
		return "QNN_TENSOR_ERROR_INVALID_HANDLE"
	case 7002:
		return "QNN_TENSOR_ERROR_DOES_NOT_EXIST"
	case 7003:
		return "QNN_TENSOR_ERROR_ALREADY_EXISTS"
	case 7004:
		return "QNN_TENSOR_ERROR_INVALID_TENSOR_PARAM"
	case 7005:
		return "QNN_TENSOR_ERROR_UNSUPPORTED_TENSOR_PARAM"
	case 7006:
		return "QNN_TENSOR_ERROR_NAME_HASH_COLLISION"
	case 7007:
		return "QNN_TENSOR_ERROR_INCOMPATIBLE_TENSOR_UPDATE"
	case 8000:
		return "QNN_MEM_ERROR_INVALID_ARGUMENT"
	case 8001:
		return "QNN_MEM_ERROR_INVALID_HANDLE"
	case 8002:
		return "QNN_MEM_ERROR_ALREADY_REGISTERED"
	case 8003:
		return "QNN_MEM_ERROR_MAPPING"
	case 8004:
		return "QNN_MEM_ERROR_INVALID_SHAPE"
	case 8005:
		return "QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE"
	case 9000:
		return "QNN_SIGNAL_ERROR_SIGNAL_IN_USE"
	case 9001:
		return "QNN_SIGNAL_ERROR_SIGNAL_IDLE"
	case 9002:
		return "QNN_SIGNAL_ERROR_INVALID_ARGUMENT"
	case 9003:
		return "QNN_SIGNAL_ERROR_INVALID_HANDLE"
	case 9004:
		return "QNN_SIGNAL_ERROR_TIMEOUT"
	case 9005:
		return "QNN_SIGNAL_ERROR_INCOMPATIBLE_SIGNAL_TYPE"
	case 10000:
		return "QNN_ERROR_INVALID_ARGUMENT"
	case 10001:
		return "QNN_ERROR_INVALID_ERROR_HANDLE"
	case 11002:
		return "QNN_LOG_ERROR_INITIALIZATION"
	case 11003:
		return "QNN_LOG_ERROR_INVALID_ARGUMENT"
	case 11004:
		return "QNN_LOG_ERROR_INVALID_HANDLE"
	case 12000:
		return "QNN_PROFILE_ERROR_INVALID_HANDLE"
	case 12001:
		return "QNN_PROFILE_ERROR_HANDLE_IN_USE"
	case 12002:
		return "QNN_PROFILE_ERROR_INCOMPATIBLE_EVENT"
	case 13000:
		return "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_HANDLE_PTR"
	case 13001:
		return "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT"
	case 13002:
		return "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG"
	case 13003:
		return "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT"
	case 13004:
		return "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED"
	case 13005:
		return "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_MEM_ALLOC"
	case 13006:
		return "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_FAILED"
	case 14000:
		return "QNN_DEVICE_ERROR_INVALID_HANDLE"
	case 14001:
		return "QNN_DEVICE_ERROR_INVALID_CONFIG"
	case 14002:
		return "QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE"
	case 14003:
		return "QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT"
	case 30000:
		return "QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE"
	case 30001:
		return "QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT"
	case 30002:
		return "QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED"
	case 30010:
		return "QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY"
	}
	return fmt.Sprintf("QNN_ERROR_%d", code)
}
