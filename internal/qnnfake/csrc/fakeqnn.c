/*
 * fakeqnn.c: a test double of the Qualcomm QNN runtime libraries.
 *
 * One shared library stands in for libQnnHtp.so (core API), libQnnSystem.so
 * (system API) and libcdsprpc.so (rpcmem), so a runtime that loads the same
 * file three times shares one state. It implements the QNN C ABI exactly as
 * /work/shared/qnn/layout-api2.32.txt ("the layout file") states: every
 * struct below is written from that table and checked against it with
 * _Static_assert, function-table entries sit at the table's indices, and
 * enum values and error codes are the table's constants.
 *
 * Behaviour (see the shared README and the project's test-double contract):
 *   - provider tables sized for the advertised API version, each ending at
 *     a page boundary followed by a PROT_NONE guard page;
 *   - every handle tracked; freeing an unknown or freed handle is an error
 *     and counts as a double free;
 *   - a simple context-binary format (written by the Go package's
 *     Binary.Marshal), parsed by the system API (metadata in binary-info
 *     version 1, 2 or 3) and by contextCreateFromBinary;
 *   - graphExecute validates every tensor against the graph and computes
 *     the outputs as a deterministic function of every input (mirrored in
 *     Go by qnnfake.Expected);
 *   - rpcmem, memRegister, profiling, the HTP perf infrastructure, and
 *     failure injection by function name, all driven by the fake_* control
 *     API at the end of this file.
 *
 * Build variants: -DFAKEQNN_NO_CORE_PROVIDERS, -DFAKEQNN_NO_SYSTEM_PROVIDERS
 * and -DFAKEQNN_NO_RPCMEM leave out the corresponding exported symbols.
 *
 * Every entry point takes one global lock, so the library is thread-safe
 * (and serialises everything, which a test double may).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define FQ_EXPORT __attribute__((visibility("default")))

/* ======================================================================== */
/* Constants (layout file, "constants" and "error codes" sections)          */
/* ======================================================================== */

typedef uint64_t Qnn_ErrorHandle_t; /* sizeof(Qnn_ErrorHandle_t)=8; code = ret & 0xFFFF */

enum {
    QNN_SUCCESS = 0,
    QNN_BACKEND_ID_HTP = 6,
    QNN_BACKEND_ID_CPU = 3,

    QNN_DATATYPE_INT_8 = 0x008,
    QNN_DATATYPE_INT_16 = 0x016,
    QNN_DATATYPE_INT_32 = 0x032,
    QNN_DATATYPE_INT_64 = 0x064,
    QNN_DATATYPE_UINT_8 = 0x108,
    QNN_DATATYPE_UINT_16 = 0x116,
    QNN_DATATYPE_UINT_32 = 0x132,
    QNN_DATATYPE_UINT_64 = 0x164,
    QNN_DATATYPE_FLOAT_16 = 0x216,
    QNN_DATATYPE_BFLOAT_16 = 0x226,
    QNN_DATATYPE_FLOAT_32 = 0x232,
    QNN_DATATYPE_FLOAT_64 = 0x264,
    QNN_DATATYPE_SFIXED_POINT_8 = 0x308,
    QNN_DATATYPE_SFIXED_POINT_16 = 0x316,
    QNN_DATATYPE_SFIXED_POINT_32 = 0x332,
    QNN_DATATYPE_UFIXED_POINT_8 = 0x408,
    QNN_DATATYPE_UFIXED_POINT_16 = 0x416,
    QNN_DATATYPE_UFIXED_POINT_32 = 0x432,
    QNN_DATATYPE_BOOL_8 = 0x508,

    QNN_TENSOR_TYPE_APP_WRITE = 0,
    QNN_TENSOR_TYPE_APP_READ = 1,
    QNN_TENSORMEMTYPE_RAW = 0,
    QNN_TENSORMEMTYPE_MEMHANDLE = 1,
    QNN_TENSORMEMTYPE_RETRIEVE_RAW = 2,
    QNN_TENSOR_VERSION_1 = 1,
    QNN_TENSOR_VERSION_2 = 2,
    QNN_TENSOR_DATA_FORMAT_DENSE = 0,
    QNN_DEFINITION_DEFINED = 1,
    QNN_DEFINITION_UNDEFINED = 0x7fffffff,
    QNN_QUANTIZATION_ENCODING_SCALE_OFFSET = 0,

    QNN_LOG_LEVEL_ERROR = 1,
    QNN_LOG_LEVEL_WARN = 2,
    QNN_LOG_LEVEL_INFO = 3,
    QNN_LOG_LEVEL_VERBOSE = 4,
    QNN_LOG_LEVEL_DEBUG = 5,
    QNN_PROFILE_LEVEL_BASIC = 1,
    QNN_PROFILE_LEVEL_DETAILED = 2,
    QNN_PROFILE_EVENTTYPE_INIT = 100,
    QNN_PROFILE_EVENTTYPE_EXECUTE = 400,
    QNN_PROFILE_EVENTUNIT_MICROSEC = 1,

    QNN_MEM_TYPE_ION = 1,
    QNN_MEM_TYPE_CUSTOM = 2,
    QNN_MEM_TYPE_DMA_BUF = 3,
    QNN_HTP_MEM_SHARED_BUFFER = 1,

    QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_1 = 1,
    QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_2 = 2,
    QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_3 = 3,
    QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_1 = 1,
    QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_3 = 3,
    QNN_SYSTEM_CONTEXT_HTP_GRAPH_INFO_BLOB_VERSION_V1 = 1,

    QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF = 0,
    QNN_CONTEXT_CONFIG_OPTION_CUSTOM = 0,
    QNN_CONTEXT_CONFIG_PERSISTENT_BINARY = 7,
    QNN_HTP_CONTEXT_CONFIG_OPTION_REGISTER_MULTI_CONTEXTS = 2,
    QNN_SYSTEM_CONTEXT_HTP_HW_INFO_BLOB_VERSION_V1 = 1,

    QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3 = 1,
    QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_CONTROL_LATENCY = 2,
    QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME = 3,
    QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_HMX_V2 = 5,

    QNN_PROPERTY_GROUP_CORE = 1,
    QNN_PROPERTY_CONTEXT_SUPPORT_CACHING = 202,
    QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION = 304,
    QNN_PROPERTY_TENSOR_SUPPORT_MEMHANDLE_TYPE = 502,
    QNN_PROPERTY_GROUP_DEVICE = 1501,
    QNN_PROPERTY_DEVICE_SUPPORT_INFRASTRUCTURE = 1502,
    QNN_PROPERTY_SUPPORTED = QNN_SUCCESS,
    QNN_PROPERTY_NOT_SUPPORTED = 1000,
    QNN_PROPERTY_ERROR_UNKNOWN_KEY = 2000,
};

/* Error codes, read as (ret & 0xFFFF). */
enum {
    QNN_COMMON_ERROR_NOT_SUPPORTED = 1000,
    QNN_COMMON_ERROR_MEM_ALLOC = 1002,
    QNN_COMMON_ERROR_SYSTEM = 1003,
    QNN_COMMON_ERROR_INVALID_ARGUMENT = 1004,
    QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED = 1005,
    QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED = 1006,
    QNN_COMMON_ERROR_SYSTEM_COMMUNICATION = 1007,
    QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES = 1008,
    QNN_COMMON_ERROR_LOADING_BINARIES = 1009,
    QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE = 1010,
    QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL = 1011,
    QNN_COMMON_ERROR_GENERAL = 1100,
    QNN_BACKEND_ERROR_CANNOT_INITIALIZE = 4000,
    QNN_BACKEND_ERROR_NOT_SUPPORTED = 4003,
    QNN_BACKEND_ERROR_INVALID_ARGUMENT = 4004,
    QNN_BACKEND_ERROR_INVALID_HANDLE = 4011,
    QNN_BACKEND_ERROR_INVALID_CONFIG = 4012,
    QNN_CONTEXT_ERROR_INVALID_ARGUMENT = 5000,
    QNN_CONTEXT_ERROR_INVALID_HANDLE = 5002,
    QNN_CONTEXT_ERROR_BINARY_VERSION = 5004,
    QNN_CONTEXT_ERROR_CREATE_FROM_BINARY = 5005,
    QNN_CONTEXT_ERROR_BINARY_CONFIGURATION = 5008,
    QNN_CONTEXT_ERROR_INVALID_CONFIG = 5010,
    QNN_CONTEXT_ERROR_BINARY_SUBOPTIMAL = 5011,
    QNN_GRAPH_ERROR_INVALID_ARGUMENT = 6000,
    QNN_GRAPH_ERROR_INVALID_HANDLE = 6001,
    QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST = 6002,
    QNN_GRAPH_ERROR_INVALID_NAME = 6003,
    QNN_GRAPH_ERROR_INVALID_TENSOR = 6004,
    QNN_GRAPH_ERROR_GRAPH_NOT_FINALIZED = 6023,
    QNN_GRAPH_ERROR_SIGNAL_IN_USE = 6030,
    QNN_GRAPH_ERROR_ABORTED = 6031,
    QNN_GRAPH_ERROR_TIMED_OUT = 6033,
    QNN_TENSOR_ERROR_INVALID_TENSOR_PARAM = 7004,
    QNN_MEM_ERROR_INVALID_ARGUMENT = 8000,
    QNN_MEM_ERROR_INVALID_HANDLE = 8001,
    QNN_MEM_ERROR_ALREADY_REGISTERED = 8002,
    QNN_MEM_ERROR_MAPPING = 8003,
    QNN_MEM_ERROR_INVALID_SHAPE = 8004,
    QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE = 8005,
    QNN_DEVICE_ERROR_INVALID_HANDLE = 14000,
    QNN_DEVICE_ERROR_INVALID_CONFIG = 14001,
    QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE = 14002,
    QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT = 14003,
    QNN_LOG_ERROR_INITIALIZATION = 11002,
    QNN_LOG_ERROR_INVALID_ARGUMENT = 11003,
    QNN_LOG_ERROR_INVALID_HANDLE = 11004,
    QNN_PROFILE_ERROR_INVALID_HANDLE = 12000,
    QNN_PROFILE_ERROR_HANDLE_IN_USE = 12001,
    QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE = 30000,
    QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT = 30001,
    QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED = 30002,
    QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY = 30010,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT = 13001,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG = 13002,
    QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT = 13003,
};

/* The message errorGetMessage returns for each code above. */
static const struct {
    uint32_t code;
    const char *text;
} fq_error_messages[] = {
    {QNN_SUCCESS, "QNN_SUCCESS: success"},
    {QNN_COMMON_ERROR_NOT_SUPPORTED, "QNN_COMMON_ERROR_NOT_SUPPORTED: API or feature is not supported"},
    {QNN_COMMON_ERROR_MEM_ALLOC, "QNN_COMMON_ERROR_MEM_ALLOC: memory allocation failed"},
    {QNN_COMMON_ERROR_SYSTEM, "QNN_COMMON_ERROR_SYSTEM: system error"},
    {QNN_COMMON_ERROR_INVALID_ARGUMENT, "QNN_COMMON_ERROR_INVALID_ARGUMENT: invalid argument"},
    {QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED, "QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED: operation not permitted"},
    {QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED, "QNN_COMMON_ERROR_PLATFORM_NOT_SUPPORTED: platform not supported"},
    {QNN_COMMON_ERROR_SYSTEM_COMMUNICATION, "QNN_COMMON_ERROR_SYSTEM_COMMUNICATION: communication with the DSP failed (subsystem restart)"},
    {QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES, "QNN_COMMON_ERROR_INCOMPATIBLE_BINARIES: incompatible libraries"},
    {QNN_COMMON_ERROR_LOADING_BINARIES, "QNN_COMMON_ERROR_LOADING_BINARIES: failed to load libraries"},
    {QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE, "QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE: resource unavailable"},
    {QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL, "QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL: fatal communication error with the DSP"},
    {QNN_COMMON_ERROR_GENERAL, "QNN_COMMON_ERROR_GENERAL: general error"},
    {QNN_BACKEND_ERROR_CANNOT_INITIALIZE, "QNN_BACKEND_ERROR_CANNOT_INITIALIZE: backend cannot be initialized"},
    {QNN_BACKEND_ERROR_NOT_SUPPORTED, "QNN_BACKEND_ERROR_NOT_SUPPORTED: not supported by the backend"},
    {QNN_BACKEND_ERROR_INVALID_ARGUMENT, "QNN_BACKEND_ERROR_INVALID_ARGUMENT: invalid backend argument"},
    {QNN_BACKEND_ERROR_INVALID_HANDLE, "QNN_BACKEND_ERROR_INVALID_HANDLE: invalid backend handle"},
    {QNN_BACKEND_ERROR_INVALID_CONFIG, "QNN_BACKEND_ERROR_INVALID_CONFIG: invalid backend config"},
    {QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "QNN_CONTEXT_ERROR_INVALID_ARGUMENT: invalid context argument"},
    {QNN_CONTEXT_ERROR_INVALID_HANDLE, "QNN_CONTEXT_ERROR_INVALID_HANDLE: invalid context handle"},
    {QNN_CONTEXT_ERROR_BINARY_VERSION, "QNN_CONTEXT_ERROR_BINARY_VERSION: incompatible context binary version"},
    {QNN_CONTEXT_ERROR_CREATE_FROM_BINARY, "QNN_CONTEXT_ERROR_CREATE_FROM_BINARY: failed to create a context from the binary"},
    {QNN_CONTEXT_ERROR_BINARY_CONFIGURATION, "QNN_CONTEXT_ERROR_BINARY_CONFIGURATION: context binary configuration mismatch"},
    {QNN_CONTEXT_ERROR_INVALID_CONFIG, "QNN_CONTEXT_ERROR_INVALID_CONFIG: invalid context config"},
    {QNN_CONTEXT_ERROR_BINARY_SUBOPTIMAL, "QNN_CONTEXT_ERROR_BINARY_SUBOPTIMAL: context binary is suboptimal"},
    {QNN_GRAPH_ERROR_INVALID_ARGUMENT, "QNN_GRAPH_ERROR_INVALID_ARGUMENT: invalid graph argument"},
    {QNN_GRAPH_ERROR_INVALID_HANDLE, "QNN_GRAPH_ERROR_INVALID_HANDLE: invalid graph handle"},
    {QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST, "QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST: graph does not exist"},
    {QNN_GRAPH_ERROR_INVALID_NAME, "QNN_GRAPH_ERROR_INVALID_NAME: invalid graph name"},
    {QNN_GRAPH_ERROR_INVALID_TENSOR, "QNN_GRAPH_ERROR_INVALID_TENSOR: invalid tensor"},
    {QNN_GRAPH_ERROR_GRAPH_NOT_FINALIZED, "QNN_GRAPH_ERROR_GRAPH_NOT_FINALIZED: graph not finalized"},
    {QNN_GRAPH_ERROR_SIGNAL_IN_USE, "QNN_GRAPH_ERROR_SIGNAL_IN_USE: signal in use"},
    {QNN_GRAPH_ERROR_ABORTED, "QNN_GRAPH_ERROR_ABORTED: graph execution aborted"},
    {QNN_GRAPH_ERROR_TIMED_OUT, "QNN_GRAPH_ERROR_TIMED_OUT: graph execution timed out"},
    {QNN_TENSOR_ERROR_INVALID_TENSOR_PARAM, "QNN_TENSOR_ERROR_INVALID_TENSOR_PARAM: invalid tensor parameter"},
    {QNN_MEM_ERROR_INVALID_ARGUMENT, "QNN_MEM_ERROR_INVALID_ARGUMENT: invalid memory argument"},
    {QNN_MEM_ERROR_INVALID_HANDLE, "QNN_MEM_ERROR_INVALID_HANDLE: invalid memory handle"},
    {QNN_MEM_ERROR_ALREADY_REGISTERED, "QNN_MEM_ERROR_ALREADY_REGISTERED: memory already registered"},
    {QNN_MEM_ERROR_MAPPING, "QNN_MEM_ERROR_MAPPING: memory mapping failed"},
    {QNN_MEM_ERROR_INVALID_SHAPE, "QNN_MEM_ERROR_INVALID_SHAPE: invalid memory shape"},
    {QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE, "QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE: unsupported memory type"},
    {QNN_DEVICE_ERROR_INVALID_HANDLE, "QNN_DEVICE_ERROR_INVALID_HANDLE: invalid device handle"},
    {QNN_DEVICE_ERROR_INVALID_CONFIG, "QNN_DEVICE_ERROR_INVALID_CONFIG: invalid device config"},
    {QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE, "QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE: hardware unavailable"},
    {QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT, "QNN_DEVICE_ERROR_ASSOCIATED_TO_CONTEXT: device still associated to a context"},
    {QNN_LOG_ERROR_INITIALIZATION, "QNN_LOG_ERROR_INITIALIZATION: logging initialization failed"},
    {QNN_LOG_ERROR_INVALID_ARGUMENT, "QNN_LOG_ERROR_INVALID_ARGUMENT: invalid log argument"},
    {QNN_LOG_ERROR_INVALID_HANDLE, "QNN_LOG_ERROR_INVALID_HANDLE: invalid log handle"},
    {QNN_PROFILE_ERROR_INVALID_HANDLE, "QNN_PROFILE_ERROR_INVALID_HANDLE: invalid profile handle"},
    {QNN_PROFILE_ERROR_HANDLE_IN_USE, "QNN_PROFILE_ERROR_HANDLE_IN_USE: profile handle in use"},
    {QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE, "QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE: invalid system handle"},
    {QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT, "QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT: invalid system argument"},
    {QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED, "QNN_SYSTEM_CONTEXT_ERROR_OPERATION_FAILED: system context operation failed"},
    {QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY, "QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY: malformed context binary"},
    {QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT, "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT: invalid perf infrastructure input"},
    {QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG, "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG: unsupported power config"},
    {QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT, "QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT: perf infrastructure transport error"},
};

/* ======================================================================== */
/* Struct layouts (layout file; LP64). Each is followed by its asserts.     */
/* ======================================================================== */

#define FQ_SIZE(T, n) _Static_assert(sizeof(T) == (n), "sizeof(" #T ") must be " #n)
#define FQ_OFF(T, f, n) _Static_assert(offsetof(T, f) == (n), "offsetof(" #T ", " #f ") must be " #n)

/* Handles are opaque 8-byte values. The fake never hands out a pointer: see
 * fq_handle() for the encoding. */
typedef void *Qnn_LogHandle_t;
typedef void *Qnn_BackendHandle_t;
typedef void *Qnn_DeviceHandle_t;
typedef void *Qnn_ContextHandle_t;
typedef void *Qnn_GraphHandle_t;
typedef void *Qnn_ProfileHandle_t;
typedef void *Qnn_SignalHandle_t;
typedef void *Qnn_MemHandle_t;
typedef void *QnnSystemContext_Handle_t;
typedef void *QnnProfile_EventId_t;

/* QnnLog_Callback_t: the format, the line's QnnLog_Level_t, a timestamp and
 * the format's arguments. */
typedef void (*QnnLog_Callback_t)(const char *fmt, uint32_t level, uint64_t timestamp, va_list args);

typedef struct {
    uint32_t major;
    uint32_t minor;
    uint32_t patch;
} Qnn_Version_t;
FQ_SIZE(Qnn_Version_t, 12);
FQ_OFF(Qnn_Version_t, major, 0);
FQ_OFF(Qnn_Version_t, minor, 4);
FQ_OFF(Qnn_Version_t, patch, 8);

typedef struct {
    Qnn_Version_t coreApiVersion;
    Qnn_Version_t backendApiVersion;
} Qnn_ApiVersion_t;
FQ_SIZE(Qnn_ApiVersion_t, 24);
FQ_OFF(Qnn_ApiVersion_t, coreApiVersion, 0);
FQ_OFF(Qnn_ApiVersion_t, backendApiVersion, 12);

typedef struct {
    float scale;
    int32_t offset;
} Qnn_ScaleOffset_t;
FQ_SIZE(Qnn_ScaleOffset_t, 8);
FQ_OFF(Qnn_ScaleOffset_t, scale, 0);
FQ_OFF(Qnn_ScaleOffset_t, offset, 4);

typedef struct {
    int32_t axis;
    uint32_t numScaleOffsets;
    Qnn_ScaleOffset_t *scaleOffset;
} Qnn_AxisScaleOffset_t;
FQ_SIZE(Qnn_AxisScaleOffset_t, 16);
FQ_OFF(Qnn_AxisScaleOffset_t, axis, 0);
FQ_OFF(Qnn_AxisScaleOffset_t, numScaleOffsets, 4);
FQ_OFF(Qnn_AxisScaleOffset_t, scaleOffset, 8);

typedef struct {
    uint32_t bitwidth;
    float scale;
    int32_t offset;
} Qnn_BwScaleOffset_t;
FQ_SIZE(Qnn_BwScaleOffset_t, 12);
FQ_OFF(Qnn_BwScaleOffset_t, bitwidth, 0);
FQ_OFF(Qnn_BwScaleOffset_t, scale, 4);
FQ_OFF(Qnn_BwScaleOffset_t, offset, 8);

typedef struct {
    uint32_t bitwidth;
    int32_t axis;
    uint32_t numElements;
    float *scales;
    int32_t *offsets;
} Qnn_BwAxisScaleOffset_t;
FQ_SIZE(Qnn_BwAxisScaleOffset_t, 32);
FQ_OFF(Qnn_BwAxisScaleOffset_t, bitwidth, 0);
FQ_OFF(Qnn_BwAxisScaleOffset_t, axis, 4);
FQ_OFF(Qnn_BwAxisScaleOffset_t, numElements, 8);
FQ_OFF(Qnn_BwAxisScaleOffset_t, scales, 16);
FQ_OFF(Qnn_BwAxisScaleOffset_t, offsets, 24);

/* The layout file gives only the sizes of the block/vector encodings; the
 * fake never reads them, so they are opaque storage of the right size. */
typedef struct {
    uint32_t encodingDefinition;
    uint32_t quantizationEncoding;
    union {
        Qnn_ScaleOffset_t scaleOffsetEncoding;
        Qnn_AxisScaleOffset_t axisScaleOffsetEncoding;
        Qnn_BwScaleOffset_t bwScaleOffsetEncoding;
        Qnn_BwAxisScaleOffset_t bwAxisScaleOffsetEncoding;
        struct { uint64_t opaque[2]; } blockEncoding;        /* 16 bytes */
        void *blockwiseExpansion;                            /*  8 bytes */
        void *vectorEncoding;                                /*  8 bytes */
        struct { uint64_t opaque[2]; } floatBlockEncoding;   /* 16 bytes */
        struct { uint64_t opaque[3]; } bwFloatBlockEncoding; /* 24 bytes */
    };
} Qnn_QuantizeParams_t;
FQ_SIZE(Qnn_QuantizeParams_t, 40);
FQ_OFF(Qnn_QuantizeParams_t, encodingDefinition, 0);
FQ_OFF(Qnn_QuantizeParams_t, quantizationEncoding, 4);
FQ_OFF(Qnn_QuantizeParams_t, scaleOffsetEncoding, 8);
FQ_OFF(Qnn_QuantizeParams_t, axisScaleOffsetEncoding, 8);
FQ_OFF(Qnn_QuantizeParams_t, bwScaleOffsetEncoding, 8);
FQ_OFF(Qnn_QuantizeParams_t, bwAxisScaleOffsetEncoding, 8);
FQ_OFF(Qnn_QuantizeParams_t, blockEncoding, 8);
FQ_OFF(Qnn_QuantizeParams_t, blockwiseExpansion, 8);
FQ_OFF(Qnn_QuantizeParams_t, vectorEncoding, 8);
FQ_OFF(Qnn_QuantizeParams_t, floatBlockEncoding, 8);
FQ_OFF(Qnn_QuantizeParams_t, bwFloatBlockEncoding, 8);

typedef struct {
    void *data;
    uint32_t dataSize;
} Qnn_ClientBuffer_t;
FQ_SIZE(Qnn_ClientBuffer_t, 16);
FQ_OFF(Qnn_ClientBuffer_t, data, 0);
FQ_OFF(Qnn_ClientBuffer_t, dataSize, 8);

/* Qnn_TensorRetrieveRaw_t (16 bytes) is only referenced by pointer. */
typedef struct { uint64_t opaque[2]; } Qnn_TensorRetrieveRaw_t;
FQ_SIZE(Qnn_TensorRetrieveRaw_t, 16);

typedef struct {
    uint32_t type;
    struct {
        uint32_t numSpecifiedElements;
        uint32_t numSparseDimensions;
    } hybridCoo;
} Qnn_SparseParams_t;
FQ_SIZE(Qnn_SparseParams_t, 12);
FQ_OFF(Qnn_SparseParams_t, type, 0);
FQ_OFF(Qnn_SparseParams_t, hybridCoo, 4);

typedef struct {
    uint32_t id;
    const char *name;
    uint32_t type;       /* Qnn_TensorType_t */
    uint32_t dataFormat; /* Qnn_TensorDataFormat_t */
    uint32_t dataType;   /* Qnn_DataType_t */
    Qnn_QuantizeParams_t quantizeParams;
    uint32_t rank;
    uint32_t *dimensions;
    uint32_t memType; /* Qnn_TensorMemType_t */
    union {
        Qnn_ClientBuffer_t clientBuf;
        Qnn_MemHandle_t memHandle;
    };
} Qnn_TensorV1_t;
FQ_SIZE(Qnn_TensorV1_t, 112);
FQ_OFF(Qnn_TensorV1_t, id, 0);
FQ_OFF(Qnn_TensorV1_t, name, 8);
FQ_OFF(Qnn_TensorV1_t, type, 16);
FQ_OFF(Qnn_TensorV1_t, dataFormat, 20);
FQ_OFF(Qnn_TensorV1_t, dataType, 24);
FQ_OFF(Qnn_TensorV1_t, quantizeParams, 32);
FQ_OFF(Qnn_TensorV1_t, rank, 72);
FQ_OFF(Qnn_TensorV1_t, dimensions, 80);
FQ_OFF(Qnn_TensorV1_t, memType, 88);
FQ_OFF(Qnn_TensorV1_t, clientBuf, 96);
FQ_OFF(Qnn_TensorV1_t, memHandle, 96);

typedef struct {
    uint32_t id;
    const char *name;
    uint32_t type;
    uint32_t dataFormat;
    uint32_t dataType;
    Qnn_QuantizeParams_t quantizeParams;
    uint32_t rank;
    uint32_t *dimensions;
    uint32_t memType;
    union {
        Qnn_ClientBuffer_t clientBuf;
        Qnn_MemHandle_t memHandle;
        Qnn_TensorRetrieveRaw_t *retrieveRaw;
    };
    uint8_t *isDynamicDimensions;
    Qnn_SparseParams_t sparseParams;
    uint8_t isProduced;
} Qnn_TensorV2_t;
FQ_SIZE(Qnn_TensorV2_t, 136);
FQ_OFF(Qnn_TensorV2_t, id, 0);
FQ_OFF(Qnn_TensorV2_t, name, 8);
FQ_OFF(Qnn_TensorV2_t, type, 16);
FQ_OFF(Qnn_TensorV2_t, dataFormat, 20);
FQ_OFF(Qnn_TensorV2_t, dataType, 24);
FQ_OFF(Qnn_TensorV2_t, quantizeParams, 32);
FQ_OFF(Qnn_TensorV2_t, rank, 72);
FQ_OFF(Qnn_TensorV2_t, dimensions, 80);
FQ_OFF(Qnn_TensorV2_t, memType, 88);
FQ_OFF(Qnn_TensorV2_t, clientBuf, 96);
FQ_OFF(Qnn_TensorV2_t, memHandle, 96);
FQ_OFF(Qnn_TensorV2_t, retrieveRaw, 96);
FQ_OFF(Qnn_TensorV2_t, isDynamicDimensions, 112);
FQ_OFF(Qnn_TensorV2_t, sparseParams, 120);
FQ_OFF(Qnn_TensorV2_t, isProduced, 132);

typedef struct {
    uint32_t version; /* QNN_TENSOR_VERSION_1 or _2 */
    union {
        Qnn_TensorV1_t v1;
        Qnn_TensorV2_t v2;
    };
} Qnn_Tensor_t;
FQ_SIZE(Qnn_Tensor_t, 144);
FQ_OFF(Qnn_Tensor_t, version, 0);
FQ_OFF(Qnn_Tensor_t, v1, 8);
FQ_OFF(Qnn_Tensor_t, v2, 8);
/* The "[abs]" line of the layout file. */
FQ_OFF(Qnn_Tensor_t, v1.name, 16);
FQ_OFF(Qnn_Tensor_t, v1.dataType, 32);
FQ_OFF(Qnn_Tensor_t, v1.quantizeParams, 40);
FQ_OFF(Qnn_Tensor_t, v1.rank, 80);
FQ_OFF(Qnn_Tensor_t, v1.dimensions, 88);
FQ_OFF(Qnn_Tensor_t, v1.memType, 96);
FQ_OFF(Qnn_Tensor_t, v1.clientBuf.data, 104);
FQ_OFF(Qnn_Tensor_t, v1.clientBuf.dataSize, 112);
FQ_OFF(Qnn_Tensor_t, v2.isDynamicDimensions, 120);
FQ_OFF(Qnn_Tensor_t, v2.sparseParams, 128);
FQ_OFF(Qnn_Tensor_t, v2.isProduced, 140);

typedef struct {
    uint32_t numDim;
    uint32_t *dimSize;
    void *shapeConfig;
} Qnn_MemShape_t;
FQ_SIZE(Qnn_MemShape_t, 24);
FQ_OFF(Qnn_MemShape_t, numDim, 0);
FQ_OFF(Qnn_MemShape_t, dimSize, 8);
FQ_OFF(Qnn_MemShape_t, shapeConfig, 16);

typedef struct {
    int32_t fd;
    void *data;
} Qnn_MemDmaBufInfo_t;
FQ_SIZE(Qnn_MemDmaBufInfo_t, 16);
FQ_OFF(Qnn_MemDmaBufInfo_t, fd, 0);
FQ_OFF(Qnn_MemDmaBufInfo_t, data, 8);

typedef struct {
    Qnn_MemShape_t memShape;
    uint32_t dataType; /* Qnn_DataType_t */
    uint32_t memType;  /* Qnn_MemType_t: ION, CUSTOM, DMA_BUF */
    union {
        struct { int32_t fd; } ionInfo;
        void *customInfo; /* HTP: QnnMemHtp_Descriptor_t* */
        Qnn_MemDmaBufInfo_t dmaBufInfo;
    };
} Qnn_MemDescriptor_t;
FQ_SIZE(Qnn_MemDescriptor_t, 48);
FQ_OFF(Qnn_MemDescriptor_t, memShape, 0);
FQ_OFF(Qnn_MemDescriptor_t, dataType, 24);
FQ_OFF(Qnn_MemDescriptor_t, memType, 28);
FQ_OFF(Qnn_MemDescriptor_t, ionInfo, 32);
FQ_OFF(Qnn_MemDescriptor_t, customInfo, 32);
FQ_OFF(Qnn_MemDescriptor_t, dmaBufInfo, 32);

typedef struct {
    int32_t fd;
    uint64_t offset;
} QnnHtpMem_SharedBufferConfig_t;
FQ_SIZE(QnnHtpMem_SharedBufferConfig_t, 16);
FQ_OFF(QnnHtpMem_SharedBufferConfig_t, fd, 0);
FQ_OFF(QnnHtpMem_SharedBufferConfig_t, offset, 8);

typedef struct {
    uint32_t type; /* QNN_HTP_MEM_SHARED_BUFFER */
    uint64_t size; /* size of the whole shared buffer */
    union {
        QnnHtpMem_SharedBufferConfig_t sharedBufferConfig;
    };
} QnnMemHtp_Descriptor_t;
FQ_SIZE(QnnMemHtp_Descriptor_t, 32);
FQ_OFF(QnnMemHtp_Descriptor_t, type, 0);
FQ_OFF(QnnMemHtp_Descriptor_t, size, 8);
FQ_OFF(QnnMemHtp_Descriptor_t, sharedBufferConfig, 16);

typedef struct {
    uint32_t option;
    union {
        void *customConfig;
    };
} QnnBackend_Config_t;
FQ_SIZE(QnnBackend_Config_t, 16);
FQ_OFF(QnnBackend_Config_t, option, 0);
FQ_OFF(QnnBackend_Config_t, customConfig, 8);

typedef struct {
    uint32_t option;
    union {
        void *customConfig;
        void *hardwareInfo;
    };
} QnnDevice_Config_t;
FQ_SIZE(QnnDevice_Config_t, 16);
FQ_OFF(QnnDevice_Config_t, option, 0);
FQ_OFF(QnnDevice_Config_t, customConfig, 8);
FQ_OFF(QnnDevice_Config_t, hardwareInfo, 8);

typedef struct {
    uint32_t option; /* QNN_CONTEXT_CONFIG_* */
    union {
        void *customConfig;
        uint32_t priority;
        const char *const *enableGraphs;
        uint64_t memoryLimitHint;
        uint8_t isPersistentBinary;
    };
} QnnContext_Config_t;
FQ_SIZE(QnnContext_Config_t, 16);
FQ_OFF(QnnContext_Config_t, option, 0);
FQ_OFF(QnnContext_Config_t, customConfig, 8);
FQ_OFF(QnnContext_Config_t, priority, 8);
FQ_OFF(QnnContext_Config_t, enableGraphs, 8);
FQ_OFF(QnnContext_Config_t, memoryLimitHint, 8);
FQ_OFF(QnnContext_Config_t, isPersistentBinary, 8);

/* QnnHtpContext_GroupRegistration_t: the spill-fill group a context joins
 * (firstGroupHandle: the group's first context, NULL for a new group). */
typedef struct {
    Qnn_ContextHandle_t firstGroupHandle;
    uint64_t maxSpillFillBuffer;
} QnnHtpContext_GroupRegistration_t;
FQ_SIZE(QnnHtpContext_GroupRegistration_t, 16);
FQ_OFF(QnnHtpContext_GroupRegistration_t, firstGroupHandle, 0);
FQ_OFF(QnnHtpContext_GroupRegistration_t, maxSpillFillBuffer, 8);

/* QnnHtpContext_CustomConfig_t: what a QNN_CONTEXT_CONFIG_OPTION_CUSTOM
 * config's customConfig points to on the HTP backend. */
typedef struct {
    uint32_t option; /* QNN_HTP_CONTEXT_CONFIG_OPTION_* */
    union {
        bool weightSharingEnabled;
        QnnHtpContext_GroupRegistration_t groupRegistration;
        uint64_t fileReadMemoryBudgetInMb;
    };
} QnnHtpContext_CustomConfig_t;
FQ_SIZE(QnnHtpContext_CustomConfig_t, 24);
FQ_OFF(QnnHtpContext_CustomConfig_t, option, 0);
FQ_OFF(QnnHtpContext_CustomConfig_t, weightSharingEnabled, 8);
FQ_OFF(QnnHtpContext_CustomConfig_t, groupRegistration, 8);
FQ_OFF(QnnHtpContext_CustomConfig_t, fileReadMemoryBudgetInMb, 8);

typedef struct {
    uint32_t type;       /* QnnProfile_EventType_t */
    uint32_t unit;       /* QnnProfile_EventUnit_t */
    uint64_t value;
    const char *identifier;
} QnnProfile_EventData_t;
FQ_SIZE(QnnProfile_EventData_t, 24);
FQ_OFF(QnnProfile_EventData_t, type, 0);
FQ_OFF(QnnProfile_EventData_t, unit, 4);
FQ_OFF(QnnProfile_EventData_t, value, 8);
FQ_OFF(QnnProfile_EventData_t, identifier, 16);

/* --- system context metadata ------------------------------------------- */

typedef struct {
    const char *graphName;
    uint32_t numGraphInputs;
    Qnn_Tensor_t *graphInputs;
    uint32_t numGraphOutputs;
    Qnn_Tensor_t *graphOutputs;
} QnnSystemContext_GraphInfoV1_t;
FQ_SIZE(QnnSystemContext_GraphInfoV1_t, 40);
FQ_OFF(QnnSystemContext_GraphInfoV1_t, graphName, 0);
FQ_OFF(QnnSystemContext_GraphInfoV1_t, numGraphInputs, 8);
FQ_OFF(QnnSystemContext_GraphInfoV1_t, graphInputs, 16);
FQ_OFF(QnnSystemContext_GraphInfoV1_t, numGraphOutputs, 24);
FQ_OFF(QnnSystemContext_GraphInfoV1_t, graphOutputs, 32);

typedef struct {
    const char *graphName;
    uint32_t numGraphInputs;
    Qnn_Tensor_t *graphInputs;
    uint32_t numGraphOutputs;
    Qnn_Tensor_t *graphOutputs;
    uint32_t numUpdateableTensors;
    Qnn_Tensor_t *updateableTensors;
} QnnSystemContext_GraphInfoV2_t;
FQ_SIZE(QnnSystemContext_GraphInfoV2_t, 56);
FQ_OFF(QnnSystemContext_GraphInfoV2_t, graphName, 0);
FQ_OFF(QnnSystemContext_GraphInfoV2_t, numGraphInputs, 8);
FQ_OFF(QnnSystemContext_GraphInfoV2_t, graphInputs, 16);
FQ_OFF(QnnSystemContext_GraphInfoV2_t, numGraphOutputs, 24);
FQ_OFF(QnnSystemContext_GraphInfoV2_t, graphOutputs, 32);
FQ_OFF(QnnSystemContext_GraphInfoV2_t, numUpdateableTensors, 40);
FQ_OFF(QnnSystemContext_GraphInfoV2_t, updateableTensors, 48);

typedef struct {
    const char *graphName;
    uint32_t numGraphInputs;
    Qnn_Tensor_t *graphInputs;
    uint32_t numGraphOutputs;
    Qnn_Tensor_t *graphOutputs;
    uint32_t numUpdateableTensors;
    Qnn_Tensor_t *updateableTensors;
    uint32_t graphBlobInfoSize;
    void *graphBlobInfo; /* HTP: QnnHtpSystemContext_GraphBlobInfo_t* */
    uint32_t startOpIndex;
    uint32_t endOpIndex;
} QnnSystemContext_GraphInfoV3_t;
FQ_SIZE(QnnSystemContext_GraphInfoV3_t, 80);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, graphName, 0);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, numGraphInputs, 8);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, graphInputs, 16);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, numGraphOutputs, 24);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, graphOutputs, 32);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, numUpdateableTensors, 40);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, updateableTensors, 48);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, graphBlobInfoSize, 56);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, graphBlobInfo, 64);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, startOpIndex, 72);
FQ_OFF(QnnSystemContext_GraphInfoV3_t, endOpIndex, 76);

/* The current graph info: the graphs[] stride is 88 (layout file NOTE). */
typedef struct {
    uint32_t version; /* QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_* */
    union {
        QnnSystemContext_GraphInfoV1_t graphInfoV1;
        QnnSystemContext_GraphInfoV2_t graphInfoV2;
        QnnSystemContext_GraphInfoV3_t graphInfoV3;
    };
} QnnSystemContext_GraphInfo_t;
FQ_SIZE(QnnSystemContext_GraphInfo_t, 88);
FQ_OFF(QnnSystemContext_GraphInfo_t, version, 0);
FQ_OFF(QnnSystemContext_GraphInfo_t, graphInfoV1, 8);
FQ_OFF(QnnSystemContext_GraphInfo_t, graphInfoV2, 8);
FQ_OFF(QnnSystemContext_GraphInfo_t, graphInfoV3, 8);

/* The graph info of libraries that predate graph-info v3 (README: "the
 * graphs[] stride was 64"): the same leading fields, a union of V1 and V2
 * only. Not in the layout file's table; its size follows from V2 (56 + 8). */
typedef struct {
    uint32_t version;
    union {
        QnnSystemContext_GraphInfoV1_t graphInfoV1;
        QnnSystemContext_GraphInfoV2_t graphInfoV2;
    };
} fq_OldGraphInfo_t;
FQ_SIZE(fq_OldGraphInfo_t, 64);
FQ_OFF(fq_OldGraphInfo_t, graphInfoV1, 8);

typedef struct {
    uint32_t backendId;
    const char *buildId;
    Qnn_Version_t coreApiVersion;
    Qnn_Version_t backendApiVersion;
    const char *socVersion;
    Qnn_Version_t hwInfoBlobVersion;
    Qnn_Version_t contextBlobVersion;
    uint32_t hwInfoBlobSize;
    void *hwInfoBlob;
    uint64_t contextBlobSize;
    uint32_t numContextTensors;
    Qnn_Tensor_t *contextTensors;
    uint32_t numGraphs;
    void *graphs; /* QnnSystemContext_GraphInfo_t[], stride as reported */
} QnnSystemContext_BinaryInfoV1_t;
FQ_SIZE(QnnSystemContext_BinaryInfoV1_t, 128);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, backendId, 0);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, buildId, 8);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, coreApiVersion, 16);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, backendApiVersion, 28);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, socVersion, 40);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, hwInfoBlobVersion, 48);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, contextBlobVersion, 60);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, hwInfoBlobSize, 72);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, hwInfoBlob, 80);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, contextBlobSize, 88);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, numContextTensors, 96);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, contextTensors, 104);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, numGraphs, 112);
FQ_OFF(QnnSystemContext_BinaryInfoV1_t, graphs, 120);

typedef struct {
    uint32_t backendId;
    const char *buildId;
    Qnn_Version_t coreApiVersion;
    Qnn_Version_t backendApiVersion;
    const char *socVersion;
    Qnn_Version_t hwInfoBlobVersion;
    Qnn_Version_t contextBlobVersion;
    uint32_t hwInfoBlobSize;
    void *hwInfoBlob;
    uint64_t contextBlobSize;
    uint32_t numContextTensors;
    Qnn_Tensor_t *contextTensors;
    uint32_t numGraphs;
    void *graphs;
    void *platformInfo; /* QnnDevice_PlatformInfo_t* */
} QnnSystemContext_BinaryInfoV2_t;
FQ_SIZE(QnnSystemContext_BinaryInfoV2_t, 136);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, backendId, 0);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, buildId, 8);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, coreApiVersion, 16);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, backendApiVersion, 28);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, socVersion, 40);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, hwInfoBlobVersion, 48);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, contextBlobVersion, 60);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, hwInfoBlobSize, 72);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, hwInfoBlob, 80);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, contextBlobSize, 88);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, numContextTensors, 96);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, contextTensors, 104);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, numGraphs, 112);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, graphs, 120);
FQ_OFF(QnnSystemContext_BinaryInfoV2_t, platformInfo, 128);

typedef struct {
    uint32_t backendId;
    const char *buildId;
    Qnn_Version_t coreApiVersion;
    Qnn_Version_t backendApiVersion;
    const char *socVersion;
    Qnn_Version_t contextBlobVersion;
    uint64_t contextBlobSize;
    uint32_t numContextTensors;
    Qnn_Tensor_t *contextTensors;
    uint32_t numGraphs;
    void *graphs;
    void *platformInfo;
    uint32_t contextMetadataSize;
    void *contextMetadata;
    uint32_t socModel;
} QnnSystemContext_BinaryInfoV3_t;
FQ_SIZE(QnnSystemContext_BinaryInfoV3_t, 136);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, backendId, 0);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, buildId, 8);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, coreApiVersion, 16);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, backendApiVersion, 28);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, socVersion, 40);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, contextBlobVersion, 48);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, contextBlobSize, 64);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, numContextTensors, 72);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, contextTensors, 80);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, numGraphs, 88);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, graphs, 96);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, platformInfo, 104);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, contextMetadataSize, 112);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, contextMetadata, 120);
FQ_OFF(QnnSystemContext_BinaryInfoV3_t, socModel, 128);

typedef struct {
    uint32_t version; /* QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_* */
    union {
        QnnSystemContext_BinaryInfoV1_t contextBinaryInfoV1;
        QnnSystemContext_BinaryInfoV2_t contextBinaryInfoV2;
        QnnSystemContext_BinaryInfoV3_t contextBinaryInfoV3;
    };
} QnnSystemContext_BinaryInfo_t;
FQ_SIZE(QnnSystemContext_BinaryInfo_t, 144);
FQ_OFF(QnnSystemContext_BinaryInfo_t, version, 0);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV1, 8);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV2, 8);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV3, 8);
/* The "[abs]" line: V1/V2/V3 numGraphs=120/120/96 graphs=128/128/104. */
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV1.numGraphs, 120);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV1.graphs, 128);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV2.numGraphs, 120);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV2.graphs, 128);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV3.numGraphs, 96);
FQ_OFF(QnnSystemContext_BinaryInfo_t, contextBinaryInfoV3.graphs, 104);

typedef struct {
    uint64_t spillFillBufferSize;
    uint32_t vtcmSize;
    uint32_t optimizationLevel;
    uint8_t htpDlbc;
    uint64_t numHvxThreads;
} QnnHtpSystemContext_GraphBlobInfoV1_t;
FQ_SIZE(QnnHtpSystemContext_GraphBlobInfoV1_t, 32);
FQ_OFF(QnnHtpSystemContext_GraphBlobInfoV1_t, spillFillBufferSize, 0);
FQ_OFF(QnnHtpSystemContext_GraphBlobInfoV1_t, vtcmSize, 8);
FQ_OFF(QnnHtpSystemContext_GraphBlobInfoV1_t, optimizationLevel, 12);
FQ_OFF(QnnHtpSystemContext_GraphBlobInfoV1_t, htpDlbc, 16);
FQ_OFF(QnnHtpSystemContext_GraphBlobInfoV1_t, numHvxThreads, 24);

typedef struct {
    uint32_t version; /* QNN_SYSTEM_CONTEXT_HTP_GRAPH_INFO_BLOB_VERSION_V1 */
    union {
        QnnHtpSystemContext_GraphBlobInfoV1_t contextBinaryGraphBlobInfoV1;
    };
} QnnHtpSystemContext_GraphBlobInfo_t;
FQ_SIZE(QnnHtpSystemContext_GraphBlobInfo_t, 40);
FQ_OFF(QnnHtpSystemContext_GraphBlobInfo_t, version, 0);
FQ_OFF(QnnHtpSystemContext_GraphBlobInfo_t, contextBinaryGraphBlobInfoV1, 8);

/* QnnHtpSystemContext_HwBlobInfo_t: the hwInfoBlob of binary info v1/v2.
 * Not in the layout file; written from the public QnnHtpSystemContext.h
 * (a version word, then a V1 union of {uint32_t graphListIndex; uint64_t
 * spillFillBufferSize}), which gives these natural LP64 offsets. */
typedef struct {
    uint32_t graphListIndex;
    uint64_t spillFillBufferSize;
} QnnHtpSystemContext_HwBlobInfoV1_t;
typedef struct {
    uint32_t version; /* QNN_SYSTEM_CONTEXT_HTP_HW_INFO_BLOB_VERSION_V1 */
    union {
        QnnHtpSystemContext_HwBlobInfoV1_t contextBinaryHwInfoBlobV1_t;
    };
} QnnHtpSystemContext_HwBlobInfo_t;
FQ_SIZE(QnnHtpSystemContext_HwBlobInfo_t, 24);
FQ_OFF(QnnHtpSystemContext_HwBlobInfo_t, contextBinaryHwInfoBlobV1_t.spillFillBufferSize, 16);

/* --- platform info (binary info v2/v3 platformInfo) ----------------------
 * The layout file gives only the sizes of QnnDevice_PlatformInfo_t (24),
 * QnnDevice_HardwareDeviceInfo_t (40) and QnnDevice_CoreInfo_t (24), and the
 * full layout of QnnHtpDevice_OnChipDeviceInfoExtension_t. The fields below
 * are those of the public headers (each a version word and a V1 union), and
 * their sizes agree with the table. The HTP device-info extension wrapper
 * (device type + union) is not in the table at all. */
typedef struct {
    uint32_t version; /* 1 */
    union {
        struct {
            uint32_t coreId;
            uint32_t coreType;
            void *coreInfoExtension;
        } v1;
    };
} QnnDevice_CoreInfo_t;
FQ_SIZE(QnnDevice_CoreInfo_t, 24);

typedef struct {
    uint64_t vtcmSize; /* MB */
    uint32_t socModel;
    uint8_t signedPdSupport;
    uint8_t dlbcSupport;
    uint32_t arch; /* QnnHtpDevice_Arch_t, e.g. 75 for V75 */
} QnnHtpDevice_OnChipDeviceInfoExtension_t;
FQ_SIZE(QnnHtpDevice_OnChipDeviceInfoExtension_t, 24);
FQ_OFF(QnnHtpDevice_OnChipDeviceInfoExtension_t, vtcmSize, 0);
FQ_OFF(QnnHtpDevice_OnChipDeviceInfoExtension_t, socModel, 8);
FQ_OFF(QnnHtpDevice_OnChipDeviceInfoExtension_t, signedPdSupport, 12);
FQ_OFF(QnnHtpDevice_OnChipDeviceInfoExtension_t, dlbcSupport, 13);
FQ_OFF(QnnHtpDevice_OnChipDeviceInfoExtension_t, arch, 16);

typedef struct {
    uint32_t devType; /* QNN_HTP_DEVICE_TYPE_ON_CHIP = 0 */
    union {
        QnnHtpDevice_OnChipDeviceInfoExtension_t onChipDevice;
    };
} QnnHtpDevice_DeviceInfoExtension_t;

typedef struct {
    uint32_t version; /* 1 */
    union {
        struct {
            uint32_t deviceId;
            uint32_t deviceType;
            uint32_t numCores;
            QnnDevice_CoreInfo_t *cores;
            void *deviceInfoExtension; /* HTP: QnnHtpDevice_DeviceInfoExtension_t* */
        } v1;
    };
} QnnDevice_HardwareDeviceInfo_t;
FQ_SIZE(QnnDevice_HardwareDeviceInfo_t, 40);

typedef struct {
    uint32_t version; /* 1 */
    union {
        struct {
            uint32_t numHwDevices;
            QnnDevice_HardwareDeviceInfo_t *hwDevices;
        } v1;
    };
} QnnDevice_PlatformInfo_t;
FQ_SIZE(QnnDevice_PlatformInfo_t, 24);

/* --- HTP performance infrastructure ------------------------------------- */

typedef struct {
    uint32_t contextId;
    uint32_t setDcvsEnable;
    uint32_t dcvsEnable;
    uint32_t powerMode;
    uint32_t setSleepLatency;
    uint32_t sleepLatency;
    uint32_t setSleepDisable;
    uint32_t sleepDisable;
    uint32_t setBusParams;
    uint32_t busVoltageCornerMin;
    uint32_t busVoltageCornerTarget;
    uint32_t busVoltageCornerMax;
    uint32_t setCoreParams;
    uint32_t coreVoltageCornerMin;
    uint32_t coreVoltageCornerTarget;
    uint32_t coreVoltageCornerMax;
} QnnHtpPerfInfrastructure_DcvsV3_t;
FQ_SIZE(QnnHtpPerfInfrastructure_DcvsV3_t, 64);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, contextId, 0);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, setDcvsEnable, 4);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, dcvsEnable, 8);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, powerMode, 12);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, setSleepLatency, 16);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, sleepLatency, 20);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, setSleepDisable, 24);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, sleepDisable, 28);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, setBusParams, 32);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, busVoltageCornerMin, 36);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, busVoltageCornerTarget, 40);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, busVoltageCornerMax, 44);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, setCoreParams, 48);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, coreVoltageCornerMin, 52);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, coreVoltageCornerTarget, 56);
FQ_OFF(QnnHtpPerfInfrastructure_DcvsV3_t, coreVoltageCornerMax, 60);

/* HMX v2 (20 bytes): only its size is in the table. */
typedef struct { uint32_t opaque[5]; } QnnHtpPerfInfrastructure_HmxV2_t;
FQ_SIZE(QnnHtpPerfInfrastructure_HmxV2_t, 20);

typedef struct {
    uint32_t option; /* QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_* */
    union {
        QnnHtpPerfInfrastructure_DcvsV3_t dcvsV3Config;
        uint32_t rpcControlLatencyConfig; /* microseconds */
        uint32_t rpcPollingTimeConfig;    /* microseconds */
        QnnHtpPerfInfrastructure_HmxV2_t hmxV2Config;
    };
} QnnHtpPerfInfrastructure_PowerConfig_t;
FQ_SIZE(QnnHtpPerfInfrastructure_PowerConfig_t, 68);
FQ_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, option, 0);
FQ_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, dcvsV3Config, 4);
FQ_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, rpcControlLatencyConfig, 4);
FQ_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, rpcPollingTimeConfig, 4);
FQ_OFF(QnnHtpPerfInfrastructure_PowerConfig_t, hmxV2Config, 4);

typedef Qnn_ErrorHandle_t (*QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t)(uint32_t deviceId, uint32_t coreId,
                                                                              uint32_t *powerConfigId);
typedef Qnn_ErrorHandle_t (*QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t)(uint32_t powerConfigId);
typedef Qnn_ErrorHandle_t (*QnnHtpPerfInfrastructure_SetPowerConfigFn_t)(
    uint32_t powerConfigId, const QnnHtpPerfInfrastructure_PowerConfig_t **config);
typedef Qnn_ErrorHandle_t (*QnnHtpPerfInfrastructure_SetMemoryConfigFn_t)(uint32_t deviceId, uint32_t coreId,
                                                                          const void **config);

typedef struct {
    QnnHtpPerfInfrastructure_CreatePowerConfigIdFn_t createPowerConfigId;
    QnnHtpPerfInfrastructure_DestroyPowerConfigIdFn_t destroyPowerConfigId;
    QnnHtpPerfInfrastructure_SetPowerConfigFn_t setPowerConfig;
    QnnHtpPerfInfrastructure_SetMemoryConfigFn_t setMemoryConfig;
} QnnHtpDevice_PerfInfrastructure_t;
FQ_SIZE(QnnHtpDevice_PerfInfrastructure_t, 32);
FQ_OFF(QnnHtpDevice_PerfInfrastructure_t, createPowerConfigId, 0);
FQ_OFF(QnnHtpDevice_PerfInfrastructure_t, destroyPowerConfigId, 8);
FQ_OFF(QnnHtpDevice_PerfInfrastructure_t, setPowerConfig, 16);
FQ_OFF(QnnHtpDevice_PerfInfrastructure_t, setMemoryConfig, 24);

typedef struct {
    uint32_t infraType; /* QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF */
    union {
        QnnHtpDevice_PerfInfrastructure_t perfInfra;
    };
} QnnHtpDevice_Infrastructure_t;
FQ_SIZE(QnnHtpDevice_Infrastructure_t, 40);
FQ_OFF(QnnHtpDevice_Infrastructure_t, infraType, 0);
FQ_OFF(QnnHtpDevice_Infrastructure_t, perfInfra, 8);

/* ======================================================================== */
/* Function tables and the function registry                                */
/* ======================================================================== */

/*
 * The core table, QNN_INTERFACE_VER_TYPE: X(index, name, kind) in layout-file
 * order. kind IMPL: implemented below; STUB: returns
 * QNN_COMMON_ERROR_NOT_SUPPORTED (counted and injectable like the others).
 */
#define FQ_CORE_TABLE(X)                             \
    X(0, propertyHasCapability, IMPL)                \
    X(1, backendCreate, IMPL)                        \
    X(2, backendSetConfig, STUB)                     \
    X(3, backendGetApiVersion, IMPL)                 \
    X(4, backendGetBuildId, IMPL)                    \
    X(5, backendRegisterOpPackage, STUB)             \
    X(6, backendGetSupportedOperations, STUB)        \
    X(7, backendValidateOpConfig, STUB)              \
    X(8, backendFree, IMPL)                          \
    X(9, contextCreate, STUB)                        \
    X(10, contextSetConfig, STUB)                    \
    X(11, contextGetBinarySize, STUB)                \
    X(12, contextGetBinary, STUB)                    \
    X(13, contextCreateFromBinary, IMPL)             \
    X(14, contextFree, IMPL)                         \
    X(15, graphCreate, STUB)                         \
    X(16, graphCreateSubgraph, STUB)                 \
    X(17, graphSetConfig, STUB)                      \
    X(18, graphAddNode, STUB)                        \
    X(19, graphFinalize, STUB)                       \
    X(20, graphRetrieve, IMPL)                       \
    X(21, graphExecute, IMPL)                        \
    X(22, graphExecuteAsync, STUB)                   \
    X(23, tensorCreateContextTensor, STUB)           \
    X(24, tensorCreateGraphTensor, STUB)             \
    X(25, logCreate, IMPL)                           \
    X(26, logSetLogLevel, IMPL)                      \
    X(27, logFree, IMPL)                             \
    X(28, profileCreate, IMPL)                       \
    X(29, profileSetConfig, STUB)                    \
    X(30, profileGetEvents, IMPL)                    \
    X(31, profileGetSubEvents, IMPL)                 \
    X(32, profileGetEventData, IMPL)                 \
    X(33, profileGetExtendedEventData, STUB)         \
    X(34, profileFree, IMPL)                         \
    X(35, memRegister, IMPL)                         \
    X(36, memDeRegister, IMPL)                       \
    X(37, deviceGetPlatformInfo, STUB)               \
    X(38, deviceFreePlatformInfo, STUB)              \
    X(39, deviceGetInfrastructure, IMPL)             \
    X(40, deviceCreate, IMPL)                        \
    X(41, deviceSetConfig, STUB)                     \
    X(42, deviceGetInfo, STUB)                       \
    X(43, deviceFree, IMPL)                          \
    X(44, signalCreate, STUB)                        \
    X(45, signalSetConfig, STUB)                     \
    X(46, signalTrigger, STUB)                       \
    X(47, signalFree, STUB)                          \
    X(48, errorGetMessage, IMPL)                     \
    X(49, errorGetVerboseMessage, STUB)              \
    X(50, errorFreeVerboseMessage, STUB)             \
    X(51, graphPrepareExecutionEnvironment, STUB)    \
    X(52, graphReleaseExecutionEnvironment, STUB)    \
    X(53, graphGetProperty, STUB)                    \
    X(54, contextValidateBinary, STUB)               \
    X(55, contextCreateFromBinaryWithSignal, STUB)   \
    X(56, contextCreateFromBinaryListAsync, STUB)    \
    X(57, tensorUpdateGraphTensors, STUB)            \
    X(58, tensorUpdateContextTensors, STUB)          \
    X(59, contextGetBinarySectionSize, STUB)         \
    X(60, contextGetBinarySection, STUB)             \
    X(61, contextApplyBinarySection, STUB)           \
    X(62, backendGetProperty, STUB)                  \
    X(63, contextGetProperty, STUB)                  \
    X(64, contextGetIncrementalBinary, STUB)         \
    X(65, contextReleaseIncrementalBinary, STUB)     \
    X(66, contextFinalize, STUB)                     \
    X(67, globalConfigSet, STUB)                     \
    X(68, contextCreateFromBinaryWithCallback, STUB) \
    X(69, contextGetBinarySectionUpdate, STUB)       \
    X(70, contextFreeBinarySectionUpdate, STUB)

/* The system table, QNN_SYSTEM_INTERFACE_VER_TYPE (system API >= 1.1). */
#define FQ_SYSTEM_TABLE(X)                              \
    X(0, systemContextCreate, IMPL)                     \
    X(1, systemContextGetBinaryInfo, IMPL)              \
    X(2, systemContextGetMetaData, IMPL)                \
    X(3, systemContextFree, IMPL)                       \
    X(4, systemTensorGetMemoryFootprint, STUB)          \
    X(5, systemLogCreate, STUB)                         \
    X(6, systemLogSetLogLevel, STUB)                    \
    X(7, systemLogFree, STUB)                           \
    X(8, systemDlcCreateFromFile, STUB)                 \
    X(9, systemDlcCreateFromBinary, STUB)               \
    X(10, systemDlcComposeGraphs, STUB)                 \
    X(11, systemDlcGetOpMappings, STUB)                 \
    X(12, systemDlcFree, STUB)                          \
    X(13, systemProfileCreateSerializationTarget, STUB) \
    X(14, systemProfileSerializeEventData, STUB)        \
    X(15, systemProfileFreeSerializationTarget, STUB)

/* Other functions a test can count or make fail: the exported symbols and
 * the HTP perf-infrastructure functions (index unused). */
#define FQ_OTHER_FUNCTIONS(X)                   \
    X(0, QnnInterface_getProviders, EXPORT)     \
    X(0, QnnSystemInterface_getProviders, EXPORT) \
    X(0, rpcmem_alloc, EXPORT)                  \
    X(0, rpcmem_free, EXPORT)                   \
    X(0, rpcmem_to_fd, EXPORT)                  \
    X(0, createPowerConfigId, PERF)             \
    X(0, destroyPowerConfigId, PERF)            \
    X(0, setPowerConfig, PERF)                  \
    X(0, setMemoryConfig, PERF)

/* Function ids: FN_<name>, in registry order. */
typedef enum {
#define X(i, name, kind) FN_##name,
    FQ_CORE_TABLE(X) FQ_SYSTEM_TABLE(X) FQ_OTHER_FUNCTIONS(X)
#undef X
        FN_COUNT
} fq_fn;

static const char *const fq_fn_names[FN_COUNT] = {
#define X(i, name, kind) #name,
    FQ_CORE_TABLE(X) FQ_SYSTEM_TABLE(X) FQ_OTHER_FUNCTIONS(X)
#undef X
};

/* Table entries have many signatures; they are stored as this generic type
 * (the runtime calls them through their real prototypes). */
typedef void (*fq_fnptr)(void);

typedef struct {
#define X(i, name, kind) fq_fnptr name;
    FQ_CORE_TABLE(X)
#undef X
} QNN_INTERFACE_VER_TYPE;
FQ_SIZE(QNN_INTERFACE_VER_TYPE, 568);
/* table_off = 8 * index for every entry (layout file). */
#define X(i, name, kind) FQ_OFF(QNN_INTERFACE_VER_TYPE, name, 8 * (i));
FQ_CORE_TABLE(X)
#undef X

typedef struct {
    uint32_t backendId;
    const char *providerName;
    Qnn_ApiVersion_t apiVersion;
    QNN_INTERFACE_VER_TYPE QNN_INTERFACE_VER_NAME;
} QnnInterface_t;
FQ_SIZE(QnnInterface_t, 608);
FQ_OFF(QnnInterface_t, backendId, 0);
FQ_OFF(QnnInterface_t, providerName, 8);
FQ_OFF(QnnInterface_t, apiVersion, 16);
FQ_OFF(QnnInterface_t, QNN_INTERFACE_VER_NAME, 40);
FQ_OFF(QnnInterface_t, QNN_INTERFACE_VER_NAME.graphExecute, 208);
FQ_OFF(QnnInterface_t, QNN_INTERFACE_VER_NAME.errorGetMessage, 424);

typedef struct {
#define X(i, name, kind) fq_fnptr name;
    FQ_SYSTEM_TABLE(X)
#undef X
} QNN_SYSTEM_INTERFACE_VER_TYPE;
FQ_SIZE(QNN_SYSTEM_INTERFACE_VER_TYPE, 128);
#define X(i, name, kind) FQ_OFF(QNN_SYSTEM_INTERFACE_VER_TYPE, name, 8 * (i));
FQ_SYSTEM_TABLE(X)
#undef X

typedef struct {
    uint32_t backendId;
    const char *providerName;
    Qnn_Version_t systemApiVersion;
    QNN_SYSTEM_INTERFACE_VER_TYPE QNN_SYSTEM_INTERFACE_VER_NAME;
} QnnSystemInterface_t;
FQ_SIZE(QnnSystemInterface_t, 160);
FQ_OFF(QnnSystemInterface_t, backendId, 0);
FQ_OFF(QnnSystemInterface_t, providerName, 8);
FQ_OFF(QnnSystemInterface_t, systemApiVersion, 16);
FQ_OFF(QnnSystemInterface_t, QNN_SYSTEM_INTERFACE_VER_NAME, 32);

/* Table sizes by advertised version (contract): core minor >= 32: 71
 * entries (API 2.32); 18..31: 62 (API 2.18, a prefix of 2.32's); < 18: a
 * 16-entry bogus table. System minor >= 1: 16 entries; minor 0: 3. */
enum {
    FQ_CORE_ENTRIES_2_32 = 71,
    FQ_CORE_ENTRIES_2_18 = 62,
    FQ_CORE_ENTRIES_BOGUS = 16,
    FQ_SYSTEM_ENTRIES_1_1 = 16,
    FQ_SYSTEM_ENTRIES_1_0 = 3,
};
_Static_assert(sizeof(QNN_INTERFACE_VER_TYPE) == FQ_CORE_ENTRIES_2_32 * sizeof(fq_fnptr), "core table");
_Static_assert(sizeof(QNN_SYSTEM_INTERFACE_VER_TYPE) == FQ_SYSTEM_ENTRIES_1_1 * sizeof(fq_fnptr), "system table");

/* ======================================================================== */
/* Global state                                                             */
/* ======================================================================== */

/* Kinds of tracked objects. Graphs belong to their context and are not
 * counted as live handles. K_EVENT is only a handle kind (profile event
 * ids name their profile object), never an object of its own. */
typedef enum {
    K_FREE_SLOT = 0,
    K_LOG,
    K_BACKEND,
    K_DEVICE,
    K_CONTEXT,
    K_GRAPH,
    K_PROFILE,
    K_EVENT,
    K_SYSCTX,
    K_MEM,
    K_POWER,
    K_RPCMEM,
    K_KIND_COUNT
} fq_kind;

static const char *const fq_kind_names[K_KIND_COUNT] = {
    "?", "log", "backend", "device", "context", "graph", "profile",
    "profile event", "system context", "memory", "power config", "rpcmem buffer",
};

/* An arena: every allocation is freed at once by fq_arena_free, which
 * first overwrites it with 0xA5 bytes, so a runtime that keeps reading
 * metadata after the next call on its system context reads garbage
 * rather than stale but plausible values. */
typedef struct {
    void **blocks;
    size_t *sizes;
    size_t n, cap;
} fq_arena;

/* A tensor of a parsed context binary. */
typedef struct {
    uint32_t id;
    const char *name;
    uint32_t dataType;
    uint32_t rank;
    uint32_t *dims;
    uint32_t encodingDefinition;
    uint32_t quantizationEncoding;
    float scale;
    int32_t offset;
    uint64_t elements;
} fq_tensor;

typedef struct {
    const char *name;
    uint64_t spillFill; /* spill-fill buffer size the graph needs (FAKEQNN2 binaries) */
    uint32_t nInputs, nOutputs;
    fq_tensor *inputs, *outputs;
} fq_graph;

/* A parsed context binary. */
typedef struct {
    uint32_t socModel, arch;
    const char *buildId;
    uint32_t nGraphs;
    fq_graph *graphs;
    uint64_t payloadSize;
} fq_binary;

/* A tracked object. Its handle is fq_handle(kind, index). */
typedef struct {
    fq_kind kind;
    bool live;
    union {
        struct {
            uint32_t level;
            QnnLog_Callback_t callback; /* NULL: platform logging (the fake prints nothing) */
        } log;
        struct {
            fq_arena arena;
            fq_binary bin;
            uint32_t liveMem;      /* registered memory handles */
            uint64_t *graphHandle; /* per graph: handle once retrieved, else 0 */
            uint32_t seq;          /* creation ordinal (1 = first context created) */
        } context;
        struct { uint32_t context, graph; } graph;
        struct {
            uint32_t level;
            uint32_t nEvents;       /* 0 or 1 */
            uint32_t eventType;
            uint64_t eventValue;
            /* the array profileGetEvents returns: malloc'd, so it does
             * not move when the object table grows */
            QnnProfile_EventId_t *eventIds;
        } profile;
        struct { fq_arena arena; } sysctx;
        struct {
            uint32_t context; /* owning context's index */
            uint32_t rpcmem;  /* index of the rpcmem buffer */
            uint64_t offset;  /* of the registered region in the buffer */
            uint64_t size;    /* of the registered region */
            int32_t fd;
            uint32_t memType;
            uint32_t dataType; /* the descriptor's */
        } mem;
        struct {
            void *base;
            uint64_t size;    /* requested */
            uint64_t mapped;  /* mmap'd length */
            int32_t fd;
        } rpcmem;
    };
} fq_obj;

/* A configured core provider. */
typedef struct {
    char name[64];
    uint32_t backendId;
    Qnn_Version_t version;
} fq_provider_cfg;

enum { FQ_MAX_PROVIDERS = 8, FQ_LAST_ERROR_MAX = 1024 };

/* A recorded context creation: its ordinal, whether it came with a
 * spill-fill group registration (QNN_HTP_CONTEXT_CONFIG_OPTION_REGISTER_
 * MULTI_CONTEXTS), the ordinal of the context its firstGroupHandle named (0
 * for a new group), the maxSpillFillBuffer it gave and the largest
 * spill-fill size of the binary's graphs. */
typedef struct {
    uint64_t seq, group, firstSeq, maxSpillFill, binarySpillFill;
    uint64_t freed; /* 0 while live, else its rank among contextFree calls that freed a context (1 = first) */
    uint64_t groupSpillFill; /* the group's buffer: its first context's maxSpillFillBuffer */
} fq_context_record;

/* A recorded successful execute: the context's ordinal, the graph's name
 * and the address of every tensor's data, inputs then outputs, in the
 * graph's declaration order (at most FQ_EXEC_ADDRS). */
enum { FQ_EXEC_ADDRS = 16, FQ_MAX_EXEC_RECORDS = 1 << 16, FQ_MAX_CONTEXT_RECORDS = 1 << 12 };
typedef struct {
    uint32_t seq;
    uint32_t nIn, nOut;
    char graph[64];
    uint64_t addr[FQ_EXEC_ADDRS];
} fq_exec_record;

/* A recorded power vote, in the order of the Go PowerVote struct. call is
 * the number of the setPowerConfig call that carried it (1 = the first). */
typedef struct {
    uint32_t option, powerMode, dcvsEnable, sleepLatency;
    uint32_t busMin, busTarget, busMax, coreMin, coreTarget, coreMax, rpcValue, call;
} fq_power_vote;

static struct {
    pthread_mutex_t mu;

    /* configuration (control API) */
    fq_provider_cfg providers[FQ_MAX_PROVIDERS];
    uint32_t nProviders;
    bool providersDirty; /* rebuild tables on the next getProviders */
    Qnn_Version_t systemApi;
    bool systemDirty;
    uint32_t binaryInfoVersion;
    bool graphInfoV3;
    uint32_t tensorVersion;
    bool deviceSupported;
    bool rpcmemAvailable;
    bool emptyExecute;
    uint64_t profileMicros;

    /* published provider tables (guarded pages, never unmapped: a runtime
     * may still hold pointers into an old set) */
    const QnnInterface_t *coreList[FQ_MAX_PROVIDERS];
    uint32_t coreCount;
    const QnnSystemInterface_t *systemList[1];

    /* tracked objects; indices are never reused */
    fq_obj *objs;
    uint32_t nObjs, capObjs;

    /* counters */
    uint64_t calls[FN_COUNT];
    uint64_t failAt[FN_COUNT];  /* absolute call number that fails, 0 = none */
    bool failEvery[FN_COUNT];
    uint64_t failCode[FN_COUNT];
    uint64_t doubleFrees;
    uint64_t rawBytesRead;
    uint64_t memHandleBytesRead;
    uint64_t memHandleBytesWritten;
    char lastError[FQ_LAST_ERROR_MAX];

    fq_power_vote *votes;
    uint32_t nVotes, capVotes;

    fq_context_record *ctxRecs;
    uint32_t nCtxRecs, capCtxRecs;
    uint64_t nContextFrees;
    fq_exec_record *execRecs;
    uint32_t nExecRecs, capExecRecs;

    /* logging: the active logger is the most recently created live log
     * object (index + 1, 0 = none); timestamps are a sequence number */
    uint32_t logger;
    uint64_t logSeq;
    bool omitted[FN_COUNT]; /* core table entries left NULL (fake_omit_function) */
} S = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .providers = {{"FAKE_HTP", QNN_BACKEND_ID_HTP, {2, 32, 0}}},
    .nProviders = 1,
    .providersDirty = true,
    .systemApi = {1, 7, 0},
    .systemDirty = true,
    .binaryInfoVersion = 3,
    .graphInfoV3 = true,
    .tensorVersion = 2,
    .deviceSupported = true,
    .rpcmemAvailable = true,
    .profileMicros = 1500,
};

/* Versions the fake reports for itself. */
static const Qnn_Version_t fq_core_api = {2, 32, 0};    /* QNN_API_VERSION */
static const Qnn_Version_t fq_htp_api = {5, 43, 0};     /* QNN_HTP_API_VERSION */
static const char fq_build_id[] = "v2.43.0.fakeqnn";

/* ---- locking, errors, failure injection -------------------------------- */

static void fq_unlock(int *unused) {
    (void)unused;
    pthread_mutex_unlock(&S.mu);
}

/* FQ_LOCK takes the global lock until the enclosing block ends, however it
 * ends (GCC cleanup attribute), so every `return` unlocks. */
#define FQ_LOCK()                                                  \
    int fq_lock_guard_ __attribute__((cleanup(fq_unlock), unused)) = \
        (pthread_mutex_lock(&S.mu), 0)

/* fq_error records "<function>: <message>" as the last error and returns
 * code, for `return fq_error(...)`. Called with the lock held. */
/* ---- logging --------------------------------------------------------------- */

/* fq_active_logger is the log object lines go to, or NULL. Lock held. */
static fq_obj *fq_active_logger(void) {
    if (S.logger == 0 || S.logger > S.nObjs) {
        return NULL;
    }
    fq_obj *o = &S.objs[S.logger - 1];
    return o->kind == K_LOG && o->live ? o : NULL;
}

/* fq_vlog passes one line to the active logger's callback when the level
 * the logger was created with (or set to) admits it, like a real backend:
 * the callback gets the format and its arguments as a va_list, so it does
 * the formatting. Called with the lock held: the callback runs inside the
 * library and must not call back into it. */
static void fq_vlog(uint32_t level, const char *format, va_list ap) {
    fq_obj *o = fq_active_logger();
    if (o == NULL || o->log.callback == NULL || level > o->log.level) {
        return;
    }
    o->log.callback(format, level, ++S.logSeq, ap);
}

__attribute__((format(printf, 2, 3))) static void fq_log(uint32_t level, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    fq_vlog(level, format, ap);
    va_end(ap);
}

/* fq_error records "<function>: <message>" as the last error, logs the
 * same text at ERROR (as a real backend logs the reason of a failure it
 * returns) and returns code, for `return fq_error(...)`. Called with the
 * lock held. */
__attribute__((format(printf, 3, 4))) static Qnn_ErrorHandle_t fq_error(fq_fn fn, Qnn_ErrorHandle_t code,
                                                                        const char *format, ...) {
    int n = snprintf(S.lastError, sizeof S.lastError, "%s: ", fq_fn_names[fn]);
    if (n < 0 || (size_t)n >= sizeof S.lastError) {
        return code;
    }
    va_list ap;
    va_start(ap, format);
    vsnprintf(S.lastError + n, sizeof S.lastError - (size_t)n, format, ap);
    va_end(ap);
    fq_log(QNN_LOG_LEVEL_ERROR, "%s (error %llu)", S.lastError, (unsigned long long)(code & 0xFFFF));
    return code;
}

/* fq_enter counts a call of fn and reports whether an injected failure
 * fires on it (then *code is the injected code). Called with the lock held. */
static bool fq_enter(fq_fn fn, Qnn_ErrorHandle_t *code) {
    uint64_t n = ++S.calls[fn];
    if (S.failEvery[fn] || (S.failAt[fn] != 0 && S.failAt[fn] == n)) {
        if (!S.failEvery[fn]) {
            S.failAt[fn] = 0;
        }
        *code = S.failCode[fn];
        fq_error(fn, *code, "injected failure (call %llu, code %llu)", (unsigned long long)n,
                 (unsigned long long)*code);
        return true;
    }
    return false;
}

/* FQ_ENTRY(fn) starts every QNN entry point: take the lock, count the call
 * and return the injected code if a failure is due. */
#define FQ_ENTRY(fn)                                \
    FQ_LOCK();                                      \
    do {                                            \
        Qnn_ErrorHandle_t injected_;                \
        if (fq_enter((fn), &injected_)) {           \
            return injected_;                       \
        }                                           \
    } while (0)

/* ---- tracked objects ---------------------------------------------------- */

/* A handle is 0x5A5A_KK_00_IIIIIIII: a tag, the object kind and index+1.
 * Handles are opaque (never pointers) and never reused, so a stale handle
 * is always recognised. */
#define FQ_HANDLE_TAG 0x5A5Aull

static void *fq_handle(fq_kind kind, uint32_t index) {
    return (void *)(uintptr_t)((FQ_HANDLE_TAG << 48) | ((uint64_t)kind << 40) | ((uint64_t)index + 1));
}

/* fq_new adds an object of kind and returns its index, or UINT32_MAX when
 * out of memory. The object is zeroed and live. */
static uint32_t fq_new(fq_kind kind) {
    if (S.nObjs == S.capObjs) {
        uint32_t cap = S.capObjs ? 2 * S.capObjs : 64;
        fq_obj *objs = realloc(S.objs, cap * sizeof *objs);
        if (objs == NULL) {
            return UINT32_MAX;
        }
        S.objs = objs;
        S.capObjs = cap;
    }
    uint32_t i = S.nObjs++;
    memset(&S.objs[i], 0, sizeof S.objs[i]);
    S.objs[i].kind = kind;
    S.objs[i].live = true;
    return i;
}

/* fq_find returns the index of the object h names if it is of kind, live or
 * freed (*live tells which), or UINT32_MAX if h names no such object. */
static uint32_t fq_find(fq_kind kind, const void *h, bool *live) {
    uint64_t v = (uint64_t)(uintptr_t)h;
    if ((v >> 48) != FQ_HANDLE_TAG || ((v >> 40) & 0xff) != (uint64_t)kind) {
        return UINT32_MAX;
    }
    uint64_t i = (v & 0xffffffffull) - 1;
    if (i >= S.nObjs || ((v >> 32) & 0xff) != 0 || S.objs[i].kind != kind) {
        return UINT32_MAX;
    }
    *live = S.objs[i].live;
    return (uint32_t)i;
}

/* fq_get returns the live object h names if it is of kind, else NULL. */
static fq_obj *fq_get(fq_kind kind, const void *h) {
    bool live = false;
    uint32_t i = fq_find(kind, h, &live);
    return i == UINT32_MAX || !live ? NULL : &S.objs[i];
}

/* fq_release frees the object h names, for the *Free entry points: an
 * unknown or already freed handle is a double free, reported with code.
 * On success *out (if not NULL) is the object, now marked dead. */
static Qnn_ErrorHandle_t fq_release(fq_fn fn, fq_kind kind, const void *h, Qnn_ErrorHandle_t code, fq_obj **out) {
    bool live = false;
    uint32_t i = fq_find(kind, h, &live);
    if (i == UINT32_MAX || !live) {
        S.doubleFrees++;
        return fq_error(fn, code, "%s %s handle %p", i == UINT32_MAX ? "unknown" : "already freed",
                        fq_kind_names[kind], h);
    }
    S.objs[i].live = false;
    if (out != NULL) {
        *out = &S.objs[i];
    }
    return QNN_SUCCESS;
}

/* ---- arenas ------------------------------------------------------------- */

static void *fq_alloc(fq_arena *a, size_t size) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        void **blocks = realloc(a->blocks, cap * sizeof *blocks);
        if (blocks == NULL) {
            return NULL;
        }
        a->blocks = blocks;
        size_t *sizes = realloc(a->sizes, cap * sizeof *sizes);
        if (sizes == NULL) {
            return NULL;
        }
        a->sizes = sizes;
        a->cap = cap;
    }
    void *p = calloc(1, size ? size : 1);
    if (p != NULL) {
        a->blocks[a->n] = p;
        a->sizes[a->n++] = size;
    }
    return p;
}

static void fq_arena_free(fq_arena *a) {
    for (size_t i = 0; i < a->n; i++) {
        memset(a->blocks[i], 0xA5, a->sizes[i]);
        free(a->blocks[i]);
    }
    free(a->blocks);
    free(a->sizes);
    memset(a, 0, sizeof *a);
}

/* ======================================================================== */
/* Data types: sizes and conversions                                        */
/* ======================================================================== */

/* fq_elem_size is the size in bytes of one element of a QNN data type, 0
 * for types the fake cannot lay out (4-bit, string, undefined). */
static uint32_t fq_elem_size(uint32_t dataType) {
    switch (dataType) {
    case QNN_DATATYPE_INT_8:
    case QNN_DATATYPE_UINT_8:
    case QNN_DATATYPE_SFIXED_POINT_8:
    case QNN_DATATYPE_UFIXED_POINT_8:
    case QNN_DATATYPE_BOOL_8:
        return 1;
    case QNN_DATATYPE_INT_16:
    case QNN_DATATYPE_UINT_16:
    case QNN_DATATYPE_FLOAT_16:
    case QNN_DATATYPE_BFLOAT_16:
    case QNN_DATATYPE_SFIXED_POINT_16:
    case QNN_DATATYPE_UFIXED_POINT_16:
        return 2;
    case QNN_DATATYPE_INT_32:
    case QNN_DATATYPE_UINT_32:
    case QNN_DATATYPE_FLOAT_32:
    case QNN_DATATYPE_SFIXED_POINT_32:
    case QNN_DATATYPE_UFIXED_POINT_32:
        return 4;
    case QNN_DATATYPE_INT_64:
    case QNN_DATATYPE_UINT_64:
    case QNN_DATATYPE_FLOAT_64:
        return 8;
    }
    return 0;
}

/* fq_computable reports whether graphExecute computes with tensor t: the
 * types of the contract; fixed-point ones need a defined scale/offset. */
static bool fq_computable(const fq_tensor *t) {
    switch (t->dataType) {
    case QNN_DATATYPE_FLOAT_32:
    case QNN_DATATYPE_FLOAT_16:
    case QNN_DATATYPE_BFLOAT_16:
    case QNN_DATATYPE_INT_32:
    case QNN_DATATYPE_BOOL_8:
        return true;
    case QNN_DATATYPE_UFIXED_POINT_8:
    case QNN_DATATYPE_UFIXED_POINT_16:
        return t->encodingDefinition == QNN_DEFINITION_DEFINED &&
               t->quantizationEncoding == QNN_QUANTIZATION_ENCODING_SCALE_OFFSET && t->scale != 0;
    }
    return false;
}

/* IEEE binary16 from a double, round to nearest even, in one rounding. */
static uint16_t fq_double_to_half(double v) {
    uint16_t sign = 0;
    if (signbit(v)) {
        sign = 0x8000;
        v = -v;
    }
    if (isnan(v)) {
        return sign | 0x7e00;
    }
    if (v >= 65520.0) { /* halfway between 65504 and 65536 rounds to even: inf */
        return sign | 0x7c00;
    }
    if (v < 0x1p-14) { /* subnormal: multiples of 2^-24 */
        return sign | (uint16_t)nearbyint(v * 0x1p24);
    }
    int exp;
    double frac = frexp(v, &exp); /* v = frac * 2^exp, frac in [0.5, 1) */
    int e = exp - 1;
    double m = nearbyint((frac * 2 - 1) * 1024);
    if (m == 1024) {
        m = 0;
        e++;
    }
    return sign | (uint16_t)((e + 15) << 10) | (uint16_t)m;
}

static double fq_half_to_double(uint16_t h) {
    double sign = (h & 0x8000) ? -1 : 1;
    int e = (h >> 10) & 0x1f;
    double m = h & 0x3ff;
    if (e == 0) {
        return sign * ldexp(m, -24);
    }
    if (e == 31) {
        return m != 0 ? NAN : sign * INFINITY;
    }
    return sign * ldexp(1024 + m, e - 25);
}

/* bfloat16 from a double, round to nearest even, in one rounding. */
static uint16_t fq_double_to_bf16(double v) {
    uint16_t sign = 0;
    if (signbit(v)) {
        sign = 0x8000;
        v = -v;
    }
    if (isnan(v)) {
        return sign | 0x7fc0;
    }
    if (v >= 0x1.ffp127) { /* halfway between the largest finite value and 2^128 */
        return sign | 0x7f80;
    }
    if (v < 0x1p-126) { /* subnormal: multiples of 2^-133 */
        return sign | (uint16_t)nearbyint(v * 0x1p133);
    }
    int exp;
    double frac = frexp(v, &exp);
    int e = exp - 1;
    double m = nearbyint((frac * 2 - 1) * 128);
    if (m == 128) {
        m = 0;
        e++;
    }
    return sign | (uint16_t)((e + 127) << 7) | (uint16_t)m;
}

static double fq_bf16_to_double(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static double fq_clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* fq_half_table maps every binary16 bit pattern to its value: built once
 * (under the lock) by the first execute, it makes decoding full-size f16
 * inputs cheap. NULL if out of memory (then each value is computed). */
static double *fq_half_table;

static void fq_init_half_table(void) {
    if (fq_half_table != NULL) {
        return;
    }
    double *t = malloc(65536 * sizeof *t);
    if (t == NULL) {
        return;
    }
    for (uint32_t h = 0; h < 65536; h++) {
        t[h] = fq_half_to_double((uint16_t)h);
    }
    fq_half_table = t;
}

/* fq_load decodes element i of a buffer of tensor t's type to its real value. */
static double fq_load(const fq_tensor *t, const uint8_t *p, uint64_t i) {
    switch (t->dataType) {
    case QNN_DATATYPE_FLOAT_32: {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    case QNN_DATATYPE_FLOAT_16: {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        return fq_half_table != NULL ? fq_half_table[h] : fq_half_to_double(h);
    }
    case QNN_DATATYPE_BFLOAT_16: {
        uint16_t b;
        memcpy(&b, p + 2 * i, 2);
        return fq_bf16_to_double(b);
    }
    case QNN_DATATYPE_INT_32: {
        int32_t v;
        memcpy(&v, p + 4 * i, 4);
        return v;
    }
    case QNN_DATATYPE_BOOL_8:
        return p[i] != 0 ? 1 : 0;
    case QNN_DATATYPE_UFIXED_POINT_8: /* real = (q + offset) * scale */
        return ((double)p[i] + (double)t->offset) * (double)t->scale;
    case QNN_DATATYPE_UFIXED_POINT_16: {
        uint16_t q;
        memcpy(&q, p + 2 * i, 2);
        return ((double)q + (double)t->offset) * (double)t->scale;
    }
    }
    return 0;
}

/* fq_store encodes y as element i of a buffer of tensor t's type. */
static void fq_store(const fq_tensor *t, uint8_t *p, uint64_t i, double y) {
    switch (t->dataType) {
    case QNN_DATATYPE_FLOAT_32: {
        float f = (float)y;
        memcpy(p + 4 * i, &f, 4);
        break;
    }
    case QNN_DATATYPE_FLOAT_16: {
        uint16_t h = fq_double_to_half(y);
        memcpy(p + 2 * i, &h, 2);
        break;
    }
    case QNN_DATATYPE_BFLOAT_16: {
        uint16_t b = fq_double_to_bf16(y);
        memcpy(p + 2 * i, &b, 2);
        break;
    }
    case QNN_DATATYPE_INT_32: {
        int32_t v = (int32_t)fq_clamp(round(y), INT32_MIN, INT32_MAX);
        memcpy(p + 4 * i, &v, 4);
        break;
    }
    case QNN_DATATYPE_BOOL_8:
        p[i] = y != 0;
        break;
    case QNN_DATATYPE_UFIXED_POINT_8: /* q = clamp(round(y/scale) - offset, 0, 255) */
        p[i] = (uint8_t)fq_clamp(round(y / (double)t->scale) - (double)t->offset, 0, 255);
        break;
    case QNN_DATATYPE_UFIXED_POINT_16: {
        uint16_t q = (uint16_t)fq_clamp(round(y / (double)t->scale) - (double)t->offset, 0, 65535);
        memcpy(p + 2 * i, &q, 2);
        break;
    }
    }
}

/* ======================================================================== */
/* The context-binary format                                                */
/* ======================================================================== */

/*
 * Header: bytes 0..7 big-endian uint32 format major 2, minor 3; 0x18 LE
 * uint64 payload offset; 0x20 LE uint64 payload size; offset + size = file
 * length. Payload, little-endian: "FAKEQNN1", socModel u32, arch u32,
 * buildId str, nGraphs u32, then per graph: name str, nInputs u32, inputs,
 * nOutputs u32, outputs; per tensor: id u32, name str, dataType u32, rank
 * u32, dims u32[rank], encodingDefinition u32, quantizationEncoding u32,
 * scale f32, offset i32. A str is a u32 length and the bytes.
 */
enum { FQ_HEADER_MIN = 0x28, FQ_MAX_RANK = 16 };

typedef enum { FQ_PARSE_OK, FQ_PARSE_EMPTY, FQ_PARSE_VERSION, FQ_PARSE_MALFORMED, FQ_PARSE_NOMEM } fq_parse_status;

typedef struct {
    const uint8_t *p;
    uint64_t left;
    bool bad;
    fq_arena *arena;
    char why[160];
} fq_reader;

static void fq_reader_fail(fq_reader *r, const char *why) {
    if (!r->bad) {
        r->bad = true;
        snprintf(r->why, sizeof r->why, "%s", why);
    }
}

static uint32_t fq_read_u32(fq_reader *r) {
    if (r->bad || r->left < 4) {
        fq_reader_fail(r, "truncated payload");
        return 0;
    }
    uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    r->left -= 4;
    return v;
}

static uint64_t fq_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

static uint32_t fq_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* fq_read_str copies a string into the arena (NUL-terminated). */
static const char *fq_read_str(fq_reader *r) {
    uint32_t n = fq_read_u32(r);
    if (r->bad) {
        return "";
    }
    if (n > r->left) {
        fq_reader_fail(r, "string runs past the payload");
        return "";
    }
    char *s = fq_alloc(r->arena, (size_t)n + 1);
    if (s == NULL) {
        fq_reader_fail(r, "out of memory");
        return "";
    }
    memcpy(s, r->p, n);
    r->p += n;
    r->left -= n;
    return s;
}

/* fq_read_count reads an array length and checks that many items of at
 * least min bytes each fit in what is left. */
static uint32_t fq_read_count(fq_reader *r, uint64_t min, const char *what) {
    uint32_t n = fq_read_u32(r);
    if (!r->bad && (uint64_t)n * min > r->left) {
        char why[96];
        snprintf(why, sizeof why, "%s count %u runs past the payload", what, n);
        fq_reader_fail(r, why);
        return 0;
    }
    return r->bad ? 0 : n;
}

static fq_tensor *fq_read_tensors(fq_reader *r, uint32_t *count) {
    /* smallest tensor: id, name length, type, rank, 4 quant words */
    *count = fq_read_count(r, 32, "tensor");
    fq_tensor *ts = fq_alloc(r->arena, (size_t)*count * sizeof *ts);
    if (ts == NULL) {
        fq_reader_fail(r, "out of memory");
        return NULL;
    }
    for (uint32_t k = 0; k < *count && !r->bad; k++) {
        fq_tensor *t = &ts[k];
        t->id = fq_read_u32(r);
        t->name = fq_read_str(r);
        t->dataType = fq_read_u32(r);
        t->rank = fq_read_u32(r);
        if (!r->bad && t->rank > FQ_MAX_RANK) {
            fq_reader_fail(r, "tensor rank above 16");
            break;
        }
        t->dims = fq_alloc(r->arena, (size_t)(t->rank ? t->rank : 1) * sizeof *t->dims);
        if (t->dims == NULL) {
            fq_reader_fail(r, "out of memory");
            break;
        }
        t->elements = 1;
        for (uint32_t d = 0; d < t->rank; d++) {
            t->dims[d] = fq_read_u32(r);
            if (!r->bad && t->dims[d] == 0) {
                fq_reader_fail(r, "tensor dimension of 0");
            }
            if (!r->bad && t->elements > (UINT64_C(1) << 48) / t->dims[d]) {
                fq_reader_fail(r, "tensor too large");
            }
            t->elements *= r->bad ? 1 : t->dims[d];
        }
        t->encodingDefinition = fq_read_u32(r);
        t->quantizationEncoding = fq_read_u32(r);
        uint32_t scaleBits = fq_read_u32(r);
        memcpy(&t->scale, &scaleBits, sizeof t->scale);
        t->offset = (int32_t)fq_read_u32(r);
    }
    return ts;
}

/* fq_parse parses a context binary into out, allocating in arena. On a
 * failure, why says what is wrong. */
static fq_parse_status fq_parse(const void *buf, uint64_t size, fq_arena *arena, fq_binary *out, char *why,
                                size_t whyCap) {
    memset(out, 0, sizeof *out);
    const uint8_t *b = buf;
    if (b == NULL || size == 0) {
        snprintf(why, whyCap, "empty binary buffer");
        return FQ_PARSE_EMPTY;
    }
    if (size < FQ_HEADER_MIN) {
        snprintf(why, whyCap, "binary of %llu bytes is shorter than its header", (unsigned long long)size);
        return FQ_PARSE_MALFORMED;
    }
    uint32_t major = fq_be32(b), minor = fq_be32(b + 4);
    if (major != 2 || minor != 3) {
        snprintf(why, whyCap, "context binary format %u.%u, this library reads 2.3", major, minor);
        return FQ_PARSE_VERSION;
    }
    uint64_t off = fq_le64(b + 0x18), len = fq_le64(b + 0x20);
    if (off < FQ_HEADER_MIN || off > size || len != size - off) {
        snprintf(why, whyCap, "payload offset %llu + size %llu does not match the binary's %llu bytes",
                 (unsigned long long)off, (unsigned long long)len, (unsigned long long)size);
        return FQ_PARSE_MALFORMED;
    }
    fq_reader r = {.p = b + off, .left = len, .arena = arena};
    /* FAKEQNN1: no spill-fill sizes; FAKEQNN2: a uint64 spill-fill size
     * after each graph's name */
    bool withSpill = len >= 8 && memcmp(r.p, "FAKEQNN2", 8) == 0;
    if (len < 8 || (!withSpill && memcmp(r.p, "FAKEQNN1", 8) != 0)) {
        snprintf(why, whyCap, "payload does not start with FAKEQNN1 or FAKEQNN2");
        return FQ_PARSE_MALFORMED;
    }
    r.p += 8;
    r.left -= 8;
    out->payloadSize = len;
    out->socModel = fq_read_u32(&r);
    out->arch = fq_read_u32(&r);
    out->buildId = fq_read_str(&r);
    out->nGraphs = fq_read_count(&r, 12, "graph");
    out->graphs = fq_alloc(arena, (size_t)out->nGraphs * sizeof *out->graphs);
    if (out->graphs == NULL) {
        fq_reader_fail(&r, "out of memory");
    }
    for (uint32_t g = 0; g < out->nGraphs && !r.bad; g++) {
        fq_graph *gr = &out->graphs[g];
        gr->name = fq_read_str(&r);
        if (withSpill) {
            uint64_t lo = fq_read_u32(&r), hi = fq_read_u32(&r);
            gr->spillFill = hi << 32 | lo;
        }
        gr->inputs = fq_read_tensors(&r, &gr->nInputs);
        gr->outputs = fq_read_tensors(&r, &gr->nOutputs);
    }
    if (!r.bad && r.left != 0) {
        snprintf(r.why, sizeof r.why, "%llu bytes after the last graph", (unsigned long long)r.left);
        r.bad = true;
    }
    if (r.bad) {
        snprintf(why, whyCap, "%s", r.why);
        return strcmp(r.why, "out of memory") == 0 ? FQ_PARSE_NOMEM : FQ_PARSE_MALFORMED;
    }
    return FQ_PARSE_OK;
}


/* ======================================================================== */
/* Core API: property, log, backend, device, error messages                 */
/* ======================================================================== */

/* propertyHasCapability(QnnProperty_Key_t key) -> QNN_PROPERTY_SUPPORTED,
 * QNN_PROPERTY_NOT_SUPPORTED or QNN_PROPERTY_ERROR_UNKNOWN_KEY. */
static Qnn_ErrorHandle_t fq_propertyHasCapability(uint32_t key) {
    FQ_ENTRY(FN_propertyHasCapability);
    switch (key) {
    case QNN_PROPERTY_GROUP_CORE:
    case QNN_PROPERTY_CONTEXT_SUPPORT_CACHING:
    case QNN_PROPERTY_TENSOR_SUPPORT_MEMHANDLE_TYPE:
        return QNN_PROPERTY_SUPPORTED;
    case QNN_PROPERTY_GRAPH_SUPPORT_ASYNC_EXECUTION:
        return QNN_PROPERTY_NOT_SUPPORTED;
    case QNN_PROPERTY_GROUP_DEVICE:
    case QNN_PROPERTY_DEVICE_SUPPORT_INFRASTRUCTURE:
        return S.deviceSupported ? QNN_PROPERTY_SUPPORTED : QNN_PROPERTY_NOT_SUPPORTED;
    }
    return fq_error(FN_propertyHasCapability, QNN_PROPERTY_ERROR_UNKNOWN_KEY, "unknown property key %u", key);
}

/* logCreate(QnnLog_Callback_t callback, QnnLog_Level_t maxLogLevel,
 *           Qnn_LogHandle_t* logger). The new logger becomes the active one:
 * from now on the library's lines up to maxLogLevel go to callback (NULL
 * means platform logging, and the fake then prints nothing). */
static Qnn_ErrorHandle_t fq_logCreate(QnnLog_Callback_t callback, uint32_t maxLogLevel, Qnn_LogHandle_t *logger) {
    FQ_ENTRY(FN_logCreate);
    if (logger == NULL) {
        return fq_error(FN_logCreate, QNN_LOG_ERROR_INVALID_ARGUMENT, "NULL logger out-parameter");
    }
    if (maxLogLevel < QNN_LOG_LEVEL_ERROR || maxLogLevel > QNN_LOG_LEVEL_DEBUG) {
        return fq_error(FN_logCreate, QNN_LOG_ERROR_INVALID_ARGUMENT, "log level %u outside 1..5", maxLogLevel);
    }
    uint32_t i = fq_new(K_LOG);
    if (i == UINT32_MAX) {
        return fq_error(FN_logCreate, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    S.objs[i].log.level = maxLogLevel;
    S.objs[i].log.callback = callback;
    S.logger = i + 1;
    *logger = fq_handle(K_LOG, i);
    fq_log(QNN_LOG_LEVEL_INFO, "fakeqnn %s: logger %p created at level %u", fq_build_id, *logger, maxLogLevel);
    return QNN_SUCCESS;
}

/* logSetLogLevel(Qnn_LogHandle_t logger, QnnLog_Level_t maxLogLevel) */
static Qnn_ErrorHandle_t fq_logSetLogLevel(Qnn_LogHandle_t logger, uint32_t maxLogLevel) {
    FQ_ENTRY(FN_logSetLogLevel);
    fq_obj *o = fq_get(K_LOG, logger);
    if (o == NULL) {
        return fq_error(FN_logSetLogLevel, QNN_LOG_ERROR_INVALID_HANDLE, "invalid log handle %p", logger);
    }
    if (maxLogLevel < QNN_LOG_LEVEL_ERROR || maxLogLevel > QNN_LOG_LEVEL_DEBUG) {
        return fq_error(FN_logSetLogLevel, QNN_LOG_ERROR_INVALID_ARGUMENT, "log level %u outside 1..5", maxLogLevel);
    }
    o->log.level = maxLogLevel;
    return QNN_SUCCESS;
}

/* logFree(Qnn_LogHandle_t logger). The most recent other live logger, if
 * any, becomes the active one. */
static Qnn_ErrorHandle_t fq_logFree(Qnn_LogHandle_t logger) {
    FQ_ENTRY(FN_logFree);
    fq_log(QNN_LOG_LEVEL_DEBUG, "freeing logger %p", logger);
    Qnn_ErrorHandle_t err = fq_release(FN_logFree, K_LOG, logger, QNN_LOG_ERROR_INVALID_HANDLE, NULL);
    if (err == QNN_SUCCESS && fq_active_logger() == NULL) {
        S.logger = 0;
        for (uint32_t i = S.nObjs; i > 0; i--) {
            if (S.objs[i - 1].kind == K_LOG && S.objs[i - 1].live) {
                S.logger = i;
                break;
            }
        }
    }
    return err;
}

/* fq_log_ok: a logger argument is NULL or a live log handle. */
static bool fq_log_ok(Qnn_LogHandle_t logger) { return logger == NULL || fq_get(K_LOG, logger) != NULL; }

/* backendCreate(Qnn_LogHandle_t logger, const QnnBackend_Config_t** config,
 *               Qnn_BackendHandle_t* backend). Configs are accepted and
 * ignored. */
static Qnn_ErrorHandle_t fq_backendCreate(Qnn_LogHandle_t logger, const QnnBackend_Config_t **config,
                                          Qnn_BackendHandle_t *backend) {
    FQ_ENTRY(FN_backendCreate);
    (void)config;
    if (backend == NULL) {
        return fq_error(FN_backendCreate, QNN_BACKEND_ERROR_INVALID_ARGUMENT, "NULL backend out-parameter");
    }
    if (!fq_log_ok(logger)) {
        return fq_error(FN_backendCreate, QNN_BACKEND_ERROR_INVALID_ARGUMENT, "invalid log handle %p", logger);
    }
    uint32_t i = fq_new(K_BACKEND);
    if (i == UINT32_MAX) {
        return fq_error(FN_backendCreate, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    *backend = fq_handle(K_BACKEND, i);
    fq_log(QNN_LOG_LEVEL_INFO, "backend %p created: core API %u.%u.%u, HTP API %u.%u.%u", *backend, fq_core_api.major,
           fq_core_api.minor, fq_core_api.patch, fq_htp_api.major, fq_htp_api.minor, fq_htp_api.patch);
    return QNN_SUCCESS;
}

/* backendGetApiVersion(Qnn_ApiVersion_t* pVersion): the first provider's
 * core API version and the HTP backend API version. */
static Qnn_ErrorHandle_t fq_backendGetApiVersion(Qnn_ApiVersion_t *pVersion) {
    FQ_ENTRY(FN_backendGetApiVersion);
    if (pVersion == NULL) {
        return fq_error(FN_backendGetApiVersion, QNN_BACKEND_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    pVersion->coreApiVersion = S.nProviders > 0 ? S.providers[0].version : fq_core_api;
    pVersion->backendApiVersion = fq_htp_api;
    return QNN_SUCCESS;
}

/* backendGetBuildId(const char** id) */
static Qnn_ErrorHandle_t fq_backendGetBuildId(const char **id) {
    FQ_ENTRY(FN_backendGetBuildId);
    if (id == NULL) {
        return fq_error(FN_backendGetBuildId, QNN_BACKEND_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    *id = fq_build_id;
    return QNN_SUCCESS;
}

/* backendFree(Qnn_BackendHandle_t backend) */
static Qnn_ErrorHandle_t fq_backendFree(Qnn_BackendHandle_t backend) {
    FQ_ENTRY(FN_backendFree);
    return fq_release(FN_backendFree, K_BACKEND, backend, QNN_BACKEND_ERROR_INVALID_HANDLE, NULL);
}

/* deviceCreate(Qnn_LogHandle_t logger, const QnnDevice_Config_t** config,
 *              Qnn_DeviceHandle_t* device) */
static Qnn_ErrorHandle_t fq_deviceCreate(Qnn_LogHandle_t logger, const QnnDevice_Config_t **config,
                                         Qnn_DeviceHandle_t *device) {
    FQ_ENTRY(FN_deviceCreate);
    (void)config;
    if (!S.deviceSupported) {
        return fq_error(FN_deviceCreate, QNN_COMMON_ERROR_NOT_SUPPORTED, "device API not supported (configured)");
    }
    if (device == NULL) {
        return fq_error(FN_deviceCreate, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL device out-parameter");
    }
    if (!fq_log_ok(logger)) {
        return fq_error(FN_deviceCreate, QNN_COMMON_ERROR_INVALID_ARGUMENT, "invalid log handle %p", logger);
    }
    uint32_t i = fq_new(K_DEVICE);
    if (i == UINT32_MAX) {
        return fq_error(FN_deviceCreate, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    *device = fq_handle(K_DEVICE, i);
    if (config == NULL) {
        fq_log(QNN_LOG_LEVEL_WARN, "deviceCreate: no device config given; using the default device %d", 0);
    }
    return QNN_SUCCESS;
}

/* deviceFree(Qnn_DeviceHandle_t device) */
static Qnn_ErrorHandle_t fq_deviceFree(Qnn_DeviceHandle_t device) {
    FQ_ENTRY(FN_deviceFree);
    return fq_release(FN_deviceFree, K_DEVICE, device, QNN_DEVICE_ERROR_INVALID_HANDLE, NULL);
}

/* errorGetMessage(Qnn_ErrorHandle_t errorHandle, const char** errorMessage):
 * a static message for each known code (errorHandle & 0xFFFF). */
static Qnn_ErrorHandle_t fq_errorGetMessage(Qnn_ErrorHandle_t errorHandle, const char **errorMessage) {
    FQ_ENTRY(FN_errorGetMessage);
    if (errorMessage == NULL) {
        return fq_error(FN_errorGetMessage, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    uint32_t code = (uint32_t)(errorHandle & 0xFFFF);
    for (size_t k = 0; k < sizeof fq_error_messages / sizeof fq_error_messages[0]; k++) {
        if (fq_error_messages[k].code == code) {
            *errorMessage = fq_error_messages[k].text;
            return QNN_SUCCESS;
        }
    }
    return fq_error(FN_errorGetMessage, QNN_COMMON_ERROR_INVALID_ARGUMENT, "unknown error code %u", code);
}

/* ======================================================================== */
/* Profiling                                                                */
/* ======================================================================== */

/* profileCreate(Qnn_BackendHandle_t backend, QnnProfile_Level_t level,
 *               Qnn_ProfileHandle_t* profile) */
static Qnn_ErrorHandle_t fq_profileCreate(Qnn_BackendHandle_t backend, uint32_t level, Qnn_ProfileHandle_t *profile) {
    FQ_ENTRY(FN_profileCreate);
    if (profile == NULL) {
        return fq_error(FN_profileCreate, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL profile out-parameter");
    }
    if (fq_get(K_BACKEND, backend) == NULL) {
        return fq_error(FN_profileCreate, QNN_BACKEND_ERROR_INVALID_HANDLE, "invalid backend handle %p", backend);
    }
    if (level != QNN_PROFILE_LEVEL_BASIC && level != QNN_PROFILE_LEVEL_DETAILED) {
        return fq_error(FN_profileCreate, QNN_COMMON_ERROR_INVALID_ARGUMENT, "profile level %u is not BASIC (1) or DETAILED (2)",
                        level);
    }
    QnnProfile_EventId_t *ids = malloc(sizeof *ids);
    uint32_t i = ids == NULL ? UINT32_MAX : fq_new(K_PROFILE);
    if (i == UINT32_MAX) {
        free(ids);
        return fq_error(FN_profileCreate, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    ids[0] = fq_handle(K_EVENT, i);
    S.objs[i].profile.level = level;
    S.objs[i].profile.eventIds = ids;
    *profile = fq_handle(K_PROFILE, i);
    return QNN_SUCCESS;
}

/* fq_profile_record replaces the events of profile object p with one event.
 * A profile's event id is fq_handle(K_EVENT, p) (set by profileCreate): it
 * names the profile's current event while the profile is live and has one. */
static void fq_profile_record(uint32_t p, uint32_t type, uint64_t value) {
    S.objs[p].profile.nEvents = 1;
    S.objs[p].profile.eventType = type;
    S.objs[p].profile.eventValue = value;
}

/* profileGetEvents(Qnn_ProfileHandle_t profile,
 *                  const QnnProfile_EventId_t** profileEventIds,
 *                  uint32_t* numEvents): the events of the last profiled
 * call, owned by the profile handle. */
static Qnn_ErrorHandle_t fq_profileGetEvents(Qnn_ProfileHandle_t profile, const QnnProfile_EventId_t **profileEventIds,
                                             uint32_t *numEvents) {
    FQ_ENTRY(FN_profileGetEvents);
    fq_obj *o = fq_get(K_PROFILE, profile);
    if (o == NULL) {
        return fq_error(FN_profileGetEvents, QNN_PROFILE_ERROR_INVALID_HANDLE, "invalid profile handle %p", profile);
    }
    if (profileEventIds == NULL || numEvents == NULL) {
        return fq_error(FN_profileGetEvents, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    *profileEventIds = o->profile.eventIds;
    *numEvents = o->profile.nEvents;
    return QNN_SUCCESS;
}

/* fq_event returns the live profile whose current event eventId names, or
 * NULL. */
static fq_obj *fq_event(QnnProfile_EventId_t eventId) {
    uint64_t v = (uint64_t)(uintptr_t)eventId;
    if ((v >> 48) != FQ_HANDLE_TAG || ((v >> 32) & 0xffff) != (uint64_t)K_EVENT << 8) {
        return NULL;
    }
    uint64_t i = (v & 0xffffffffull) - 1;
    if (i >= S.nObjs || S.objs[i].kind != K_PROFILE || !S.objs[i].live || S.objs[i].profile.nEvents == 0) {
        return NULL;
    }
    return &S.objs[i];
}

/* profileGetSubEvents(QnnProfile_EventId_t eventId,
 *                     const QnnProfile_EventId_t** subEventIds,
 *                     uint32_t* numSubEvents): the fake has none. */
static Qnn_ErrorHandle_t fq_profileGetSubEvents(QnnProfile_EventId_t eventId, const QnnProfile_EventId_t **subEventIds,
                                                uint32_t *numSubEvents) {
    FQ_ENTRY(FN_profileGetSubEvents);
    if (fq_event(eventId) == NULL) {
        return fq_error(FN_profileGetSubEvents, QNN_PROFILE_ERROR_INVALID_HANDLE, "invalid event id %p", eventId);
    }
    if (subEventIds == NULL || numSubEvents == NULL) {
        return fq_error(FN_profileGetSubEvents, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    *subEventIds = NULL;
    *numSubEvents = 0;
    return QNN_SUCCESS;
}

/* profileGetEventData(QnnProfile_EventId_t eventId,
 *                     QnnProfile_EventData_t* eventData) */
static Qnn_ErrorHandle_t fq_profileGetEventData(QnnProfile_EventId_t eventId, QnnProfile_EventData_t *eventData) {
    FQ_ENTRY(FN_profileGetEventData);
    fq_obj *p = fq_event(eventId);
    if (p == NULL) {
        return fq_error(FN_profileGetEventData, QNN_PROFILE_ERROR_INVALID_HANDLE, "invalid event id %p", eventId);
    }
    if (eventData == NULL) {
        return fq_error(FN_profileGetEventData, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    eventData->type = p->profile.eventType;
    eventData->unit = QNN_PROFILE_EVENTUNIT_MICROSEC;
    eventData->value = p->profile.eventValue;
    eventData->identifier = p->profile.eventType == QNN_PROFILE_EVENTTYPE_EXECUTE ? "QNN (execute) time" : "QNN (init) time";
    return QNN_SUCCESS;
}

/* profileFree(Qnn_ProfileHandle_t profile) */
static Qnn_ErrorHandle_t fq_profileFree(Qnn_ProfileHandle_t profile) {
    FQ_ENTRY(FN_profileFree);
    fq_obj *o = NULL;
    Qnn_ErrorHandle_t err = fq_release(FN_profileFree, K_PROFILE, profile, QNN_PROFILE_ERROR_INVALID_HANDLE, &o);
    if (err == QNN_SUCCESS) {
        free(o->profile.eventIds);
        o->profile.eventIds = NULL;
        o->profile.nEvents = 0;
    }
    return err;
}

/* ======================================================================== */
/* Contexts and graphs                                                      */
/* ======================================================================== */

/* fq_binary_spill_fill is the largest spill-fill size of bin's graphs. */
static uint64_t fq_binary_spill_fill(const fq_binary *bin) {
    uint64_t m = 0;
    for (uint32_t g = 0; g < bin->nGraphs; g++) {
        if (bin->graphs[g].spillFill > m) {
            m = bin->graphs[g].spillFill;
        }
    }
    return m;
}

/* fq_grow makes room for one more element of size elem in *arr (n used,
 * *cap allocated, at most max); false when full or out of memory. */
static bool fq_grow(void **arr, uint32_t n, uint32_t *cap, size_t elem, uint32_t max) {
    if (n < *cap) {
        return true;
    }
    if (n >= max) {
        return false;
    }
    uint32_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)c * elem);
    if (p == NULL) {
        return false;
    }
    *arr = p;
    *cap = c;
    return true;
}

/* fq_context_configs checks the NULL-terminated config list of a
 * contextCreateFromBinary call and fills rec's group fields. It accepts
 * the standard options as the real library does and, as HTP custom
 * configs, only REGISTER_MULTI_CONTEXTS, which must name NULL (a new group)
 * or a live context that started a group as firstGroupHandle, and give a
 * maxSpillFillBuffer > 0. As QnnHtpContext.h says, the group's buffer is
 * the maxSpillFillBuffer its first context gave, a later value being
 * disregarded (recorded all the same); the double refuses a binary whose
 * spill-fill size exceeds that buffer (its strictness: what the real
 * library does then is not documented). */
static Qnn_ErrorHandle_t fq_context_configs(const QnnContext_Config_t **config, const fq_binary *bin,
                                            fq_context_record *rec) {
    const fq_fn fn = FN_contextCreateFromBinary;
    rec->binarySpillFill = fq_binary_spill_fill(bin);
    if (config == NULL) {
        return QNN_SUCCESS;
    }
    for (uint32_t k = 0; config[k] != NULL; k++) {
        if (k == 64) {
            return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG, "config list has no NULL terminator in 64 entries");
        }
        const QnnContext_Config_t *c = config[k];
        if (c->option != QNN_CONTEXT_CONFIG_OPTION_CUSTOM) {
            continue;
        }
        const QnnHtpContext_CustomConfig_t *h = c->customConfig;
        if (h == NULL) {
            return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG, "config %u: CUSTOM with a NULL customConfig", k);
        }
        if (h->option != QNN_HTP_CONTEXT_CONFIG_OPTION_REGISTER_MULTI_CONTEXTS) {
            return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG,
                            "config %u: HTP custom option %u is not one the test double implements (2, "
                            "REGISTER_MULTI_CONTEXTS)", k, h->option);
        }
        if (rec->group) {
            return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG, "config %u: a second group registration", k);
        }
        const QnnHtpContext_GroupRegistration_t *g = &h->groupRegistration;
        if (g->maxSpillFillBuffer == 0) {
            return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG, "config %u: group registration with maxSpillFillBuffer 0", k);
        }
        rec->group = 1;
        rec->maxSpillFill = g->maxSpillFillBuffer;
        rec->firstSeq = 0;
        if (g->firstGroupHandle != NULL) {
            fq_obj *first = fq_get(K_CONTEXT, g->firstGroupHandle);
            if (first == NULL) {
                return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG,
                                "config %u: firstGroupHandle %p is not a live context", k, g->firstGroupHandle);
            }
            const fq_context_record *fr = &S.ctxRecs[first->context.seq - 1];
            if (!fr->group || fr->firstSeq != 0) {
                return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG,
                                "config %u: firstGroupHandle %p is not the first context of a spill-fill group", k,
                                g->firstGroupHandle);
            }
            rec->firstSeq = fr->seq;
            rec->groupSpillFill = fr->groupSpillFill;
        } else {
            rec->groupSpillFill = g->maxSpillFillBuffer;
        }
        if (rec->groupSpillFill < rec->binarySpillFill) {
            return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_CONFIG,
                            "config %u: the group's spill-fill buffer of %llu bytes is smaller than the binary's "
                            "spill-fill size %llu", k, (unsigned long long)rec->groupSpillFill,
                            (unsigned long long)rec->binarySpillFill);
        }
    }
    return QNN_SUCCESS;
}

/* contextCreateFromBinary(Qnn_BackendHandle_t backend,
 *     Qnn_DeviceHandle_t device, const QnnContext_Config_t** config,
 *     const void* binaryBuffer, Qnn_ContextBinarySize_t binaryBufferSize,
 *     Qnn_ContextHandle_t* context, Qnn_ProfileHandle_t profile)
 * The binary is parsed and copied: the caller may release its buffer on
 * return (the PERSISTENT_BINARY config is accepted and changes nothing). */
static Qnn_ErrorHandle_t fq_contextCreateFromBinary(Qnn_BackendHandle_t backend, Qnn_DeviceHandle_t device,
                                                    const QnnContext_Config_t **config, const void *binaryBuffer,
                                                    uint64_t binaryBufferSize, Qnn_ContextHandle_t *context,
                                                    Qnn_ProfileHandle_t profile) {
    const fq_fn fn = FN_contextCreateFromBinary;
    FQ_ENTRY(fn);
    if (context == NULL) {
        return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "NULL context out-parameter");
    }
    if (fq_get(K_BACKEND, backend) == NULL) {
        return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "invalid backend handle %p", backend);
    }
    if (device != NULL && fq_get(K_DEVICE, device) == NULL) {
        return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "invalid device handle %p", device);
    }
    bool live = false;
    uint32_t prof = UINT32_MAX;
    if (profile != NULL) {
        prof = fq_find(K_PROFILE, profile, &live);
        if (prof == UINT32_MAX || !live) {
            return fq_error(fn, QNN_PROFILE_ERROR_INVALID_HANDLE, "invalid profile handle %p", profile);
        }
    }
    fq_arena arena = {0};
    fq_binary bin;
    char why[200];
    fq_log(QNN_LOG_LEVEL_VERBOSE, "deserializing context blob: %llu bytes at %p", (unsigned long long)binaryBufferSize,
           binaryBuffer);
    switch (fq_parse(binaryBuffer, binaryBufferSize, &arena, &bin, why, sizeof why)) {
    case FQ_PARSE_OK:
        break;
    case FQ_PARSE_EMPTY:
        fq_arena_free(&arena);
        return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_ARGUMENT, "failed to deserialize context blob: %s", why);
    case FQ_PARSE_VERSION:
        fq_arena_free(&arena);
        return fq_error(fn, QNN_CONTEXT_ERROR_BINARY_VERSION, "failed to deserialize context blob: %s", why);
    case FQ_PARSE_NOMEM:
        fq_arena_free(&arena);
        return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "failed to deserialize context blob: %s", why);
    case FQ_PARSE_MALFORMED:
        fq_arena_free(&arena);
        return fq_error(fn, QNN_CONTEXT_ERROR_CREATE_FROM_BINARY, "failed to deserialize context blob: malformed binary: %s",
                        why);
    }
    fq_context_record rec = {0};
    Qnn_ErrorHandle_t cerr = fq_context_configs(config, &bin, &rec);
    if (cerr != QNN_SUCCESS) {
        fq_arena_free(&arena);
        return cerr;
    }
    if (!fq_grow((void **)&S.ctxRecs, S.nCtxRecs, &S.capCtxRecs, sizeof *S.ctxRecs, FQ_MAX_CONTEXT_RECORDS)) {
        fq_arena_free(&arena);
        return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory (context records)");
    }
    uint64_t *graphHandle = fq_alloc(&arena, (size_t)bin.nGraphs * sizeof *graphHandle);
    uint32_t i = graphHandle == NULL ? UINT32_MAX : fq_new(K_CONTEXT);
    if (i == UINT32_MAX) {
        fq_arena_free(&arena);
        return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    S.objs[i].context.arena = arena;
    S.objs[i].context.bin = bin;
    S.objs[i].context.graphHandle = graphHandle;
    rec.seq = ++S.nCtxRecs;
    S.ctxRecs[rec.seq - 1] = rec;
    S.objs[i].context.seq = (uint32_t)rec.seq;
    if (prof != UINT32_MAX) {
        fq_profile_record(prof, QNN_PROFILE_EVENTTYPE_INIT, S.profileMicros);
    }
    *context = fq_handle(K_CONTEXT, i);
    fq_log(QNN_LOG_LEVEL_INFO, "context %p created from %llu bytes: %u graph(s), SoC %u, build \"%s\"", *context,
           (unsigned long long)binaryBufferSize, bin.nGraphs, bin.socModel, bin.buildId);
    return QNN_SUCCESS;
}

/* contextFree(Qnn_ContextHandle_t context, Qnn_ProfileHandle_t profile).
 * A context with registered memory handles is not freed: that is reported
 * as QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED (deregister first). */
static Qnn_ErrorHandle_t fq_contextFree(Qnn_ContextHandle_t context, Qnn_ProfileHandle_t profile) {
    FQ_ENTRY(FN_contextFree);
    (void)profile;
    fq_obj *o = fq_get(K_CONTEXT, context);
    if (o != NULL && o->context.liveMem > 0) {
        return fq_error(FN_contextFree, QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED,
                        "context %p still has %u registered memory handles; memDeRegister them first", context,
                        o->context.liveMem);
    }
    Qnn_ErrorHandle_t err = fq_release(FN_contextFree, K_CONTEXT, context, QNN_CONTEXT_ERROR_INVALID_HANDLE, &o);
    if (err != QNN_SUCCESS) {
        return err;
    }
    /* Its graph handles die with it (their objects check the context). */
    if (o->context.seq > 0) {
        S.ctxRecs[o->context.seq - 1].freed = ++S.nContextFrees;
    }
    fq_arena_free(&o->context.arena);
    o->context.graphHandle = NULL;
    memset(&o->context.bin, 0, sizeof o->context.bin);
    return QNN_SUCCESS;
}

/* graphRetrieve(Qnn_ContextHandle_t contextHandle, const char* graphName,
 *               Qnn_GraphHandle_t* graphHandle): the same handle for the
 * same graph every time. */
static Qnn_ErrorHandle_t fq_graphRetrieve(Qnn_ContextHandle_t contextHandle, const char *graphName,
                                          Qnn_GraphHandle_t *graphHandle) {
    FQ_ENTRY(FN_graphRetrieve);
    bool live = false;
    uint32_t c = fq_find(K_CONTEXT, contextHandle, &live);
    if (c == UINT32_MAX || !live) {
        return fq_error(FN_graphRetrieve, QNN_CONTEXT_ERROR_INVALID_HANDLE, "invalid context handle %p", contextHandle);
    }
    if (graphName == NULL || graphHandle == NULL) {
        return fq_error(FN_graphRetrieve, QNN_GRAPH_ERROR_INVALID_ARGUMENT, "NULL graph name or out-parameter");
    }
    const fq_binary *bin = &S.objs[c].context.bin;
    for (uint32_t g = 0; g < bin->nGraphs; g++) {
        if (strcmp(bin->graphs[g].name, graphName) != 0) {
            continue;
        }
        if (S.objs[c].context.graphHandle[g] == 0) {
            uint32_t i = fq_new(K_GRAPH);
            if (i == UINT32_MAX) {
                return fq_error(FN_graphRetrieve, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
            }
            S.objs[i].graph.context = c;
            S.objs[i].graph.graph = g;
            S.objs[c].context.graphHandle[g] = (uint64_t)(uintptr_t)fq_handle(K_GRAPH, i);
        }
        *graphHandle = (Qnn_GraphHandle_t)(uintptr_t)S.objs[c].context.graphHandle[g];
        return QNN_SUCCESS;
    }
    return fq_error(FN_graphRetrieve, QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST, "no graph named \"%s\" in context %p",
                    graphName, contextHandle);
}

/* ---- graphExecute --------------------------------------------------------- */

/* An execute argument matched to its graph tensor. */
typedef struct {
    const fq_tensor *graph; /* the graph's declaration */
    uint32_t position;      /* index in the graph's inputs or outputs */
    uint8_t *data;          /* client buffer or registered memory */
    uint64_t bytes;
    bool memHandle;
} fq_bound;

/* fq_bind checks the tensors passed to graphExecute (n of them) against the
 * graph's list decl (nDecl tensors) and fills bound[] in graph order. Each
 * graph tensor must be passed exactly once, matched by id. */
static Qnn_ErrorHandle_t fq_bind(const char *what, uint32_t context, const fq_tensor *decl, uint32_t nDecl,
                                 const Qnn_Tensor_t *ts, uint32_t n, fq_bound *bound) {
    const fq_fn fn = FN_graphExecute;
    if (n != nDecl) {
        return fq_error(fn, QNN_GRAPH_ERROR_INVALID_ARGUMENT, "%u %ss passed, the graph has %u", n, what, nDecl);
    }
    if (n > 0 && ts == NULL) {
        return fq_error(fn, QNN_GRAPH_ERROR_INVALID_ARGUMENT, "NULL %s array", what);
    }
    for (uint32_t k = 0; k < nDecl; k++) {
        bound[k].graph = NULL;
    }
    for (uint32_t k = 0; k < n; k++) {
        const Qnn_Tensor_t *t = &ts[k];
        if (t->version != QNN_TENSOR_VERSION_1 && t->version != QNN_TENSOR_VERSION_2) {
            return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s %u: tensor version %u", what, k, t->version);
        }
        const Qnn_TensorV1_t *v = &t->v1; /* v1 is a prefix of v2 */
        uint32_t m = 0;
        while (m < nDecl && decl[m].id != v->id) {
            m++;
        }
        if (m == nDecl) {
            return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s %u: no graph %s has id %u", what, k, what, v->id);
        }
        const fq_tensor *d = &decl[m];
        if (bound[m].graph != NULL) {
            return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s %u: id %u (\"%s\") passed twice", what, k, v->id,
                            d->name);
        }
        if (v->dataType != d->dataType) {
            return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s \"%s\": data type 0x%x, the graph's is 0x%x", what,
                            d->name, v->dataType, d->dataType);
        }
        if (v->rank != d->rank) {
            return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s \"%s\": rank %u, the graph's is %u", what, d->name,
                            v->rank, d->rank);
        }
        if (v->rank > 0 && v->dimensions == NULL) {
            return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s \"%s\": NULL dimensions", what, d->name);
        }
        for (uint32_t r = 0; r < v->rank; r++) {
            if (v->dimensions[r] != d->dims[r]) {
                return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s \"%s\": dimension %u is %u, the graph's is %u",
                                what, d->name, r, v->dimensions[r], d->dims[r]);
            }
        }
        uint64_t bytes = d->elements * fq_elem_size(d->dataType);
        fq_bound *b = &bound[m];
        b->graph = d;
        b->position = m;
        b->bytes = bytes;
        switch (v->memType) {
        case QNN_TENSORMEMTYPE_RAW:
            if (v->clientBuf.data == NULL) {
                return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s \"%s\": NULL client buffer", what, d->name);
            }
            if ((uint64_t)v->clientBuf.dataSize != bytes) {
                return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR,
                                "%s \"%s\": client buffer of %u bytes, the tensor has %llu", what, d->name,
                                v->clientBuf.dataSize, (unsigned long long)bytes);
            }
            b->data = v->clientBuf.data;
            b->memHandle = false;
            break;
        case QNN_TENSORMEMTYPE_MEMHANDLE: {
            fq_obj *mh = fq_get(K_MEM, v->memHandle);
            if (mh == NULL) {
                return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s \"%s\": memory handle %p is not registered",
                                what, d->name, v->memHandle);
            }
            if (mh->mem.context != context) {
                return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR,
                                "%s \"%s\": memory handle %p belongs to another context", what, d->name, v->memHandle);
            }
            const fq_obj *buf = &S.objs[mh->mem.rpcmem];
            if (!buf->live) {
                return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR,
                                "%s \"%s\": the rpcmem buffer of memory handle %p was freed", what, d->name,
                                v->memHandle);
            }
            if (mh->mem.size < bytes) {
                return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR,
                                "%s \"%s\": memory handle %p covers %llu bytes, the tensor has %llu", what, d->name,
                                v->memHandle, (unsigned long long)mh->mem.size, (unsigned long long)bytes);
            }
            b->data = (uint8_t *)buf->rpcmem.base + mh->mem.offset;
            b->memHandle = true;
            break;
        }
        default:
            return fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR, "%s \"%s\": memType %u is not RAW (0) or MEMHANDLE (1)",
                            what, d->name, v->memType);
        }
    }
    return QNN_SUCCESS;
}

/* fq_compute writes the outputs as the contract's deterministic function of
 * every input (mirrored by qnnfake.Expected; keep the two identical):
 *   s_m    = (sum_i x_m[i] * (1 + 0.25*(i mod 7))) / n_m
 *   y_j[i] = x_0[i mod n_0] * (1 + 0.5*j) + 0.01 * sum_m (m+1)*s_m + 0.125*j
 * The library is compiled with -ffp-contract=off, so every operation rounds
 * as written. */
static void fq_compute(const fq_bound *in, uint32_t nIn, const fq_bound *out, uint32_t nOut) {
    fq_init_half_table();
    double total = 0;
    for (uint32_t m = 0; m < nIn; m++) {
        double sum = 0;
        uint64_t n = in[m].graph->elements;
        unsigned k = 0; /* i mod 7, without a division per element */
        for (uint64_t i = 0; i < n; i++) {
            sum += fq_load(in[m].graph, in[m].data, i) * (1 + 0.25 * (double)k);
            k = k == 6 ? 0 : k + 1;
        }
        total += (double)(m + 1) * (sum / (double)n);
    }
    double common = 0.01 * total;
    for (uint32_t j = 0; j < nOut; j++) {
        double gain = 1 + 0.5 * j, bias = 0.125 * j;
        uint64_t n = out[j].graph->elements;
        uint64_t n0 = nIn > 0 ? in[0].graph->elements : 1;
        for (uint64_t i = 0; i < n; i++) {
            double x0 = nIn > 0 ? fq_load(in[0].graph, in[0].data, i % n0) : 0;
            fq_store(out[j].graph, out[j].data, i, x0 * gain + common + bias);
        }
    }
}

/* graphExecute(Qnn_GraphHandle_t graphHandle, const Qnn_Tensor_t* inputs,
 *     uint32_t numInputs, Qnn_Tensor_t* outputs, uint32_t numOutputs,
 *     Qnn_ProfileHandle_t profileHandle, Qnn_SignalHandle_t signalHandle)
 * Validates every tensor against the graph (QNN_GRAPH_ERROR_* naming
 * nothing; the details go to the last error), counts the input bytes read,
 * computes the outputs (unless in empty-execute mode) and records an
 * EXECUTE profile event. */
static Qnn_ErrorHandle_t fq_graphExecute(Qnn_GraphHandle_t graphHandle, const Qnn_Tensor_t *inputs, uint32_t numInputs,
                                         Qnn_Tensor_t *outputs, uint32_t numOutputs, Qnn_ProfileHandle_t profileHandle,
                                         Qnn_SignalHandle_t signalHandle) {
    const fq_fn fn = FN_graphExecute;
    /* FAKEQNN_EXECUTE_SLEEP_MS=n: block n ms first, as a device call that
     * ignores its caller's cancellation does (a signal does not cut the
     * sleep short); outside the lock, so other calls proceed. */
    const char *sleepMS = getenv("FAKEQNN_EXECUTE_SLEEP_MS");
    if (sleepMS != NULL) {
        long ms = strtol(sleepMS, NULL, 10);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
        while (ms > 0 && nanosleep(&req, &rem) != 0 && errno == EINTR) {
            req = rem;
        }
    }
    FQ_ENTRY(fn);
    fq_obj *g = fq_get(K_GRAPH, graphHandle);
    if (g == NULL || !S.objs[g->graph.context].live) {
        return fq_error(fn, QNN_GRAPH_ERROR_INVALID_HANDLE, "invalid graph handle %p%s", graphHandle,
                        g != NULL ? " (its context was freed)" : "");
    }
    uint32_t context = g->graph.context;
    const fq_graph *gr = &S.objs[context].context.bin.graphs[g->graph.graph];
    uint32_t prof = UINT32_MAX;
    if (profileHandle != NULL) {
        bool live = false;
        prof = fq_find(K_PROFILE, profileHandle, &live);
        if (prof == UINT32_MAX || !live) {
            return fq_error(fn, QNN_PROFILE_ERROR_INVALID_HANDLE, "invalid profile handle %p", profileHandle);
        }
    }
    if (signalHandle != NULL) {
        return fq_error(fn, QNN_GRAPH_ERROR_INVALID_ARGUMENT, "signals are not supported by the test double");
    }
    fq_bound *in = calloc((size_t)gr->nInputs + gr->nOutputs + 1, sizeof *in);
    if (in == NULL) {
        return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    fq_bound *out = in + gr->nInputs;
    Qnn_ErrorHandle_t err = fq_bind("input", context, gr->inputs, gr->nInputs, inputs, numInputs, in);
    if (err == QNN_SUCCESS) {
        err = fq_bind("output", context, gr->outputs, gr->nOutputs, outputs, numOutputs, out);
    }
    if (err == QNN_SUCCESS) {
        for (uint32_t k = 0; k < gr->nInputs + gr->nOutputs && err == QNN_SUCCESS; k++) {
            const fq_tensor *t = in[k].graph;
            if (!fq_computable(t)) {
                err = fq_error(fn, QNN_GRAPH_ERROR_INVALID_TENSOR,
                               "tensor \"%s\": data type 0x%x (or its quantization) is not one the test double computes",
                               t->name, t->dataType);
            }
        }
    }
    if (err == QNN_SUCCESS) {
        for (uint32_t m = 0; m < gr->nInputs; m++) {
            if (in[m].memHandle) {
                S.memHandleBytesRead += in[m].bytes;
            } else {
                S.rawBytesRead += in[m].bytes;
            }
        }
        for (uint32_t j = 0; j < gr->nOutputs; j++) {
            if (out[j].memHandle) {
                S.memHandleBytesWritten += out[j].bytes;
            }
        }
        if (!S.emptyExecute) {
            fq_compute(in, gr->nInputs, out, gr->nOutputs);
        }
        if (fq_grow((void **)&S.execRecs, S.nExecRecs, &S.capExecRecs, sizeof *S.execRecs, FQ_MAX_EXEC_RECORDS)) {
            fq_exec_record *er = &S.execRecs[S.nExecRecs++];
            memset(er, 0, sizeof *er);
            er->seq = S.objs[context].context.seq;
            er->nIn = gr->nInputs;
            er->nOut = gr->nOutputs;
            snprintf(er->graph, sizeof er->graph, "%s", gr->name);
            for (uint32_t k = 0; k < gr->nInputs + gr->nOutputs && k < FQ_EXEC_ADDRS; k++) {
                er->addr[k] = (uint64_t)(uintptr_t)in[k].data;
            }
        }
        if (prof != UINT32_MAX) {
            fq_profile_record(prof, QNN_PROFILE_EVENTTYPE_EXECUTE, S.profileMicros);
        }
        fq_log(QNN_LOG_LEVEL_DEBUG, "graphExecute \"%s\": %u inputs, %u outputs, execute %llu, %.3f ms (profile %p)",
               gr->name, numInputs, numOutputs, (unsigned long long)S.calls[fn], (double)S.profileMicros / 1000.0,
               profileHandle);
    }
    free(in);
    return err;
}

/* ======================================================================== */
/* System API: context-binary metadata                                      */
/* ======================================================================== */

/* fq_meta_tensors lays out n tensors as the Qnn_Tensor_t array the metadata
 * reports: the configured tensor version (1, or 2 with the v2 fields; any
 * other value is reported as is with the v2 fields), memType RAW and no
 * buffer. The array stride is sizeof(Qnn_Tensor_t) = 144 in every version. */
static Qnn_Tensor_t *fq_meta_tensors(fq_arena *a, const fq_tensor *ts, uint32_t n, uint32_t type) {
    Qnn_Tensor_t *out = fq_alloc(a, (size_t)n * sizeof *out);
    if (out == NULL) {
        return NULL;
    }
    for (uint32_t k = 0; k < n; k++) {
        const fq_tensor *t = &ts[k];
        Qnn_Tensor_t *q = &out[k];
        q->version = S.tensorVersion;
        Qnn_TensorV1_t *v = &q->v1; /* the v1 fields are a prefix of v2 */
        v->id = t->id;
        v->name = t->name;
        v->type = type;
        v->dataFormat = QNN_TENSOR_DATA_FORMAT_DENSE;
        v->dataType = t->dataType;
        v->quantizeParams.encodingDefinition = t->encodingDefinition;
        v->quantizeParams.quantizationEncoding = t->quantizationEncoding;
        v->quantizeParams.scaleOffsetEncoding.scale = t->scale;
        v->quantizeParams.scaleOffsetEncoding.offset = t->offset;
        v->rank = t->rank;
        v->dimensions = t->dims;
        v->memType = QNN_TENSORMEMTYPE_RAW;
        if (q->version != QNN_TENSOR_VERSION_1) {
            q->v2.isDynamicDimensions = NULL;
            q->v2.isProduced = 0;
        }
    }
    return out;
}

/* fq_platform_info builds the platform info of binary info v2/v3: one
 * on-chip HTP device with one core, reporting the binary's SoC and arch. */
static QnnDevice_PlatformInfo_t *fq_platform_info(fq_arena *a, const fq_binary *bin) {
    QnnDevice_PlatformInfo_t *pi = fq_alloc(a, sizeof *pi);
    QnnDevice_HardwareDeviceInfo_t *hw = fq_alloc(a, sizeof *hw);
    QnnDevice_CoreInfo_t *core = fq_alloc(a, sizeof *core);
    QnnHtpDevice_DeviceInfoExtension_t *ext = fq_alloc(a, sizeof *ext);
    if (pi == NULL || hw == NULL || core == NULL || ext == NULL) {
        return NULL;
    }
    core->version = 1;
    ext->devType = 0; /* ON_CHIP */
    ext->onChipDevice.vtcmSize = 8;
    ext->onChipDevice.socModel = bin->socModel;
    ext->onChipDevice.signedPdSupport = 1;
    ext->onChipDevice.dlbcSupport = 1;
    ext->onChipDevice.arch = bin->arch;
    hw->version = 1;
    hw->v1.numCores = 1;
    hw->v1.cores = core;
    hw->v1.deviceInfoExtension = ext;
    pi->version = 1;
    pi->v1.numHwDevices = 1;
    pi->v1.hwDevices = hw;
    return pi;
}

/* fq_binary_info lays out the metadata of bin as configured: binary-info
 * version 1 or 2 (V1/V2 layout), 3 or anything else (V3 layout); graph
 * info version 3 in 88-byte entries, or version 1 in the 64-byte entries
 * of older libraries. Returns NULL when out of memory. */
static const QnnSystemContext_BinaryInfo_t *fq_binary_info(fq_arena *a, const fq_binary *bin) {
    QnnSystemContext_BinaryInfo_t *info = fq_alloc(a, sizeof *info);
    size_t stride = S.graphInfoV3 ? sizeof(QnnSystemContext_GraphInfo_t) : sizeof(fq_OldGraphInfo_t);
    uint8_t *graphs = fq_alloc(a, stride * bin->nGraphs);
    QnnDevice_PlatformInfo_t *platform = fq_platform_info(a, bin);
    if (info == NULL || graphs == NULL || platform == NULL) {
        return NULL;
    }
    for (uint32_t g = 0; g < bin->nGraphs; g++) {
        const fq_graph *gr = &bin->graphs[g];
        uint8_t *entry = graphs + g * stride;
        /* graphInfoV1/V2/V3 all start at offset 8 with the same fields */
        QnnSystemContext_GraphInfoV1_t *v1 = (QnnSystemContext_GraphInfoV1_t *)(entry + 8);
        v1->graphName = gr->name;
        v1->numGraphInputs = gr->nInputs;
        v1->graphInputs = fq_meta_tensors(a, gr->inputs, gr->nInputs, QNN_TENSOR_TYPE_APP_WRITE);
        v1->numGraphOutputs = gr->nOutputs;
        v1->graphOutputs = fq_meta_tensors(a, gr->outputs, gr->nOutputs, QNN_TENSOR_TYPE_APP_READ);
        if (v1->graphInputs == NULL || v1->graphOutputs == NULL) {
            return NULL;
        }
        if (S.graphInfoV3) {
            QnnSystemContext_GraphInfo_t *gi = (QnnSystemContext_GraphInfo_t *)entry;
            gi->version = QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_3;
            QnnHtpSystemContext_GraphBlobInfo_t *blob = fq_alloc(a, sizeof *blob);
            if (blob == NULL) {
                return NULL;
            }
            blob->version = QNN_SYSTEM_CONTEXT_HTP_GRAPH_INFO_BLOB_VERSION_V1;
            blob->contextBinaryGraphBlobInfoV1.spillFillBufferSize = gr->spillFill;
            blob->contextBinaryGraphBlobInfoV1.vtcmSize = 8;
            blob->contextBinaryGraphBlobInfoV1.optimizationLevel = 3;
            blob->contextBinaryGraphBlobInfoV1.numHvxThreads = 4;
            gi->graphInfoV3.graphBlobInfoSize = sizeof *blob;
            gi->graphInfoV3.graphBlobInfo = blob;
        } else {
            ((fq_OldGraphInfo_t *)entry)->version = QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_1;
        }
    }
    const Qnn_Version_t blobVersion = {2, 3, 0}; /* the binary's format version */
    info->version = S.binaryInfoVersion;
    if (info->version == QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_1 ||
        info->version == QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_2) {
        /* V2 is V1 plus platformInfo */
        QnnSystemContext_BinaryInfoV2_t *v = &info->contextBinaryInfoV2;
        v->backendId = QNN_BACKEND_ID_HTP;
        v->buildId = bin->buildId;
        v->coreApiVersion = fq_core_api;
        v->backendApiVersion = fq_htp_api;
        v->socVersion = NULL; /* the fake reports no SoC version string */
        v->contextBlobVersion = blobVersion;
        v->contextBlobSize = bin->payloadSize;
        v->numGraphs = bin->nGraphs;
        v->graphs = graphs;
        QnnHtpSystemContext_HwBlobInfo_t *hw = fq_alloc(a, sizeof *hw);
        if (hw == NULL) {
            return NULL;
        }
        hw->version = QNN_SYSTEM_CONTEXT_HTP_HW_INFO_BLOB_VERSION_V1;
        hw->contextBinaryHwInfoBlobV1_t.spillFillBufferSize = fq_binary_spill_fill(bin);
        v->hwInfoBlobVersion = (Qnn_Version_t){1, 0, 0};
        v->hwInfoBlobSize = sizeof *hw;
        v->hwInfoBlob = hw;
        if (info->version == QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_2) {
            v->platformInfo = platform;
        }
    } else {
        QnnSystemContext_BinaryInfoV3_t *v = &info->contextBinaryInfoV3;
        v->backendId = QNN_BACKEND_ID_HTP;
        v->buildId = bin->buildId;
        v->coreApiVersion = fq_core_api;
        v->backendApiVersion = fq_htp_api;
        v->socVersion = NULL;
        v->contextBlobVersion = blobVersion;
        v->contextBlobSize = bin->payloadSize;
        v->numGraphs = bin->nGraphs;
        v->graphs = graphs;
        v->platformInfo = platform;
        v->socModel = bin->socModel;
    }
    return info;
}

/* systemContextCreate(QnnSystemContext_Handle_t* sysCtxHandle) */
static Qnn_ErrorHandle_t fq_systemContextCreate(QnnSystemContext_Handle_t *sysCtxHandle) {
    FQ_ENTRY(FN_systemContextCreate);
    if (sysCtxHandle == NULL) {
        return fq_error(FN_systemContextCreate, QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    uint32_t i = fq_new(K_SYSCTX);
    if (i == UINT32_MAX) {
        return fq_error(FN_systemContextCreate, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    *sysCtxHandle = fq_handle(K_SYSCTX, i);
    return QNN_SUCCESS;
}

/* fq_metadata is the common part of systemContextGetMetaData and
 * systemContextGetBinaryInfo: parse the binary and lay out its metadata in
 * memory owned by the handle, replacing (and poisoning) what the previous
 * call on the handle returned. */
static Qnn_ErrorHandle_t fq_metadata(fq_fn fn, QnnSystemContext_Handle_t h, const void *buf, uint64_t size,
                                     const QnnSystemContext_BinaryInfo_t **binaryInfo) {
    fq_obj *o = fq_get(K_SYSCTX, h);
    if (o == NULL) {
        return fq_error(fn, QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE, "invalid system context handle %p", h);
    }
    if (binaryInfo == NULL) {
        return fq_error(fn, QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT, "NULL binaryInfo out-parameter");
    }
    fq_arena_free(&o->sysctx.arena);
    fq_binary bin;
    char why[200];
    switch (fq_parse(buf, size, &o->sysctx.arena, &bin, why, sizeof why)) {
    case FQ_PARSE_OK:
        break;
    case FQ_PARSE_EMPTY:
        return fq_error(fn, QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT, "%s", why);
    case FQ_PARSE_NOMEM:
        return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "%s", why);
    case FQ_PARSE_VERSION:
    case FQ_PARSE_MALFORMED:
        return fq_error(fn, QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY, "malformed binary: %s", why);
    }
    const QnnSystemContext_BinaryInfo_t *info = fq_binary_info(&o->sysctx.arena, &bin);
    if (info == NULL) {
        return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    *binaryInfo = info;
    return QNN_SUCCESS;
}

/* systemContextGetMetaData(QnnSystemContext_Handle_t sysCtxHandle,
 *     const void* binaryBuffer, uint64_t binaryBufferSize,
 *     const QnnSystemContext_BinaryInfo_t** binaryInfo) */
static Qnn_ErrorHandle_t fq_systemContextGetMetaData(QnnSystemContext_Handle_t sysCtxHandle, const void *binaryBuffer,
                                                     uint64_t binaryBufferSize,
                                                     const QnnSystemContext_BinaryInfo_t **binaryInfo) {
    FQ_ENTRY(FN_systemContextGetMetaData);
    return fq_metadata(FN_systemContextGetMetaData, sysCtxHandle, binaryBuffer, binaryBufferSize, binaryInfo);
}

/* systemContextGetBinaryInfo(QnnSystemContext_Handle_t sysCtxHandle,
 *     void* binaryBuffer, uint64_t binaryBufferSize,
 *     const QnnSystemContext_BinaryInfo_t** binaryInfo,
 *     Qnn_ContextBinarySize_t* binaryInfoSize): deprecated; as observed with
 * the real library, binaryInfoSize must not be NULL (30001) and is left 0. */
static Qnn_ErrorHandle_t fq_systemContextGetBinaryInfo(QnnSystemContext_Handle_t sysCtxHandle, void *binaryBuffer,
                                                       uint64_t binaryBufferSize,
                                                       const QnnSystemContext_BinaryInfo_t **binaryInfo,
                                                       uint64_t *binaryInfoSize) {
    const fq_fn fn = FN_systemContextGetBinaryInfo;
    FQ_ENTRY(fn);
    if (fq_get(K_SYSCTX, sysCtxHandle) == NULL) {
        return fq_error(fn, QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE, "invalid system context handle %p", sysCtxHandle);
    }
    if (binaryInfoSize == NULL) {
        return fq_error(fn, QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT, "NULL binaryInfoSize out-parameter");
    }
    *binaryInfoSize = 0;
    return fq_metadata(fn, sysCtxHandle, binaryBuffer, binaryBufferSize, binaryInfo);
}

/* systemContextFree(QnnSystemContext_Handle_t sysCtxHandle) */
static Qnn_ErrorHandle_t fq_systemContextFree(QnnSystemContext_Handle_t sysCtxHandle) {
    FQ_ENTRY(FN_systemContextFree);
    fq_obj *o = NULL;
    Qnn_ErrorHandle_t err = fq_release(FN_systemContextFree, K_SYSCTX, sysCtxHandle,
                                       QNN_SYSTEM_COMMON_ERROR_INVALID_HANDLE, &o);
    if (err == QNN_SUCCESS) {
        fq_arena_free(&o->sysctx.arena);
    }
    return err;
}

/* ======================================================================== */
/* rpcmem (libcdsprpc.so) and shared-memory registration                   */
/* ======================================================================== */

#ifndef FAKEQNN_NO_RPCMEM
/* fq_rpcmem_by_base returns the index of the live rpcmem buffer starting at
 * p, or UINT32_MAX. */
static uint32_t fq_rpcmem_by_base(const void *p) {
    for (uint32_t i = 0; i < S.nObjs; i++) {
        if (S.objs[i].kind == K_RPCMEM && S.objs[i].live && S.objs[i].rpcmem.base == p) {
            return i;
        }
    }
    return UINT32_MAX;
}

#endif

/* fq_rpcmem_by_fd returns the index of the live rpcmem buffer with file
 * descriptor fd, or UINT32_MAX. */
static uint32_t fq_rpcmem_by_fd(int32_t fd) {
    for (uint32_t i = 0; i < S.nObjs; i++) {
        if (S.objs[i].kind == K_RPCMEM && S.objs[i].live && S.objs[i].rpcmem.fd == fd) {
            return i;
        }
    }
    return UINT32_MAX;
}

#ifndef FAKEQNN_NO_RPCMEM
/* void* rpcmem_alloc(int heapid, uint32_t flags, int size): page-aligned
 * anonymous memory standing for DSP-visible shared memory. Returns NULL
 * when rpcmem is configured unavailable, on an injected failure or for a
 * size <= 0. The heap id and flags are accepted as given. */
FQ_EXPORT void *rpcmem_alloc(int heapid, uint32_t flags, int size) {
    FQ_LOCK();
    Qnn_ErrorHandle_t injected;
    if (fq_enter(FN_rpcmem_alloc, &injected)) {
        return NULL;
    }
    (void)heapid;
    (void)flags;
    if (!S.rpcmemAvailable) {
        fq_error(FN_rpcmem_alloc, QNN_COMMON_ERROR_RESOURCE_UNAVAILABLE, "rpcmem is unavailable (configured)");
        return NULL;
    }
    if (size <= 0) {
        fq_error(FN_rpcmem_alloc, QNN_COMMON_ERROR_INVALID_ARGUMENT, "size %d", size);
        return NULL;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t mapped = ((size_t)size + page - 1) / page * page;
    void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fq_error(FN_rpcmem_alloc, QNN_COMMON_ERROR_MEM_ALLOC, "cannot map %d bytes", size);
        return NULL;
    }
    uint32_t i = fq_new(K_RPCMEM);
    if (i == UINT32_MAX) {
        munmap(p, mapped);
        fq_error(FN_rpcmem_alloc, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
        return NULL;
    }
    S.objs[i].rpcmem.base = p;
    S.objs[i].rpcmem.size = (uint64_t)size;
    S.objs[i].rpcmem.mapped = mapped;
    S.objs[i].rpcmem.fd = (int32_t)(1000 + i); /* unique, never reused */
    return p;
}

/* void rpcmem_free(void* po): an unknown or already freed pointer counts as
 * a double free. Freeing a buffer that still has registered memory handles
 * is recorded as the last error; executes with those handles then fail.
 * Injected failures are counted but have no effect (the call returns
 * nothing). */
FQ_EXPORT void rpcmem_free(void *po) {
    FQ_LOCK();
    Qnn_ErrorHandle_t injected;
    (void)fq_enter(FN_rpcmem_free, &injected);
    uint32_t i = fq_rpcmem_by_base(po);
    if (i == UINT32_MAX) {
        S.doubleFrees++;
        fq_error(FN_rpcmem_free, QNN_COMMON_ERROR_INVALID_ARGUMENT, "%p is not a live rpcmem buffer", po);
        return;
    }
    uint32_t registered = 0;
    for (uint32_t k = 0; k < S.nObjs; k++) {
        if (S.objs[k].kind == K_MEM && S.objs[k].live && S.objs[k].mem.rpcmem == i) {
            registered++;
        }
    }
    if (registered > 0) {
        fq_error(FN_rpcmem_free, QNN_COMMON_ERROR_OPERATION_NOT_PERMITTED,
                 "buffer %p freed with %u memory handles still registered", po, registered);
    }
    S.objs[i].live = false;
    munmap(S.objs[i].rpcmem.base, S.objs[i].rpcmem.mapped);
}

/* int rpcmem_to_fd(void* po): the buffer's file descriptor, -1 for a
 * pointer that is not the start of a live buffer or on an injected
 * failure. */
FQ_EXPORT int rpcmem_to_fd(void *po) {
    FQ_LOCK();
    Qnn_ErrorHandle_t injected;
    if (fq_enter(FN_rpcmem_to_fd, &injected)) {
        return -1;
    }
    uint32_t i = fq_rpcmem_by_base(po);
    if (i == UINT32_MAX) {
        fq_error(FN_rpcmem_to_fd, QNN_COMMON_ERROR_INVALID_ARGUMENT, "%p is not the start of a live rpcmem buffer", po);
        return -1;
    }
    return S.objs[i].rpcmem.fd;
}
#endif

/* A validated memory descriptor, before its handle exists. */
typedef struct {
    uint32_t rpcmem;
    uint64_t offset, size;
    int32_t fd;
    uint32_t memType;
    uint32_t dataType;
} fq_region;

/* fq_check_descriptor validates one Qnn_MemDescriptor_t of memRegister. */
static Qnn_ErrorHandle_t fq_check_descriptor(uint32_t k, const Qnn_MemDescriptor_t *d, fq_region *r) {
    const fq_fn fn = FN_memRegister;
    uint32_t elem = fq_elem_size(d->dataType);
    if (elem == 0) {
        return fq_error(fn, QNN_MEM_ERROR_INVALID_ARGUMENT, "descriptor %u: data type 0x%x", k, d->dataType);
    }
    if (d->memShape.numDim == 0 || d->memShape.dimSize == NULL) {
        return fq_error(fn, QNN_MEM_ERROR_INVALID_SHAPE, "descriptor %u: empty shape", k);
    }
    uint64_t bytes = elem;
    for (uint32_t i = 0; i < d->memShape.numDim; i++) {
        uint32_t dim = d->memShape.dimSize[i];
        if (dim == 0 || bytes > (UINT64_C(1) << 48) / dim) {
            return fq_error(fn, QNN_MEM_ERROR_INVALID_SHAPE, "descriptor %u: dimension %u is %u", k, i, dim);
        }
        bytes *= dim;
    }
    r->memType = d->memType;
    r->dataType = d->dataType;
    r->size = bytes;
    switch (d->memType) {
    case QNN_MEM_TYPE_ION:
        r->fd = d->ionInfo.fd;
        r->offset = 0;
        break;
    case QNN_MEM_TYPE_CUSTOM: {
        const QnnMemHtp_Descriptor_t *h = d->customInfo;
        if (h == NULL) {
            return fq_error(fn, QNN_MEM_ERROR_INVALID_ARGUMENT, "descriptor %u: CUSTOM with NULL customInfo", k);
        }
        if (h->type != QNN_HTP_MEM_SHARED_BUFFER) {
            return fq_error(fn, QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE, "descriptor %u: HTP memory type %u is not SHARED_BUFFER (1)",
                            k, h->type);
        }
        r->fd = h->sharedBufferConfig.fd;
        r->offset = h->sharedBufferConfig.offset;
        if (r->offset > h->size || bytes > h->size - r->offset) {
            return fq_error(fn, QNN_MEM_ERROR_INVALID_SHAPE,
                            "descriptor %u: %llu bytes at offset %llu exceed the shared buffer's declared %llu", k,
                            (unsigned long long)bytes, (unsigned long long)r->offset, (unsigned long long)h->size);
        }
        break;
    }
    default:
        return fq_error(fn, QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE, "descriptor %u: memType %u is not ION (1) or CUSTOM (2)", k,
                        d->memType);
    }
    r->rpcmem = fq_rpcmem_by_fd(r->fd);
    if (r->rpcmem == UINT32_MAX) {
        return fq_error(fn, QNN_MEM_ERROR_MAPPING, "descriptor %u: fd %d is not a live rpcmem buffer", k, r->fd);
    }
    uint64_t have = S.objs[r->rpcmem].rpcmem.size;
    if (r->offset > have || bytes > have - r->offset) {
        return fq_error(fn, QNN_MEM_ERROR_INVALID_SHAPE,
                        "descriptor %u: %llu bytes at offset %llu exceed the %llu-byte rpcmem buffer", k,
                        (unsigned long long)bytes, (unsigned long long)r->offset, (unsigned long long)have);
    }
    return QNN_SUCCESS;
}

/* memRegister(Qnn_ContextHandle_t context,
 *     const Qnn_MemDescriptor_t* memDescriptors, uint32_t numDescriptors,
 *     Qnn_MemHandle_t* memHandles): ION (ionInfo.fd from rpcmem_to_fd, the
 * region starts at the buffer) or CUSTOM (customInfo ->
 * QnnMemHtp_Descriptor_t {SHARED_BUFFER, size, {fd, offset}}). All or
 * nothing: on an error no handle is registered. The same fd and offset
 * cannot be registered twice in one context (QNN_MEM_ERROR_ALREADY_REGISTERED). */
static Qnn_ErrorHandle_t fq_memRegister(Qnn_ContextHandle_t context, const Qnn_MemDescriptor_t *memDescriptors,
                                        uint32_t numDescriptors, Qnn_MemHandle_t *memHandles) {
    const fq_fn fn = FN_memRegister;
    FQ_ENTRY(fn);
    bool live = false;
    uint32_t c = fq_find(K_CONTEXT, context, &live);
    if (c == UINT32_MAX || !live) {
        return fq_error(fn, QNN_CONTEXT_ERROR_INVALID_HANDLE, "invalid context handle %p", context);
    }
    if (memDescriptors == NULL || memHandles == NULL || numDescriptors == 0) {
        return fq_error(fn, QNN_MEM_ERROR_INVALID_ARGUMENT, "no descriptors or NULL out-parameter");
    }
    fq_region *rs = calloc(numDescriptors, sizeof *rs);
    if (rs == NULL) {
        return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    Qnn_ErrorHandle_t err = QNN_SUCCESS;
    for (uint32_t k = 0; k < numDescriptors && err == QNN_SUCCESS; k++) {
        err = fq_check_descriptor(k, &memDescriptors[k], &rs[k]);
        for (uint32_t i = 0; i < S.nObjs && err == QNN_SUCCESS; i++) {
            const fq_obj *o = &S.objs[i];
            if (o->kind == K_MEM && o->live && o->mem.context == c && o->mem.fd == rs[k].fd &&
                o->mem.offset == rs[k].offset) {
                err = fq_error(fn, QNN_MEM_ERROR_ALREADY_REGISTERED, "descriptor %u: fd %d offset %llu already registered",
                               k, rs[k].fd, (unsigned long long)rs[k].offset);
            }
        }
        for (uint32_t j = 0; j < k && err == QNN_SUCCESS; j++) {
            if (rs[j].fd == rs[k].fd && rs[j].offset == rs[k].offset) {
                err = fq_error(fn, QNN_MEM_ERROR_ALREADY_REGISTERED, "descriptors %u and %u: same fd %d and offset %llu",
                               j, k, rs[k].fd, (unsigned long long)rs[k].offset);
            }
        }
    }
    for (uint32_t k = 0; k < numDescriptors && err == QNN_SUCCESS; k++) {
        uint32_t i = fq_new(K_MEM);
        if (i == UINT32_MAX) {
            /* roll back what this call registered */
            for (uint32_t j = 0; j < k; j++) {
                bool l = false;
                S.objs[fq_find(K_MEM, memHandles[j], &l)].live = false;
                S.objs[c].context.liveMem--;
                memHandles[j] = NULL;
            }
            err = fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
            break;
        }
        S.objs[i].mem.context = c;
        S.objs[i].mem.rpcmem = rs[k].rpcmem;
        S.objs[i].mem.offset = rs[k].offset;
        S.objs[i].mem.size = rs[k].size;
        S.objs[i].mem.fd = rs[k].fd;
        S.objs[i].mem.memType = rs[k].memType;
        S.objs[i].mem.dataType = rs[k].dataType;
        S.objs[c].context.liveMem++;
        memHandles[k] = fq_handle(K_MEM, i);
    }
    free(rs);
    return err;
}

/* memDeRegister(const Qnn_MemHandle_t* memHandles, uint32_t numHandles):
 * every valid handle is released; an unknown or freed one is a double free
 * (QNN_MEM_ERROR_INVALID_HANDLE, returned after the others are done). */
static Qnn_ErrorHandle_t fq_memDeRegister(const Qnn_MemHandle_t *memHandles, uint32_t numHandles) {
    FQ_ENTRY(FN_memDeRegister);
    if (memHandles == NULL || numHandles == 0) {
        return fq_error(FN_memDeRegister, QNN_MEM_ERROR_INVALID_ARGUMENT, "no handles");
    }
    Qnn_ErrorHandle_t first = QNN_SUCCESS;
    for (uint32_t k = 0; k < numHandles; k++) {
        fq_obj *o = NULL;
        Qnn_ErrorHandle_t err = fq_release(FN_memDeRegister, K_MEM, memHandles[k], QNN_MEM_ERROR_INVALID_HANDLE, &o);
        if (err != QNN_SUCCESS) {
            first = first == QNN_SUCCESS ? err : first;
            continue;
        }
        S.objs[o->mem.context].context.liveMem--;
    }
    return first;
}

/* ======================================================================== */
/* HTP performance infrastructure                                           */
/* ======================================================================== */

/* createPowerConfigId(uint32_t deviceId, uint32_t coreId,
 *                     uint32_t* powerConfigId): device 0, core 0 only. */
static Qnn_ErrorHandle_t fq_createPowerConfigId(uint32_t deviceId, uint32_t coreId, uint32_t *powerConfigId) {
    FQ_ENTRY(FN_createPowerConfigId);
    if (powerConfigId == NULL || deviceId != 0 || coreId != 0) {
        return fq_error(FN_createPowerConfigId, QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT,
                        "device %u core %u (want 0, 0) or NULL out-parameter", deviceId, coreId);
    }
    uint32_t i = fq_new(K_POWER);
    if (i == UINT32_MAX) {
        return fq_error(FN_createPowerConfigId, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
    }
    *powerConfigId = i + 1;
    return QNN_SUCCESS;
}

/* fq_power_index returns the index of power config id, live or not, or
 * UINT32_MAX. */
static uint32_t fq_power_index(uint32_t id, bool *live) {
    if (id == 0 || id > S.nObjs || S.objs[id - 1].kind != K_POWER) {
        return UINT32_MAX;
    }
    *live = S.objs[id - 1].live;
    return id - 1;
}

/* destroyPowerConfigId(uint32_t powerConfigId) */
static Qnn_ErrorHandle_t fq_destroyPowerConfigId(uint32_t powerConfigId) {
    FQ_ENTRY(FN_destroyPowerConfigId);
    bool live = false;
    uint32_t i = fq_power_index(powerConfigId, &live);
    if (i == UINT32_MAX || !live) {
        S.doubleFrees++;
        return fq_error(FN_destroyPowerConfigId, QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT, "%s power config id %u",
                        i == UINT32_MAX ? "unknown" : "already destroyed", powerConfigId);
    }
    S.objs[i].live = false;
    return QNN_SUCCESS;
}

/* setPowerConfig(uint32_t powerConfigId,
 *     const QnnHtpPerfInfrastructure_PowerConfig_t** config): a
 * NULL-terminated list; DCVS_V3 (contextId must be the power config id),
 * RPC_CONTROL_LATENCY, RPC_POLLING_TIME and HMX_V2 are accepted and every
 * one is recorded (fake_power_vote), all or nothing. */
static Qnn_ErrorHandle_t fq_setPowerConfig(uint32_t powerConfigId, const QnnHtpPerfInfrastructure_PowerConfig_t **config) {
    const fq_fn fn = FN_setPowerConfig;
    FQ_ENTRY(fn);
    bool live = false;
    if (fq_power_index(powerConfigId, &live) == UINT32_MAX || !live) {
        return fq_error(fn, QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT, "invalid power config id %u", powerConfigId);
    }
    if (config == NULL || config[0] == NULL) {
        return fq_error(fn, QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT, "no power configs");
    }
    uint32_t n = 0;
    for (; config[n] != NULL; n++) {
        const QnnHtpPerfInfrastructure_PowerConfig_t *c = config[n];
        switch (c->option) {
        case QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3:
            if (c->dcvsV3Config.contextId != powerConfigId) {
                return fq_error(fn, QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT,
                                "config %u: DCVS v3 contextId %u is not the power config id %u", n,
                                c->dcvsV3Config.contextId, powerConfigId);
            }
            break;
        case QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_CONTROL_LATENCY:
        case QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME:
        case QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_HMX_V2:
            break;
        default:
            return fq_error(fn, QNN_HTP_PERF_INFRASTRUCTURE_ERROR_UNSUPPORTED_CONFIG, "config %u: option %u", n,
                            c->option);
        }
    }
    if (S.nVotes + n > S.capVotes) {
        uint32_t cap = S.capVotes ? S.capVotes : 16;
        while (cap < S.nVotes + n) {
            cap *= 2;
        }
        fq_power_vote *votes = realloc(S.votes, cap * sizeof *votes);
        if (votes == NULL) {
            return fq_error(fn, QNN_COMMON_ERROR_MEM_ALLOC, "out of memory");
        }
        S.votes = votes;
        S.capVotes = cap;
    }
    for (uint32_t k = 0; k < n; k++) {
        const QnnHtpPerfInfrastructure_PowerConfig_t *c = config[k];
        fq_power_vote *v = &S.votes[S.nVotes++];
        memset(v, 0, sizeof *v);
        v->call = (uint32_t)S.calls[fn];
        v->option = c->option;
        fq_log(QNN_LOG_LEVEL_INFO, "setPowerConfig %u: config %u of %u: option %u", powerConfigId, k + 1, n, c->option);
        if (c->option == QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3) {
            const QnnHtpPerfInfrastructure_DcvsV3_t *d = &c->dcvsV3Config;
            v->powerMode = d->powerMode;
            v->dcvsEnable = d->dcvsEnable;
            v->sleepLatency = d->sleepLatency;
            v->busMin = d->busVoltageCornerMin;
            v->busTarget = d->busVoltageCornerTarget;
            v->busMax = d->busVoltageCornerMax;
            v->coreMin = d->coreVoltageCornerMin;
            v->coreTarget = d->coreVoltageCornerTarget;
            v->coreMax = d->coreVoltageCornerMax;
        } else if (c->option == QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_CONTROL_LATENCY) {
            v->rpcValue = c->rpcControlLatencyConfig;
        } else if (c->option == QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME) {
            v->rpcValue = c->rpcPollingTimeConfig;
        }
    }
    return QNN_SUCCESS;
}

/* setMemoryConfig(uint32_t deviceId, uint32_t coreId,
 *     const QnnHtpPerfInfrastructure_MemoryConfig_t** config): accepted,
 * ignored. */
static Qnn_ErrorHandle_t fq_setMemoryConfig(uint32_t deviceId, uint32_t coreId, const void **config) {
    FQ_ENTRY(FN_setMemoryConfig);
    (void)config;
    if (deviceId != 0 || coreId != 0) {
        return fq_error(FN_setMemoryConfig, QNN_HTP_PERF_INFRASTRUCTURE_ERROR_INVALID_INPUT, "device %u core %u", deviceId,
                        coreId);
    }
    return QNN_SUCCESS;
}

static const QnnHtpDevice_Infrastructure_t fq_infrastructure = {
    .infraType = QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF,
    .perfInfra =
        {
            .createPowerConfigId = fq_createPowerConfigId,
            .destroyPowerConfigId = fq_destroyPowerConfigId,
            .setPowerConfig = fq_setPowerConfig,
            .setMemoryConfig = fq_setMemoryConfig,
        },
};

/* deviceGetInfrastructure(const QnnDevice_Infrastructure_t* deviceInfra):
 * QnnDevice_Infrastructure_t is a pointer to the backend's struct, here a
 * QnnHtpDevice_Infrastructure_t of type PERF. */
static Qnn_ErrorHandle_t fq_deviceGetInfrastructure(const QnnHtpDevice_Infrastructure_t **deviceInfra) {
    FQ_ENTRY(FN_deviceGetInfrastructure);
    if (!S.deviceSupported) {
        return fq_error(FN_deviceGetInfrastructure, QNN_COMMON_ERROR_NOT_SUPPORTED, "device API not supported (configured)");
    }
    if (deviceInfra == NULL) {
        return fq_error(FN_deviceGetInfrastructure, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    *deviceInfra = &fq_infrastructure;
    return QNN_SUCCESS;
}

/* ======================================================================== */
/* Provider tables                                                          */
/* ======================================================================== */

/* Not-implemented entries: one stub per STUB entry, so a call names the
 * function in the last error and counts. They are declared without
 * parameters: on the LP64 ABIs this library targets, a caller passing
 * arguments to them is harmless. */
#define FQ_STUB_IMPL(name)
#define FQ_STUB_STUB(name)                                                                                   \
    static Qnn_ErrorHandle_t fq_##name(void) {                                                              \
        FQ_ENTRY(FN_##name);                                                                                \
        return fq_error(FN_##name, QNN_COMMON_ERROR_NOT_SUPPORTED, "not implemented by the test double"); \
    }
#define X(i, name, kind) FQ_STUB_##kind(name)
FQ_CORE_TABLE(X)
FQ_SYSTEM_TABLE(X)
#undef X

/* Every entry of a bogus (API < 2.18) table: the layout of such old tables
 * differs, so whatever a runtime calls there is wrong. */
__attribute__((unused)) static Qnn_ErrorHandle_t fq_bogus_entry(void) {
    FQ_LOCK();
    snprintf(S.lastError, sizeof S.lastError, "called an entry of a pre-2.18 function table, which a runtime must refuse");
    return QNN_COMMON_ERROR_NOT_SUPPORTED;
}

/* The full tables: every entry is fq_<name>. (unused: in a build variant
 * without the provider export.) */
__attribute__((unused)) static const QNN_INTERFACE_VER_TYPE fq_core_full = {
#define X(i, name, kind) .name = (fq_fnptr)fq_##name,
    FQ_CORE_TABLE(X)
#undef X
};

__attribute__((unused)) static const QNN_SYSTEM_INTERFACE_VER_TYPE fq_system_full = {
#define X(i, name, kind) .name = (fq_fnptr)fq_##name,
    FQ_SYSTEM_TABLE(X)
#undef X
};

/* fq_guarded returns size bytes that end exactly at a page boundary
 * followed by a PROT_NONE guard page, so a read past the end faults. The
 * mapping is never released: a runtime may keep provider pointers. */
__attribute__((unused)) static void *fq_guarded(size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (size + page - 1) / page;
    uint8_t *p = mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return NULL;
    }
    if (mprotect(p + pages * page, page, PROT_NONE) != 0) {
        munmap(p, (pages + 1) * page);
        return NULL;
    }
    return p + pages * page - size;
}

/* fq_core_entries is the number of table entries a provider of API minor
 * version minor has (contract: >= 32: 71; 18..31: 62; < 18: 16, bogus). */
__attribute__((unused)) static uint32_t fq_core_entries(uint32_t minor) {
    return minor >= 32 ? FQ_CORE_ENTRIES_2_32 : minor >= 18 ? FQ_CORE_ENTRIES_2_18 : FQ_CORE_ENTRIES_BOGUS;
}

#ifndef FAKEQNN_NO_CORE_PROVIDERS
/* fq_build_core_tables builds one guarded QnnInterface_t per configured
 * provider, its table cut to the provider's version. Lock held. */
static bool fq_build_core_tables(void) {
    for (uint32_t k = 0; k < S.nProviders; k++) {
        const fq_provider_cfg *c = &S.providers[k];
        uint32_t entries = fq_core_entries(c->version.minor);
        size_t size = offsetof(QnnInterface_t, QNN_INTERFACE_VER_NAME) + entries * sizeof(fq_fnptr);
        QnnInterface_t *p = fq_guarded(size);
        char *name = strdup(c->name);
        if (p == NULL || name == NULL) {
            free(name);
            return false;
        }
        p->backendId = c->backendId;
        p->providerName = name;
        p->apiVersion.coreApiVersion = c->version;
        p->apiVersion.backendApiVersion = fq_htp_api;
        /* Write only the entries that fit: p's struct type is the full
         * 2.32 one, but its mapping ends after `entries` entries. */
        fq_fnptr *table = (fq_fnptr *)((uint8_t *)p + offsetof(QnnInterface_t, QNN_INTERFACE_VER_NAME));
        if (entries == FQ_CORE_ENTRIES_BOGUS) {
            for (uint32_t e = 0; e < entries; e++) {
                table[e] = (fq_fnptr)fq_bogus_entry;
            }
        } else {
            memcpy(table, &fq_core_full, entries * sizeof(fq_fnptr)); /* 2.18's table is a prefix of 2.32's */
            for (uint32_t e = 0; e < entries; e++) {
                if (S.omitted[e]) { /* core functions come first in the registry: FN_ id == table index */
                    table[e] = NULL;
                }
            }
        }
        S.coreList[k] = p;
    }
    S.coreCount = S.nProviders;
    return true;
}

#endif

#ifndef FAKEQNN_NO_SYSTEM_PROVIDERS
/* fq_build_system_table builds the guarded QnnSystemInterface_t: 16
 * entries for system API >= 1.1; for 1.0 the 3 entries create,
 * getBinaryInfo, free (1.1 inserted getMetaData at index 2). Lock held. */
static bool fq_build_system_table(void) {
    bool v1_0 = S.systemApi.minor == 0;
    uint32_t entries = v1_0 ? FQ_SYSTEM_ENTRIES_1_0 : FQ_SYSTEM_ENTRIES_1_1;
    size_t size = offsetof(QnnSystemInterface_t, QNN_SYSTEM_INTERFACE_VER_NAME) + entries * sizeof(fq_fnptr);
    QnnSystemInterface_t *p = fq_guarded(size);
    if (p == NULL) {
        return false;
    }
    p->backendId = QNN_BACKEND_ID_HTP;
    p->providerName = "FAKE_SYSTEM";
    p->systemApiVersion = S.systemApi;
    fq_fnptr *table = (fq_fnptr *)((uint8_t *)p + offsetof(QnnSystemInterface_t, QNN_SYSTEM_INTERFACE_VER_NAME));
    if (v1_0) {
        table[0] = fq_system_full.systemContextCreate;
        table[1] = fq_system_full.systemContextGetBinaryInfo;
        table[2] = fq_system_full.systemContextFree;
    } else {
        memcpy(table, &fq_system_full, entries * sizeof(fq_fnptr));
    }
    S.systemList[0] = p;
    return true;
}

#endif

#ifndef FAKEQNN_NO_CORE_PROVIDERS
/* QnnInterface_getProviders(const QnnInterface_t*** providerList,
 *                           uint32_t* numProviders): the configured
 * providers (rebuilt after a configuration change). */
FQ_EXPORT Qnn_ErrorHandle_t QnnInterface_getProviders(const QnnInterface_t ***providerList, uint32_t *numProviders) {
    FQ_ENTRY(FN_QnnInterface_getProviders);
    if (providerList == NULL || numProviders == NULL) {
        return fq_error(FN_QnnInterface_getProviders, QNN_COMMON_ERROR_INVALID_ARGUMENT, "NULL out-parameter");
    }
    if (S.providersDirty) {
        if (!fq_build_core_tables()) {
            return fq_error(FN_QnnInterface_getProviders, QNN_COMMON_ERROR_MEM_ALLOC, "cannot map provider tables");
        }
        S.providersDirty = false;
    }
    *providerList = S.coreList;
    *numProviders = S.coreCount;
    return QNN_SUCCESS;
}
#endif

#ifndef FAKEQNN_NO_SYSTEM_PROVIDERS
/* QnnSystemInterface_getProviders(const QnnSystemInterface_t*** providerList,
 *                                 uint32_t* numProviders): one provider. */
FQ_EXPORT Qnn_ErrorHandle_t QnnSystemInterface_getProviders(const QnnSystemInterface_t ***providerList,
                                                            uint32_t *numProviders) {
    FQ_ENTRY(FN_QnnSystemInterface_getProviders);
    if (providerList == NULL || numProviders == NULL) {
        return fq_error(FN_QnnSystemInterface_getProviders, QNN_SYSTEM_COMMON_ERROR_INVALID_ARGUMENT,
                        "NULL out-parameter");
    }
    if (S.systemDirty) {
        if (!fq_build_system_table()) {
            return fq_error(FN_QnnSystemInterface_getProviders, QNN_COMMON_ERROR_MEM_ALLOC, "cannot map the table");
        }
        S.systemDirty = false;
    }
    *providerList = S.systemList;
    *numProviders = 1;
    return QNN_SUCCESS;
}
#endif

/* ======================================================================== */
/* Control API (fake_*), used by the Go package internal/qnnfake            */
/* ======================================================================== */

FQ_EXPORT void fake_reset_core_providers(void) {
    FQ_LOCK();
    S.nProviders = 0;
    S.providersDirty = true;
}

/* fake_add_core_provider appends a provider (up to 8; the name is copied,
 * at most 63 bytes). */
FQ_EXPORT void fake_add_core_provider(const char *name, uint32_t backendId, uint32_t major, uint32_t minor,
                                      uint32_t patch) {
    FQ_LOCK();
    if (S.nProviders == FQ_MAX_PROVIDERS) {
        return;
    }
    fq_provider_cfg *c = &S.providers[S.nProviders++];
    snprintf(c->name, sizeof c->name, "%s", name != NULL ? name : "");
    c->backendId = backendId;
    c->version = (Qnn_Version_t){major, minor, patch};
    S.providersDirty = true;
}

FQ_EXPORT void fake_set_system_api(uint32_t major, uint32_t minor, uint32_t patch) {
    FQ_LOCK();
    S.systemApi = (Qnn_Version_t){major, minor, patch};
    S.systemDirty = true;
}

FQ_EXPORT void fake_set_binary_info_version(uint32_t v) {
    FQ_LOCK();
    S.binaryInfoVersion = v;
}

FQ_EXPORT void fake_set_graph_info_v3(int32_t on) {
    FQ_LOCK();
    S.graphInfoV3 = on != 0;
}

FQ_EXPORT void fake_set_tensor_version(uint32_t v) {
    FQ_LOCK();
    S.tensorVersion = v;
}

FQ_EXPORT void fake_set_device_supported(int32_t on) {
    FQ_LOCK();
    S.deviceSupported = on != 0;
}

FQ_EXPORT void fake_set_rpcmem_available(int32_t on) {
    FQ_LOCK();
    S.rpcmemAvailable = on != 0;
}

FQ_EXPORT void fake_set_empty_execute(int32_t on) {
    FQ_LOCK();
    S.emptyExecute = on != 0;
}

/* fake_context_records returns how many contexts were created. */
FQ_EXPORT int32_t fake_context_records(void) {
    FQ_LOCK();
    return (int32_t)S.nCtxRecs;
}

/* fake_context_record copies record i (0-based, creation order) into out:
 * {seq, group, firstSeq, maxSpillFill, binarySpillFill, freed, groupSpillFill}; 0 when i is out of
 * range, else 1. */
FQ_EXPORT int32_t fake_context_record(int32_t i, uint64_t *out) {
    FQ_LOCK();
    if (i < 0 || (uint32_t)i >= S.nCtxRecs || out == NULL) {
        return 0;
    }
    const fq_context_record *r = &S.ctxRecs[i];
    out[0] = r->seq;
    out[1] = r->group;
    out[2] = r->firstSeq;
    out[3] = r->maxSpillFill;
    out[4] = r->binarySpillFill;
    out[5] = r->freed;
    out[6] = r->groupSpillFill;
    return 1;
}

/* fake_execute_records returns how many successful executes were recorded
 * (at most 65536). */
FQ_EXPORT int32_t fake_execute_records(void) {
    FQ_LOCK();
    return (int32_t)S.nExecRecs;
}

/* fake_execute_record copies execute record i: the graph name into name
 * (cap bytes, NUL-terminated), the data addresses into addrs (up to 16:
 * inputs then outputs in declaration order) and the counts into counts
 * {seq, nIn, nOut}. 0 when i is out of range, else 1. */
FQ_EXPORT int32_t fake_execute_record(int32_t i, char *name, int32_t cap, uint64_t *addrs, uint32_t *counts) {
    FQ_LOCK();
    if (i < 0 || (uint32_t)i >= S.nExecRecs || name == NULL || cap <= 0 || addrs == NULL || counts == NULL) {
        return 0;
    }
    const fq_exec_record *r = &S.execRecs[i];
    snprintf(name, (size_t)cap, "%s", r->graph);
    memcpy(addrs, r->addr, sizeof r->addr);
    counts[0] = r->seq;
    counts[1] = r->nIn;
    counts[2] = r->nOut;
    return 1;
}

FQ_EXPORT void fake_set_profile_micros(uint64_t us) {
    FQ_LOCK();
    S.profileMicros = us;
}

/* fq_lookup_fn returns the id of the function named name, or FN_COUNT. */
static fq_fn fq_lookup_fn(const char *name) {
    for (int f = 0; f < FN_COUNT; f++) {
        if (name != NULL && strcmp(fq_fn_names[f], name) == 0) {
            return (fq_fn)f;
        }
    }
    return FN_COUNT;
}

/* fake_fail_call makes function fn fail with code on its nth call from now
 * (1 = the next call), on every call (nth = 0), or never again (nth < 0).
 * Returns 0, or -1 for an unknown name. */
FQ_EXPORT int32_t fake_fail_call(const char *fn, uint64_t code, int32_t nth) {
    FQ_LOCK();
    fq_fn f = fq_lookup_fn(fn);
    if (f == FN_COUNT) {
        return -1;
    }
    S.failCode[f] = code;
    S.failEvery[f] = nth == 0;
    S.failAt[f] = nth > 0 ? S.calls[f] + (uint64_t)nth : 0;
    return 0;
}

/* fake_calls is the number of calls of fn so far, or -1 for an unknown
 * name. */
FQ_EXPORT int32_t fake_calls(const char *fn) {
    FQ_LOCK();
    fq_fn f = fq_lookup_fn(fn);
    return f == FN_COUNT ? -1 : (int32_t)S.calls[f];
}

/* fake_live_handles counts live objects a runtime must free: every kind
 * but graphs (owned by their context). */
FQ_EXPORT int32_t fake_live_handles(void) {
    FQ_LOCK();
    int32_t n = 0;
    for (uint32_t i = 0; i < S.nObjs; i++) {
        n += S.objs[i].live && S.objs[i].kind != K_GRAPH;
    }
    return n;
}

FQ_EXPORT int32_t fake_double_frees(void) {
    FQ_LOCK();
    return (int32_t)S.doubleFrees;
}

/* fake_last_error copies the last error (NUL-terminated, truncated to
 * capacity) into buf and returns its full length. */
FQ_EXPORT int32_t fake_last_error(char *buf, int32_t capacity) {
    FQ_LOCK();
    size_t n = strlen(S.lastError);
    if (buf != NULL && capacity > 0) {
        snprintf(buf, (size_t)capacity, "%s", S.lastError);
    }
    return (int32_t)n;
}

FQ_EXPORT uint64_t fake_raw_bytes_read(void) {
    FQ_LOCK();
    return S.rawBytesRead;
}

/* fake_memhandle_bytes_written: the bytes executes wrote into registered
 * memory (MEMHANDLE output tensors, counted in empty-execute mode too). */
FQ_EXPORT uint64_t fake_memhandle_bytes_written(void) {
    FQ_LOCK();
    return S.memHandleBytesWritten;
}

/* fake_mem_records returns how many memory registrations were made (live
 * or deregistered). */
FQ_EXPORT int32_t fake_mem_records(void) {
    FQ_LOCK();
    int32_t n = 0;
    for (uint32_t i = 0; i < S.nObjs; i++) {
        n += S.objs[i].kind == K_MEM;
    }
    return n;
}

/* fake_mem_record copies registration i (0-based, registration order) into
 * out: {context seq, fd, offset, size, memType, dataType, live, address of
 * the region (0 once its rpcmem buffer is freed)}; 0 when i is out of
 * range, else 1. */
FQ_EXPORT int32_t fake_mem_record(int32_t i, uint64_t *out) {
    FQ_LOCK();
    if (i < 0 || out == NULL) {
        return 0;
    }
    for (uint32_t k = 0; k < S.nObjs; k++) {
        if (S.objs[k].kind != K_MEM || i-- > 0) {
            continue;
        }
        const fq_obj *o = &S.objs[k];
        const fq_obj *b = &S.objs[o->mem.rpcmem];
        out[0] = S.objs[o->mem.context].context.seq;
        out[1] = (uint64_t)(uint32_t)o->mem.fd;
        out[2] = o->mem.offset;
        out[3] = o->mem.size;
        out[4] = o->mem.memType;
        out[5] = o->mem.dataType;
        out[6] = o->live;
        out[7] = b->live ? (uint64_t)(uintptr_t)((uint8_t *)b->rpcmem.base + o->mem.offset) : 0;
        return 1;
    }
    return 0;
}

FQ_EXPORT uint64_t fake_memhandle_bytes_read(void) {
    FQ_LOCK();
    return S.memHandleBytesRead;
}

FQ_EXPORT int32_t fake_power_vote_count(void) {
    FQ_LOCK();
    return (int32_t)S.nVotes;
}

/* fake_power_vote copies vote i into out (12 uint32 values in the order of
 * fq_power_vote); returns 0, or -1 when i is out of range. */
FQ_EXPORT int32_t fake_power_vote(int32_t i, uint32_t *out) {
    FQ_LOCK();
    if (i < 0 || (uint32_t)i >= S.nVotes || out == NULL) {
        return -1;
    }
    _Static_assert(sizeof(fq_power_vote) == 12 * sizeof(uint32_t), "fq_power_vote is 12 words");
    memcpy(out, &S.votes[i], sizeof S.votes[i]);
    return 0;
}

/* fake_function_name is the name of function i of the registry, NULL past
 * the end. */
FQ_EXPORT const char *fake_function_name(int32_t i) { return i >= 0 && i < FN_COUNT ? fq_fn_names[i] : NULL; }

_Static_assert(FN_deviceGetInfrastructure == 39 && FN_contextFree == 14, "core function ids are table indices");

/* fake_omit_function leaves core table entry fn NULL in the provider
 * tables built from now on (a provider whose table lacks a function);
 * on = 0 puts it back. Returns 0, or -1 when fn is not a core table entry. */
FQ_EXPORT int32_t fake_omit_function(const char *fn, int32_t on) {
    FQ_LOCK();
    fq_fn f = fq_lookup_fn(fn);
    if (f == FN_COUNT || f > FN_contextFreeBinarySectionUpdate) {
        return -1;
    }
    S.omitted[f] = on != 0;
    S.providersDirty = true;
    return 0;
}

/* The line fake_emit_log and fake_emit_log_from_thread log: one argument
 * of each conversion a real backend's format strings use. */
static const char fq_emit_format[] = "%s: s=%s d=%d u=%u x=%x llu=%llu f=%f g=%.3f p=%p";

typedef struct {
    uint32_t level;
    const char *s;
    int32_t d;
    uint32_t u;
    uint64_t llu;
    double f;
    void *p;
} fq_emit_args;

static void fq_emit(const char *who, const fq_emit_args *a) {
    fq_log(a->level, fq_emit_format, who, a->s, a->d, a->u, a->u, (unsigned long long)a->llu, a->f, a->f, a->p);
}

/* fake_emit_log logs fq_emit_format with the given values at level through
 * the active logger (if its level admits it), on the calling thread. */
FQ_EXPORT void fake_emit_log(uint32_t level, const char *s, int32_t d, uint32_t u, uint64_t llu, double f, void *p) {
    FQ_LOCK();
    fq_emit_args a = {level, s, d, u, llu, f, p};
    fq_emit("fake_emit_log", &a);
}

static void *fq_emit_thread(void *arg) {
    fq_emit("fake_emit_log thread", arg);
    return NULL;
}

/* fake_emit_log_from_thread is fake_emit_log from a thread the library
 * creates (as real backends log from their own threads), joined before
 * it returns. The caller holds the lock for the worker, which only reads
 * the state. Returns 0, or the pthread error. */
FQ_EXPORT int32_t fake_emit_log_from_thread(uint32_t level, const char *s, int32_t d, uint32_t u, uint64_t llu, double f,
                                            void *p) {
    FQ_LOCK();
    fq_emit_args a = {level, s, d, u, llu, f, p};
    pthread_t t;
    int err = pthread_create(&t, NULL, fq_emit_thread, &a);
    if (err != 0) {
        return err;
    }
    return pthread_join(t, NULL);
}
