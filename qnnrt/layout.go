package qnnrt

import "unsafe"

// Go mirrors of the QNN C structs the runtime reads or writes. Layouts are
// LP64 (identical on linux/amd64 and linux/arm64) and follow
// layout-api2.32.txt field by field, with explicit padding; layout_test.go
// checks every size and offset against that table. Pointer fields the runtime
// only ever fills with non-Go memory (mmap'd arenas, library-owned data) are
// unsafe.Pointer; opaque handles are uintptr.

// qnnVersion mirrors Qnn_Version_t (12 bytes).
type qnnVersion struct {
	Major, Minor, Patch uint32
}

// apiVersion mirrors Qnn_ApiVersion_t (24 bytes).
type apiVersion struct {
	Core    qnnVersion
	Backend qnnVersion
}

// interfaceHeader mirrors the leading fields of QnnInterface_t (40 bytes);
// the function table follows at offset 40 and its length depends on the
// provider's API version, so it is never read as part of a struct.
type interfaceHeader struct {
	BackendID    uint32
	_            uint32
	ProviderName unsafe.Pointer
	APIVersion   apiVersion
}

// systemInterfaceHeader mirrors the leading fields of QnnSystemInterface_t
// (32 bytes); the function table follows at offset 32.
type systemInterfaceHeader struct {
	BackendID        uint32
	_                uint32
	ProviderName     unsafe.Pointer
	SystemAPIVersion qnnVersion
	_                uint32
}

// Offsets of the function tables inside the interface structs.
const (
	coreTableOffset   = unsafe.Sizeof(interfaceHeader{})
	systemTableOffset = unsafe.Sizeof(systemInterfaceHeader{})
)

// quantizeParams mirrors Qnn_QuantizeParams_t (40 bytes). The union starts
// at offset 8; the runtime reads only its scale/offset members.
type quantizeParams struct {
	EncodingDefinition   uint32
	QuantizationEncoding uint32
	Union                [4]uint64
}

// scaleOffset mirrors Qnn_ScaleOffset_t, the union member for
// QNN_QUANTIZATION_ENCODING_SCALE_OFFSET.
type scaleOffset struct {
	Scale  float32
	Offset int32
}

// bwScaleOffset mirrors Qnn_BwScaleOffset_t, the union member for
// QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET.
type bwScaleOffset struct {
	Bitwidth uint32
	Scale    float32
	Offset   int32
}

func (q *quantizeParams) scaleOffset() *scaleOffset {
	return (*scaleOffset)(unsafe.Pointer(&q.Union))
}

func (q *quantizeParams) bwScaleOffset() *bwScaleOffset {
	return (*bwScaleOffset)(unsafe.Pointer(&q.Union))
}

// clientBuffer mirrors Qnn_ClientBuffer_t (16 bytes).
type clientBuffer struct {
	Data     unsafe.Pointer
	DataSize uint32
	_        uint32
}

// sparseParams mirrors Qnn_SparseParams_t (12 bytes, align 4).
type sparseParams struct {
	Type      uint32
	HybridCoo [2]uint32
}

// tensorV1 mirrors Qnn_TensorV1_t (112 bytes). ClientBuf shares its offset
// with memHandle (a handle in the first word when MemType is MEMHANDLE).
type tensorV1 struct {
	ID             uint32
	_              uint32
	Name           unsafe.Pointer
	Type           uint32
	DataFormat     uint32
	DataType       uint32
	_              uint32
	QuantizeParams quantizeParams
	Rank           uint32
	_              uint32
	Dimensions     unsafe.Pointer
	MemType        uint32
	_              uint32
	ClientBuf      clientBuffer
}

// tensorV2 mirrors Qnn_TensorV2_t (136 bytes): the v1 fields, then the
// fields v2 appended.
type tensorV2 struct {
	tensorV1
	IsDynamicDimensions unsafe.Pointer
	SparseParams        sparseParams
	IsProduced          uint8
	_                   [3]uint8
}

// qnnTensor mirrors Qnn_Tensor_t (144 bytes): a version word, then the v1 or
// v2 struct (v1 is a prefix of v2).
type qnnTensor struct {
	Version uint32
	_       uint32
	V2      tensorV2
}

// memHandle returns the memHandle member of the clientBuf/memHandle union.
func (t *tensorV1) memHandle() *uintptr {
	return (*uintptr)(unsafe.Pointer(&t.ClientBuf))
}

// memShape mirrors Qnn_MemShape_t (24 bytes).
type memShape struct {
	NumDim      uint32
	_           uint32
	DimSize     unsafe.Pointer
	ShapeConfig unsafe.Pointer
}

// memDescriptor mirrors Qnn_MemDescriptor_t (48 bytes). Info is the union
// of ionInfo (an int fd in its first 4 bytes), customInfo and dmaBufInfo.
type memDescriptor struct {
	MemShape memShape
	DataType uint32
	MemType  uint32
	Info     [2]uint64
}

// htpMemDescriptor mirrors QnnMemHtp_Descriptor_t (32 bytes) with its
// sharedBufferConfig (QnnHtpMem_SharedBufferConfig_t, 16 bytes at 16): a
// tensor at Offset inside the rpcmem allocation FD of Size bytes, what
// memDescriptor.Info's customInfo points to for memType CUSTOM.
type htpMemDescriptor struct {
	Type   uint32
	_      uint32
	Size   uint64
	FD     int32
	_      uint32
	Offset uint64
}

// systemGraphInfoV1 mirrors QnnSystemContext_GraphInfoV1_t (40 bytes), the
// prefix every graph-info version shares.
type systemGraphInfoV1 struct {
	GraphName       unsafe.Pointer
	NumGraphInputs  uint32
	_               uint32
	GraphInputs     unsafe.Pointer
	NumGraphOutputs uint32
	_               uint32
	GraphOutputs    unsafe.Pointer
}

// systemGraphInfo mirrors the head of QnnSystemContext_GraphInfo_t: the
// version word, then the v1 prefix at offset 8. The array stride is the
// library's sizeof (64 or 88), never unsafe.Sizeof of this type.
type systemGraphInfo struct {
	Version uint32
	_       uint32
	V1      systemGraphInfoV1
}

// systemGraphInfoV3 mirrors QnnSystemContext_GraphInfo_t holding a
// graph-info v3 (88 bytes): the v1 prefix, the updateable tensors, the
// backend's graph blob info and the op range.
type systemGraphInfoV3 struct {
	Version              uint32
	_                    uint32
	V1                   systemGraphInfoV1
	NumUpdateableTensors uint32
	_                    uint32
	UpdateableTensors    unsafe.Pointer
	GraphBlobInfoSize    uint32
	_                    uint32
	GraphBlobInfo        unsafe.Pointer
	StartOpIndex         uint32
	EndOpIndex           uint32
}

// htpGraphBlobInfo mirrors QnnHtpSystemContext_GraphBlobInfo_t (40 bytes):
// the version word, then QnnHtpSystemContext_GraphBlobInfoV1_t at offset 8.
type htpGraphBlobInfo struct {
	Version             uint32
	_                   uint32
	SpillFillBufferSize uint64
	VtcmSize            uint32
	OptimizationLevel   uint32
	HtpDlbc             uint8
	_                   [7]uint8
	NumHvxThreads       uint64
}

// htpHwBlobInfo mirrors QnnHtpSystemContext_HwBlobInfo_t, the hwInfoBlob of
// binary info v1/v2. The layout table does not list it; QnnHtpSystemContext.h
// of the public QNN 2.25 SDK gives a version word and a V1 union of
// {uint32_t graphListIndex; uint64_t spillFillBufferSize}, so 24 bytes with
// spillFillBufferSize at 16 (LP64).
type htpHwBlobInfo struct {
	Version             uint32
	_                   uint32
	GraphListIndex      uint32
	_                   uint32
	SpillFillBufferSize uint64
}

// htpContextCustomConfig mirrors QnnHtpContext_CustomConfig_t (24 bytes)
// with its groupRegistration member (QnnHtpContext_GroupRegistration_t:
// firstGroupHandle, maxSpillFillBuffer) at offset 8.
type htpContextCustomConfig struct {
	Option             uint32
	_                  uint32
	FirstGroupHandle   uintptr
	MaxSpillFillBuffer uint64
}

// Strides of QnnSystemContext_GraphInfo_t arrays: libraries built before
// graph-info v3 existed use 64, later ones 88.
const (
	graphInfoStrideOld = 64
	graphInfoStrideV3  = 88
)

// binaryInfoV1 mirrors QnnSystemContext_BinaryInfoV1_t (128 bytes).
type binaryInfoV1 struct {
	BackendID          uint32
	_                  uint32
	BuildID            unsafe.Pointer
	CoreAPIVersion     qnnVersion
	BackendAPIVersion  qnnVersion
	SocVersion         unsafe.Pointer
	HwInfoBlobVersion  qnnVersion
	ContextBlobVersion qnnVersion
	HwInfoBlobSize     uint32
	_                  uint32
	HwInfoBlob         unsafe.Pointer
	ContextBlobSize    uint64
	NumContextTensors  uint32
	_                  uint32
	ContextTensors     unsafe.Pointer
	NumGraphs          uint32
	_                  uint32
	Graphs             unsafe.Pointer
}

// binaryInfoV2 mirrors QnnSystemContext_BinaryInfoV2_t (136 bytes).
type binaryInfoV2 struct {
	binaryInfoV1
	PlatformInfo unsafe.Pointer
}

// binaryInfoV3 mirrors QnnSystemContext_BinaryInfoV3_t (136 bytes). It is
// not a superset of v1/v2: the hardware-info blob fields are gone, so
// numGraphs and graphs sit 24 bytes earlier.
type binaryInfoV3 struct {
	BackendID           uint32
	_                   uint32
	BuildID             unsafe.Pointer
	CoreAPIVersion      qnnVersion
	BackendAPIVersion   qnnVersion
	SocVersion          unsafe.Pointer
	ContextBlobVersion  qnnVersion
	_                   uint32
	ContextBlobSize     uint64
	NumContextTensors   uint32
	_                   uint32
	ContextTensors      unsafe.Pointer
	NumGraphs           uint32
	_                   uint32
	Graphs              unsafe.Pointer
	PlatformInfo        unsafe.Pointer
	ContextMetadataSize uint32
	_                   uint32
	ContextMetadata     unsafe.Pointer
	SocModel            uint32
	_                   uint32
}

// binaryInfoHeader mirrors the version word of QnnSystemContext_BinaryInfo_t;
// the versioned struct follows at offset 8.
type binaryInfoHeader struct {
	Version uint32
	_       uint32
}

// platformInfo mirrors QnnDevice_PlatformInfo_t (24 bytes, version 1).
type platformInfo struct {
	Version      uint32
	_            uint32
	NumHwDevices uint32
	_            uint32
	HwDevices    unsafe.Pointer
}

// hardwareDeviceInfo mirrors QnnDevice_HardwareDeviceInfo_t (40 bytes,
// version 1).
type hardwareDeviceInfo struct {
	Version             uint32
	_                   uint32
	DeviceID            uint32
	DeviceType          uint32
	NumCores            uint32
	_                   uint32
	Cores               unsafe.Pointer
	DeviceInfoExtension unsafe.Pointer
}

// htpDeviceInfoExtension mirrors QnnHtpDevice_DeviceInfoExtension_t: a
// device type (0 = on chip) and, at offset 8, the on-chip extension.
type htpDeviceInfoExtension struct {
	DevType uint32
	_       uint32
	OnChip  htpOnChipDeviceInfo
}

// htpOnChipDeviceInfo mirrors QnnHtpDevice_OnChipDeviceInfoExtension_t
// (24 bytes).
type htpOnChipDeviceInfo struct {
	VtcmSize        uint64
	SocModel        uint32
	SignedPdSupport uint8
	DlbcSupport     uint8
	_               [2]uint8
	Arch            uint32
	_               uint32
}

// contextConfig mirrors QnnContext_Config_t (16 bytes); Value holds the
// union (isPersistentBinary is its first byte).
type contextConfig struct {
	Option uint32
	_      uint32
	Value  uint64
}

// htpInfrastructure mirrors QnnHtpDevice_Infrastructure_t (40 bytes) with
// its perfInfra member (QnnHtpDevice_PerfInfrastructure_t) at offset 8.
type htpInfrastructure struct {
	InfraType uint32
	_         uint32
	Perf      htpPerfInfrastructure
}

// htpPerfInfrastructure mirrors QnnHtpDevice_PerfInfrastructure_t.
type htpPerfInfrastructure struct {
	CreatePowerConfigID  uintptr
	DestroyPowerConfigID uintptr
	SetPowerConfig       uintptr
	SetMemoryConfig      uintptr
}

// dcvsV3 mirrors QnnHtpPerfInfrastructure_DcvsV3_t (64 bytes).
type dcvsV3 struct {
	ContextID              uint32
	SetDcvsEnable          uint32
	DcvsEnable             uint32
	PowerMode              uint32
	SetSleepLatency        uint32
	SleepLatency           uint32
	SetSleepDisable        uint32
	SleepDisable           uint32
	SetBusParams           uint32
	BusVoltageCornerMin    uint32
	BusVoltageCornerTarget uint32
	BusVoltageCornerMax    uint32
	SetCoreParams          uint32
	CoreVoltageCornerMin   uint32
	CoreVoltageCornerTgt   uint32
	CoreVoltageCornerMax   uint32
}

// powerConfig mirrors QnnHtpPerfInfrastructure_PowerConfig_t (68 bytes):
// option, then the union at offset 4 (dcvsV3Config, or a single uint32 for
// the RPC latency and polling-time options).
type powerConfig struct {
	Option uint32
	Union  [16]uint32
}

func (p *powerConfig) dcvs() *dcvsV3 { return (*dcvsV3)(unsafe.Pointer(&p.Union)) }

// profileEventData mirrors QnnProfile_EventData_t (24 bytes).
type profileEventData struct {
	Type       uint32
	Unit       uint32
	Value      uint64
	Identifier unsafe.Pointer
}

// Function-table indices in QNN_INTERFACE_VER_TYPE (API 2.32; the table is
// append-only from 2.18, whose 62 entries are a prefix).
const (
	fnPropertyHasCapability   = 0
	fnBackendCreate           = 1
	fnBackendFree             = 8
	fnContextCreateFromBinary = 13
	fnContextFree             = 14
	fnGraphRetrieve           = 20
	fnGraphExecute            = 21
	fnLogCreate               = 25
	fnLogFree                 = 27
	fnProfileCreate           = 28
	fnProfileGetEvents        = 30
	fnProfileGetEventData     = 32
	fnProfileFree             = 34
	fnMemRegister             = 35
	fnMemDeRegister           = 36
	fnDeviceGetInfrastructure = 39
	fnDeviceCreate            = 40
	fnDeviceFree              = 43
	fnErrorGetMessage         = 48
	numCoreFns                = 49 // entries the runtime may read: indices 0..48
)

// Function-table indices in QNN_SYSTEM_INTERFACE_VER_TYPE (system API 1.1+).
const (
	fnSystemContextCreate        = 0
	fnSystemContextGetBinaryInfo = 1
	fnSystemContextGetMetaData   = 2
	fnSystemContextFree          = 3
	numSystemFns                 = 4
)

// Table lengths by API version.
const (
	coreTableLen2_18   = 62 // core API 2.18 .. 2.31
	coreTableLen2_32   = 71 // core API 2.32 and later (append-only, may be longer)
	systemTableLen1_1  = 16 // system API 1.1 and later as of 1.7
	minCoreAPIMinor    = 18
	minSystemAPIMinor  = 1
	coreAPIMajor       = 2
	systemAPIMajor     = 1
	tableEntrySize     = 8
	maxProviders       = 64
	maxTensorsPerGraph = 1 << 12
	maxGraphs          = 1 << 10
	maxRank            = 16
	maxCString         = 1 << 16
)

// Enum values and constants from the layout table.
const (
	backendIDHTP = 6
	backendIDCPU = 3

	tensorVersion1 = 1
	tensorVersion2 = 2

	tensorTypeAppWrite = 0
	tensorTypeAppRead  = 1

	memTypeRaw       = 0
	memTypeMemHandle = 1

	definitionDefined   = 1
	definitionUndefined = 0x7fffffff

	encodingScaleOffset   = 0
	encodingBwScaleOffset = 2

	qnnMemTypeION = 1
	// qnnMemTypeCustom is QNN_MEM_TYPE_CUSTOM: customInfo points to an
	// htpMemDescriptor.
	qnnMemTypeCustom = 2
	// htpMemSharedBuffer is QNN_HTP_MEM_SHARED_BUFFER.
	htpMemSharedBuffer = 1

	binaryInfoVersion1 = 1
	binaryInfoVersion2 = 2
	binaryInfoVersion3 = 3

	graphInfoVersion3 = 3

	propertyGroupDevice = 1501
	propertySupported   = 0

	profileLevelBasic    = 1
	profileEventExecute  = 400
	profileUnitMicrosec  = 1
	contextConfigPersist = 7
	contextConfigCustom  = 0 // QNN_CONTEXT_CONFIG_OPTION_CUSTOM
	// htpContextRegisterMultiContexts is
	// QNN_HTP_CONTEXT_CONFIG_OPTION_REGISTER_MULTI_CONTEXTS.
	htpContextRegisterMultiContexts = 2
	htpGraphBlobInfoV1              = 1 // QNN_SYSTEM_CONTEXT_HTP_GRAPH_INFO_BLOB_VERSION_V1
	htpHwBlobInfoV1                 = 1 // QNN_SYSTEM_CONTEXT_HTP_HW_INFO_BLOB_VERSION_V1 (public header)
	infraTypePerf                   = 0
	powerOptDcvsV3                  = 1
	powerOptRPCLatency              = 2
	powerOptRPCPolling              = 3
	powerModeAdjustUpDown           = 1
	powerModePowerSaver             = 4
	powerModePerformance            = 0x10
	vcornerSVS                      = 0x40
	vcornerNomPlus                  = 0x70
	vcornerTurbo                    = 0x80
	vcornerMax                      = 0xA0

	logLevelWarn = 2
)
