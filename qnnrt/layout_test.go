package qnnrt

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"strconv"
	"testing"
	"unsafe"
)

// layoutTable is the parsed layout dump of the QNN headers
// (testdata/layout-api2.32.txt, a copy of ../shared/qnn/layout-api2.32.txt).
type layoutTable struct {
	structs   map[string]layoutStruct
	functions map[string]map[string]int // table struct -> entry name -> index
	constants map[string]uint64
}

type layoutStruct struct {
	size   uintptr
	fields map[string][2]uintptr // name -> {offset, size}
}

var (
	reSizeof = regexp.MustCompile(`^sizeof\((\w+)\) = (\d+)`)
	reField  = regexp.MustCompile(`^\s+(\w+)\s+off=\s*(\d+) size=\s*(\d+)`)
	reFunc   = regexp.MustCompile(`^\s+(\w+)\s+table_off=\s*\d+\s+abs_off_in_\w+=\s*\d+\s+index=\s*(\d+)`)
	reConst  = regexp.MustCompile(`^\s+(\w+)\s+= (\d+) \(0x[0-9a-f]+\)`)
)

func loadLayout(t *testing.T) *layoutTable {
	t.Helper()
	data, err := os.ReadFile("testdata/layout-api2.32.txt")
	if err != nil {
		t.Fatal(err)
	}
	if shared, err := os.ReadFile("../../shared/qnn/layout-api2.32.txt"); err == nil && !bytes.Equal(shared, data) {
		t.Fatal("testdata/layout-api2.32.txt differs from ../../shared/qnn/layout-api2.32.txt; copy the shared table again")
	}
	lt := &layoutTable{structs: map[string]layoutStruct{}, functions: map[string]map[string]int{}, constants: map[string]uint64{}}
	cur := ""
	num := func(s string) uintptr {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return uintptr(v)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if m := reSizeof.FindStringSubmatch(line); m != nil {
			cur = m[1]
			lt.structs[cur] = layoutStruct{size: num(m[2]), fields: map[string][2]uintptr{}}
			continue
		}
		if m := reFunc.FindStringSubmatch(line); m != nil && cur != "" {
			if lt.functions[cur] == nil {
				lt.functions[cur] = map[string]int{}
			}
			lt.functions[cur][m[1]] = int(num(m[2]))
			continue
		}
		if m := reField.FindStringSubmatch(line); m != nil && cur != "" {
			lt.structs[cur].fields[m[1]] = [2]uintptr{num(m[2]), num(m[3])}
			continue
		}
		if m := reConst.FindStringSubmatch(line); m != nil {
			lt.constants[m[1]] = uint64(num(m[2]))
		}
	}
	if len(lt.structs) < 40 || len(lt.constants) < 100 {
		t.Fatalf("parsed only %d structs and %d constants from the layout table", len(lt.structs), len(lt.constants))
	}
	return lt
}

// field is one C field a Go mirror must place: its C name, and the Go
// offset and size.
type field struct {
	name      string
	off, size uintptr
}

func f(name string, off, size uintptr) field { return field{name, off, size} }

func TestLayoutMatchesTable(t *testing.T) {
	lt := loadLayout(t)
	var (
		ver  qnnVersion
		api  apiVersion
		so   scaleOffset
		bw   bwScaleOffset
		qp   quantizeParams
		cb   clientBuffer
		sp   sparseParams
		t1   tensorV1
		t2   tensorV2
		tt   qnnTensor
		ms   memShape
		md   memDescriptor
		hd   htpMemDescriptor
		ih   interfaceHeader
		sh   systemInterfaceHeader
		g1   systemGraphInfoV1
		gi   systemGraphInfo
		b1   binaryInfoV1
		b2   binaryInfoV2
		b3   binaryInfoV3
		bh   binaryInfoHeader
		pi   platformInfo
		hw   hardwareDeviceInfo
		oc   htpOnChipDeviceInfo
		cc   contextConfig
		g3   systemGraphInfoV3
		gb   htpGraphBlobInfo
		hc   htpContextCustomConfig
		hi   htpInfrastructure
		hp   htpPerfInfrastructure
		dv   dcvsV3
		pc   powerConfig
		ev   profileEventData
		ptr  = unsafe.Sizeof(uintptr(0))
		u32  = unsafe.Sizeof(uint32(0))
		v12  = unsafe.Sizeof(ver)
		exts = unsafe.Sizeof(htpDeviceInfoExtension{})
	)
	cases := []struct {
		cname  string
		size   uintptr // 0: the Go mirror covers only a prefix; size not compared
		fields []field
	}{
		{"Qnn_Version_t", unsafe.Sizeof(ver), []field{
			f("major", unsafe.Offsetof(ver.Major), u32), f("minor", unsafe.Offsetof(ver.Minor), u32), f("patch", unsafe.Offsetof(ver.Patch), u32)}},
		{"Qnn_ApiVersion_t", unsafe.Sizeof(api), []field{
			f("coreApiVersion", unsafe.Offsetof(api.Core), v12), f("backendApiVersion", unsafe.Offsetof(api.Backend), v12)}},
		{"Qnn_ScaleOffset_t", unsafe.Sizeof(so), []field{
			f("scale", unsafe.Offsetof(so.Scale), 4), f("offset", unsafe.Offsetof(so.Offset), 4)}},
		{"Qnn_BwScaleOffset_t", unsafe.Sizeof(bw), []field{
			f("bitwidth", unsafe.Offsetof(bw.Bitwidth), 4), f("scale", unsafe.Offsetof(bw.Scale), 4), f("offset", unsafe.Offsetof(bw.Offset), 4)}},
		{"Qnn_QuantizeParams_t", unsafe.Sizeof(qp), []field{
			f("encodingDefinition", unsafe.Offsetof(qp.EncodingDefinition), u32),
			f("quantizationEncoding", unsafe.Offsetof(qp.QuantizationEncoding), u32),
			f("scaleOffsetEncoding", unsafe.Offsetof(qp.Union), unsafe.Sizeof(so)),
			f("bwScaleOffsetEncoding", unsafe.Offsetof(qp.Union), unsafe.Sizeof(bw))}},
		{"Qnn_ClientBuffer_t", unsafe.Sizeof(cb), []field{
			f("data", unsafe.Offsetof(cb.Data), ptr), f("dataSize", unsafe.Offsetof(cb.DataSize), u32)}},
		{"Qnn_SparseParams_t", unsafe.Sizeof(sp), []field{
			f("type", unsafe.Offsetof(sp.Type), u32), f("hybridCoo", unsafe.Offsetof(sp.HybridCoo), unsafe.Sizeof(sp.HybridCoo))}},
		{"Qnn_TensorV1_t", unsafe.Sizeof(t1), tensorV1Fields(&t1, 0)},
		{"Qnn_TensorV2_t", unsafe.Sizeof(t2), append(tensorV1Fields(&t2.tensorV1, unsafe.Offsetof(t2.tensorV1)),
			f("isDynamicDimensions", unsafe.Offsetof(t2.IsDynamicDimensions), ptr),
			f("sparseParams", unsafe.Offsetof(t2.SparseParams), unsafe.Sizeof(sp)),
			f("isProduced", unsafe.Offsetof(t2.IsProduced), 1))},
		{"Qnn_Tensor_t", unsafe.Sizeof(tt), []field{
			f("version", unsafe.Offsetof(tt.Version), u32),
			f("v1", unsafe.Offsetof(tt.V2)+unsafe.Offsetof(tt.V2.tensorV1), unsafe.Sizeof(t1)),
			f("v2", unsafe.Offsetof(tt.V2), unsafe.Sizeof(t2))}},
		{"Qnn_MemShape_t", unsafe.Sizeof(ms), []field{
			f("numDim", unsafe.Offsetof(ms.NumDim), u32), f("dimSize", unsafe.Offsetof(ms.DimSize), ptr), f("shapeConfig", unsafe.Offsetof(ms.ShapeConfig), ptr)}},
		{"Qnn_MemDescriptor_t", unsafe.Sizeof(md), []field{
			f("memShape", unsafe.Offsetof(md.MemShape), unsafe.Sizeof(ms)), f("dataType", unsafe.Offsetof(md.DataType), u32),
			f("memType", unsafe.Offsetof(md.MemType), u32), f("ionInfo", unsafe.Offsetof(md.Info), u32),
			f("customInfo", unsafe.Offsetof(md.Info), ptr), f("dmaBufInfo", unsafe.Offsetof(md.Info), unsafe.Sizeof(md.Info))}},
		{"QnnMemHtp_Descriptor_t", unsafe.Sizeof(hd), []field{
			f("type", unsafe.Offsetof(hd.Type), u32), f("size", unsafe.Offsetof(hd.Size), 8),
			f("sharedBufferConfig", unsafe.Offsetof(hd.FD), unsafe.Sizeof(hd)-unsafe.Offsetof(hd.FD))}},
		{"QnnHtpMem_SharedBufferConfig_t", unsafe.Sizeof(hd) - unsafe.Offsetof(hd.FD), []field{
			f("fd", 0, u32), f("offset", unsafe.Offsetof(hd.Offset)-unsafe.Offsetof(hd.FD), 8)}},
		{"QnnInterface_t", 0, []field{
			f("backendId", unsafe.Offsetof(ih.BackendID), u32), f("providerName", unsafe.Offsetof(ih.ProviderName), ptr),
			f("apiVersion", unsafe.Offsetof(ih.APIVersion), unsafe.Sizeof(api)),
			f("QNN_INTERFACE_VER_NAME", coreTableOffset, coreTableLen2_32*tableEntrySize)}},
		{"QnnSystemInterface_t", 0, []field{
			f("backendId", unsafe.Offsetof(sh.BackendID), u32), f("providerName", unsafe.Offsetof(sh.ProviderName), ptr),
			f("systemApiVersion", unsafe.Offsetof(sh.SystemAPIVersion), v12),
			f("QNN_SYSTEM_INTERFACE_VER_NAME", systemTableOffset, systemTableLen1_1*tableEntrySize)}},
		{"QnnSystemContext_GraphInfoV1_t", unsafe.Sizeof(g1), []field{
			f("graphName", unsafe.Offsetof(g1.GraphName), ptr), f("numGraphInputs", unsafe.Offsetof(g1.NumGraphInputs), u32),
			f("graphInputs", unsafe.Offsetof(g1.GraphInputs), ptr), f("numGraphOutputs", unsafe.Offsetof(g1.NumGraphOutputs), u32),
			f("graphOutputs", unsafe.Offsetof(g1.GraphOutputs), ptr)}},
		{"QnnSystemContext_GraphInfo_t", graphInfoStrideV3, []field{
			f("version", unsafe.Offsetof(gi.Version), u32), f("graphInfoV1", unsafe.Offsetof(gi.V1), unsafe.Sizeof(g1))}},
		{"QnnSystemContext_BinaryInfoV1_t", unsafe.Sizeof(b1), binaryInfoV1Fields(&b1)},
		{"QnnSystemContext_BinaryInfoV2_t", unsafe.Sizeof(b2), append(binaryInfoV1Fields(&b2.binaryInfoV1),
			f("platformInfo", unsafe.Offsetof(b2.PlatformInfo), ptr))},
		{"QnnSystemContext_BinaryInfoV3_t", unsafe.Sizeof(b3), []field{
			f("backendId", unsafe.Offsetof(b3.BackendID), u32), f("buildId", unsafe.Offsetof(b3.BuildID), ptr),
			f("coreApiVersion", unsafe.Offsetof(b3.CoreAPIVersion), v12), f("backendApiVersion", unsafe.Offsetof(b3.BackendAPIVersion), v12),
			f("socVersion", unsafe.Offsetof(b3.SocVersion), ptr), f("contextBlobVersion", unsafe.Offsetof(b3.ContextBlobVersion), v12),
			f("contextBlobSize", unsafe.Offsetof(b3.ContextBlobSize), 8), f("numContextTensors", unsafe.Offsetof(b3.NumContextTensors), u32),
			f("contextTensors", unsafe.Offsetof(b3.ContextTensors), ptr), f("numGraphs", unsafe.Offsetof(b3.NumGraphs), u32),
			f("graphs", unsafe.Offsetof(b3.Graphs), ptr), f("platformInfo", unsafe.Offsetof(b3.PlatformInfo), ptr),
			f("contextMetadataSize", unsafe.Offsetof(b3.ContextMetadataSize), u32), f("contextMetadata", unsafe.Offsetof(b3.ContextMetadata), ptr),
			f("socModel", unsafe.Offsetof(b3.SocModel), u32)}},
		{"QnnSystemContext_BinaryInfo_t", 0, []field{
			f("version", unsafe.Offsetof(bh.Version), u32),
			f("contextBinaryInfoV1", unsafe.Sizeof(bh), unsafe.Sizeof(b1)),
			f("contextBinaryInfoV2", unsafe.Sizeof(bh), unsafe.Sizeof(b2)),
			f("contextBinaryInfoV3", unsafe.Sizeof(bh), unsafe.Sizeof(b3))}},
		{"QnnDevice_PlatformInfo_t", unsafe.Sizeof(pi), nil},
		{"QnnDevice_HardwareDeviceInfo_t", unsafe.Sizeof(hw), nil},
		{"QnnHtpDevice_OnChipDeviceInfoExtension_t", unsafe.Sizeof(oc), []field{
			f("vtcmSize", unsafe.Offsetof(oc.VtcmSize), 8), f("socModel", unsafe.Offsetof(oc.SocModel), u32),
			f("signedPdSupport", unsafe.Offsetof(oc.SignedPdSupport), 1), f("dlbcSupport", unsafe.Offsetof(oc.DlbcSupport), 1),
			f("arch", unsafe.Offsetof(oc.Arch), u32)}},
		{"QnnSystemContext_GraphInfo_t", unsafe.Sizeof(g3), []field{
			f("version", unsafe.Offsetof(g3.Version), u32), f("graphInfoV3", unsafe.Offsetof(g3.V1), unsafe.Sizeof(g3)-8)}},
		{"QnnSystemContext_GraphInfoV3_t", unsafe.Sizeof(g3) - 8, []field{
			f("numUpdateableTensors", unsafe.Offsetof(g3.NumUpdateableTensors)-8, u32),
			f("updateableTensors", unsafe.Offsetof(g3.UpdateableTensors)-8, ptr),
			f("graphBlobInfoSize", unsafe.Offsetof(g3.GraphBlobInfoSize)-8, u32),
			f("graphBlobInfo", unsafe.Offsetof(g3.GraphBlobInfo)-8, ptr),
			f("startOpIndex", unsafe.Offsetof(g3.StartOpIndex)-8, u32),
			f("endOpIndex", unsafe.Offsetof(g3.EndOpIndex)-8, u32)}},
		{"QnnHtpSystemContext_GraphBlobInfo_t", unsafe.Sizeof(gb), []field{
			f("version", unsafe.Offsetof(gb.Version), u32),
			f("contextBinaryGraphBlobInfoV1", unsafe.Offsetof(gb.SpillFillBufferSize), unsafe.Sizeof(gb)-8)}},
		{"QnnHtpSystemContext_GraphBlobInfoV1_t", unsafe.Sizeof(gb) - 8, []field{
			f("spillFillBufferSize", unsafe.Offsetof(gb.SpillFillBufferSize)-8, 8),
			f("vtcmSize", unsafe.Offsetof(gb.VtcmSize)-8, u32),
			f("optimizationLevel", unsafe.Offsetof(gb.OptimizationLevel)-8, u32),
			f("htpDlbc", unsafe.Offsetof(gb.HtpDlbc)-8, 1),
			f("numHvxThreads", unsafe.Offsetof(gb.NumHvxThreads)-8, 8)}},
		{"QnnHtpContext_CustomConfig_t", unsafe.Sizeof(hc), []field{
			f("option", unsafe.Offsetof(hc.Option), u32),
			f("groupRegistration", unsafe.Offsetof(hc.FirstGroupHandle), unsafe.Sizeof(hc)-8)}},
		{"QnnHtpContext_GroupRegistration_t", unsafe.Sizeof(hc) - 8, []field{
			f("firstGroupHandle", unsafe.Offsetof(hc.FirstGroupHandle)-8, ptr),
			f("maxSpillFillBuffer", unsafe.Offsetof(hc.MaxSpillFillBuffer)-8, 8)}},
		{"QnnContext_Config_t", unsafe.Sizeof(cc), []field{
			f("option", unsafe.Offsetof(cc.Option), u32), f("isPersistentBinary", unsafe.Offsetof(cc.Value), 1)}},
		{"QnnHtpDevice_Infrastructure_t", unsafe.Sizeof(hi), []field{
			f("infraType", unsafe.Offsetof(hi.InfraType), u32), f("perfInfra", unsafe.Offsetof(hi.Perf), unsafe.Sizeof(hp))}},
		{"QnnHtpDevice_PerfInfrastructure_t", unsafe.Sizeof(hp), []field{
			f("createPowerConfigId", unsafe.Offsetof(hp.CreatePowerConfigID), ptr),
			f("destroyPowerConfigId", unsafe.Offsetof(hp.DestroyPowerConfigID), ptr),
			f("setPowerConfig", unsafe.Offsetof(hp.SetPowerConfig), ptr),
			f("setMemoryConfig", unsafe.Offsetof(hp.SetMemoryConfig), ptr)}},
		{"QnnHtpPerfInfrastructure_DcvsV3_t", unsafe.Sizeof(dv), []field{
			f("contextId", unsafe.Offsetof(dv.ContextID), u32), f("setDcvsEnable", unsafe.Offsetof(dv.SetDcvsEnable), u32),
			f("dcvsEnable", unsafe.Offsetof(dv.DcvsEnable), u32), f("powerMode", unsafe.Offsetof(dv.PowerMode), u32),
			f("setSleepLatency", unsafe.Offsetof(dv.SetSleepLatency), u32), f("sleepLatency", unsafe.Offsetof(dv.SleepLatency), u32),
			f("setSleepDisable", unsafe.Offsetof(dv.SetSleepDisable), u32), f("sleepDisable", unsafe.Offsetof(dv.SleepDisable), u32),
			f("setBusParams", unsafe.Offsetof(dv.SetBusParams), u32), f("busVoltageCornerMin", unsafe.Offsetof(dv.BusVoltageCornerMin), u32),
			f("busVoltageCornerTarget", unsafe.Offsetof(dv.BusVoltageCornerTarget), u32), f("busVoltageCornerMax", unsafe.Offsetof(dv.BusVoltageCornerMax), u32),
			f("setCoreParams", unsafe.Offsetof(dv.SetCoreParams), u32), f("coreVoltageCornerMin", unsafe.Offsetof(dv.CoreVoltageCornerMin), u32),
			f("coreVoltageCornerTarget", unsafe.Offsetof(dv.CoreVoltageCornerTgt), u32), f("coreVoltageCornerMax", unsafe.Offsetof(dv.CoreVoltageCornerMax), u32)}},
		{"QnnHtpPerfInfrastructure_PowerConfig_t", unsafe.Sizeof(pc), []field{
			f("option", unsafe.Offsetof(pc.Option), u32), f("dcvsV3Config", unsafe.Offsetof(pc.Union), unsafe.Sizeof(dv)),
			f("rpcControlLatencyConfig", unsafe.Offsetof(pc.Union), u32), f("rpcPollingTimeConfig", unsafe.Offsetof(pc.Union), u32)}},
		{"QnnProfile_EventData_t", unsafe.Sizeof(ev), []field{
			f("type", unsafe.Offsetof(ev.Type), u32), f("unit", unsafe.Offsetof(ev.Unit), u32),
			f("value", unsafe.Offsetof(ev.Value), 8), f("identifier", unsafe.Offsetof(ev.Identifier), ptr)}},
	}
	for _, c := range cases {
		want, ok := lt.structs[c.cname]
		if !ok {
			t.Errorf("%s: not in the layout table", c.cname)
			continue
		}
		if c.size != 0 && c.size != want.size {
			t.Errorf("sizeof(%s): Go mirror %d, table %d", c.cname, c.size, want.size)
		}
		for _, fl := range c.fields {
			w, ok := want.fields[fl.name]
			if !ok {
				t.Errorf("%s.%s: not in the layout table", c.cname, fl.name)
				continue
			}
			if fl.off != w[0] || fl.size != w[1] {
				t.Errorf("%s.%s: Go mirror off=%d size=%d, table off=%d size=%d", c.cname, fl.name, fl.off, fl.size, w[0], w[1])
			}
		}
	}
	// The HTP device-info extension: device type, then the on-chip
	// extension at offset 8 (a union aligned for its size_t member).
	if exts != 8+lt.structs["QnnHtpDevice_OnChipDeviceInfoExtension_t"].size {
		t.Errorf("htpDeviceInfoExtension is %d bytes, want 8 + on-chip extension", exts)
	}
	// Graph-info array strides: the current one, and the one of libraries
	// that predate graph-info v3 (version word + the 56-byte v2 union).
	if v2 := lt.structs["QnnSystemContext_GraphInfoV2_t"].size; graphInfoStrideOld != 8+v2 {
		t.Errorf("old graph-info stride %d, want 8 + sizeof(GraphInfoV2) = %d", graphInfoStrideOld, 8+v2)
	}
}

func tensorV1Fields(v *tensorV1, base uintptr) []field {
	ptr := unsafe.Sizeof(uintptr(0))
	return []field{
		f("id", base+unsafe.Offsetof(v.ID), 4), f("name", base+unsafe.Offsetof(v.Name), ptr),
		f("type", base+unsafe.Offsetof(v.Type), 4), f("dataFormat", base+unsafe.Offsetof(v.DataFormat), 4),
		f("dataType", base+unsafe.Offsetof(v.DataType), 4),
		f("quantizeParams", base+unsafe.Offsetof(v.QuantizeParams), unsafe.Sizeof(v.QuantizeParams)),
		f("rank", base+unsafe.Offsetof(v.Rank), 4), f("dimensions", base+unsafe.Offsetof(v.Dimensions), ptr),
		f("memType", base+unsafe.Offsetof(v.MemType), 4),
		f("clientBuf", base+unsafe.Offsetof(v.ClientBuf), unsafe.Sizeof(v.ClientBuf)),
		f("memHandle", base+unsafe.Offsetof(v.ClientBuf), ptr),
	}
}

func binaryInfoV1Fields(b *binaryInfoV1) []field {
	ptr, u32, v12 := unsafe.Sizeof(uintptr(0)), unsafe.Sizeof(uint32(0)), unsafe.Sizeof(qnnVersion{})
	return []field{
		f("backendId", unsafe.Offsetof(b.BackendID), u32), f("buildId", unsafe.Offsetof(b.BuildID), ptr),
		f("coreApiVersion", unsafe.Offsetof(b.CoreAPIVersion), v12), f("backendApiVersion", unsafe.Offsetof(b.BackendAPIVersion), v12),
		f("socVersion", unsafe.Offsetof(b.SocVersion), ptr), f("hwInfoBlobVersion", unsafe.Offsetof(b.HwInfoBlobVersion), v12),
		f("contextBlobVersion", unsafe.Offsetof(b.ContextBlobVersion), v12), f("hwInfoBlobSize", unsafe.Offsetof(b.HwInfoBlobSize), u32),
		f("hwInfoBlob", unsafe.Offsetof(b.HwInfoBlob), ptr), f("contextBlobSize", unsafe.Offsetof(b.ContextBlobSize), 8),
		f("numContextTensors", unsafe.Offsetof(b.NumContextTensors), u32), f("contextTensors", unsafe.Offsetof(b.ContextTensors), ptr),
		f("numGraphs", unsafe.Offsetof(b.NumGraphs), u32), f("graphs", unsafe.Offsetof(b.Graphs), ptr),
	}
}

// TestLayoutAbsoluteOffsets checks the [abs] lines the table gives for the
// fields a runtime most often gets wrong.
func TestLayoutAbsoluteOffsets(t *testing.T) {
	var tt qnnTensor
	v1 := unsafe.Offsetof(tt.V2) + unsafe.Offsetof(tt.V2.tensorV1)
	var v tensorV1
	got := map[string]uintptr{
		"v1.name": v1 + unsafe.Offsetof(v.Name), "v1.dataType": v1 + unsafe.Offsetof(v.DataType),
		"v1.quantizeParams": v1 + unsafe.Offsetof(v.QuantizeParams), "v1.rank": v1 + unsafe.Offsetof(v.Rank),
		"v1.dimensions": v1 + unsafe.Offsetof(v.Dimensions), "v1.memType": v1 + unsafe.Offsetof(v.MemType),
		"v1.clientBuf.data": v1 + unsafe.Offsetof(v.ClientBuf), "v1.clientBuf.dataSize": v1 + unsafe.Offsetof(v.ClientBuf) + unsafe.Offsetof(v.ClientBuf.DataSize),
		"v2.isDynamicDimensions": unsafe.Offsetof(tt.V2) + unsafe.Offsetof(tt.V2.IsDynamicDimensions),
		"v2.sparseParams":        unsafe.Offsetof(tt.V2) + unsafe.Offsetof(tt.V2.SparseParams),
		"v2.isProduced":          unsafe.Offsetof(tt.V2) + unsafe.Offsetof(tt.V2.IsProduced),
	}
	data, err := os.ReadFile("testdata/layout-api2.32.txt")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\[abs\] (v1\.name=.*)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no [abs] line for Qnn_Tensor_t in the layout table")
	}
	seen := 0
	for _, kv := range regexp.MustCompile(`([\w.]+)=(\d+)`).FindAllStringSubmatch(string(m[1]), -1) {
		want, _ := strconv.Atoi(kv[2])
		if g, ok := got[kv[1]]; ok {
			seen++
			if g != uintptr(want) {
				t.Errorf("Qnn_Tensor_t %s at %d, table says %d", kv[1], g, want)
			}
		}
	}
	if seen != len(got) {
		t.Errorf("checked %d of %d absolute offsets", seen, len(got))
	}
	var b1 binaryInfoV1
	var b3 binaryInfoV3
	hdr := unsafe.Sizeof(binaryInfoHeader{})
	m = regexp.MustCompile(`numGraphs=(\d+)/(\d+)/(\d+) graphs=(\d+)/(\d+)/(\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no [abs] line for QnnSystemContext_BinaryInfo_t")
	}
	want := func(i int) uintptr { n, _ := strconv.Atoi(string(m[i])); return uintptr(n) }
	if g := hdr + unsafe.Offsetof(b1.NumGraphs); g != want(1) || g != want(2) {
		t.Errorf("v1/v2 numGraphs at %d, table %d/%d", g, want(1), want(2))
	}
	if g := hdr + unsafe.Offsetof(b3.NumGraphs); g != want(3) {
		t.Errorf("v3 numGraphs at %d, table %d", g, want(3))
	}
	if g := hdr + unsafe.Offsetof(b1.Graphs); g != want(4) || g != want(5) {
		t.Errorf("v1/v2 graphs at %d, table %d/%d", g, want(4), want(5))
	}
	if g := hdr + unsafe.Offsetof(b3.Graphs); g != want(6) {
		t.Errorf("v3 graphs at %d, table %d", g, want(6))
	}
}

func TestFunctionTableIndices(t *testing.T) {
	lt := loadLayout(t)
	core := lt.functions["QNN_INTERFACE_VER_TYPE"]
	if len(core) != coreTableLen2_32 {
		t.Fatalf("table lists %d core entries, runtime assumes %d for API 2.32", len(core), coreTableLen2_32)
	}
	for name, idx := range map[string]int{
		"propertyHasCapability": fnPropertyHasCapability, "backendCreate": fnBackendCreate, "backendFree": fnBackendFree,
		"contextCreateFromBinary": fnContextCreateFromBinary, "contextFree": fnContextFree,
		"graphRetrieve": fnGraphRetrieve, "graphExecute": fnGraphExecute, "logCreate": fnLogCreate, "logFree": fnLogFree,
		"profileCreate": fnProfileCreate, "profileGetEvents": fnProfileGetEvents, "profileGetEventData": fnProfileGetEventData,
		"profileFree": fnProfileFree, "memRegister": fnMemRegister, "memDeRegister": fnMemDeRegister,
		"deviceGetInfrastructure": fnDeviceGetInfrastructure, "deviceCreate": fnDeviceCreate, "deviceFree": fnDeviceFree,
		"errorGetMessage": fnErrorGetMessage,
	} {
		if w, ok := core[name]; !ok || w != idx {
			t.Errorf("core entry %s: runtime index %d, table %d (present %v)", name, idx, w, ok)
		}
		if idx >= coreTableLen2_18 || idx >= numCoreFns {
			t.Errorf("core entry %s at %d is outside the API 2.18 table (%d entries) or the runtime's read range (%d)", name, idx, coreTableLen2_18, numCoreFns)
		}
	}
	sys := lt.functions["QNN_SYSTEM_INTERFACE_VER_TYPE"]
	if len(sys) != systemTableLen1_1 {
		t.Errorf("table lists %d system entries, runtime assumes %d", len(sys), systemTableLen1_1)
	}
	for name, idx := range map[string]int{
		"systemContextCreate": fnSystemContextCreate, "systemContextGetBinaryInfo": fnSystemContextGetBinaryInfo,
		"systemContextGetMetaData": fnSystemContextGetMetaData, "systemContextFree": fnSystemContextFree,
	} {
		if w, ok := sys[name]; !ok || w != idx {
			t.Errorf("system entry %s: runtime index %d, table %d (present %v)", name, idx, w, ok)
		}
	}
}

func TestConstantsMatchTable(t *testing.T) {
	lt := loadLayout(t)
	for name, v := range map[string]uint64{
		"QNN_BACKEND_ID_HTP": backendIDHTP, "QNN_BACKEND_ID_CPU": backendIDCPU,
		"QNN_DATATYPE_INT_8": uint64(Int8), "QNN_DATATYPE_INT_16": uint64(Int16), "QNN_DATATYPE_INT_32": uint64(Int32),
		"QNN_DATATYPE_INT_64": uint64(Int64), "QNN_DATATYPE_UINT_8": uint64(Uint8), "QNN_DATATYPE_UINT_16": uint64(Uint16),
		"QNN_DATATYPE_UINT_32": uint64(Uint32), "QNN_DATATYPE_UINT_64": uint64(Uint64), "QNN_DATATYPE_FLOAT_16": uint64(Float16),
		"QNN_DATATYPE_BFLOAT_16": uint64(BFloat16), "QNN_DATATYPE_FLOAT_32": uint64(Float32), "QNN_DATATYPE_FLOAT_64": uint64(Float64),
		"QNN_DATATYPE_SFIXED_POINT_4": uint64(SFixedPoint4), "QNN_DATATYPE_SFIXED_POINT_8": uint64(SFixedPoint8),
		"QNN_DATATYPE_SFIXED_POINT_16": uint64(SFixedPoint16), "QNN_DATATYPE_SFIXED_POINT_32": uint64(SFixedPoint32),
		"QNN_DATATYPE_UFIXED_POINT_4": uint64(UFixedPoint4), "QNN_DATATYPE_UFIXED_POINT_8": uint64(UFixedPoint8),
		"QNN_DATATYPE_UFIXED_POINT_16": uint64(UFixedPoint16), "QNN_DATATYPE_UFIXED_POINT_32": uint64(UFixedPoint32),
		"QNN_DATATYPE_BOOL_8": uint64(Bool8), "QNN_DATATYPE_STRING": uint64(StringType), "QNN_DATATYPE_UNDEFINED": uint64(Undefined),
		"QNN_TENSOR_TYPE_APP_WRITE": tensorTypeAppWrite, "QNN_TENSOR_TYPE_APP_READ": tensorTypeAppRead,
		"QNN_TENSORMEMTYPE_RAW": memTypeRaw, "QNN_TENSORMEMTYPE_MEMHANDLE": memTypeMemHandle,
		"QNN_TENSOR_VERSION_1": tensorVersion1, "QNN_TENSOR_VERSION_2": tensorVersion2,
		"QNN_DEFINITION_DEFINED": definitionDefined, "QNN_DEFINITION_UNDEFINED": definitionUndefined,
		"QNN_QUANTIZATION_ENCODING_SCALE_OFFSET": encodingScaleOffset, "QNN_QUANTIZATION_ENCODING_BW_SCALE_OFFSET": encodingBwScaleOffset,
		"QNN_LOG_LEVEL_WARN": logLevelWarn, "QNN_PROFILE_LEVEL_BASIC": profileLevelBasic,
		"QNN_PROFILE_EVENTTYPE_EXECUTE": profileEventExecute, "QNN_PROFILE_EVENTUNIT_MICROSEC": profileUnitMicrosec,
		"QNN_MEM_TYPE_ION":                         qnnMemTypeION,
		"QNN_MEM_TYPE_CUSTOM":                      qnnMemTypeCustom,
		"QNN_HTP_MEM_SHARED_BUFFER":                htpMemSharedBuffer,
		"QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_1": binaryInfoVersion1, "QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_2": binaryInfoVersion2,
		"QNN_SYSTEM_CONTEXT_BINARY_INFO_VERSION_3": binaryInfoVersion3, "QNN_SYSTEM_CONTEXT_GRAPH_INFO_VERSION_3": graphInfoVersion3,
		"QNN_HTP_DEVICE_INFRASTRUCTURE_TYPE_PERF":                            infraTypePerf,
		"QNN_CONTEXT_CONFIG_PERSISTENT_BINARY":                               contextConfigPersist,
		"QNN_CONTEXT_CONFIG_OPTION_CUSTOM":                                   contextConfigCustom,
		"QNN_HTP_CONTEXT_CONFIG_OPTION_REGISTER_MULTI_CONTEXTS":              htpContextRegisterMultiContexts,
		"QNN_SYSTEM_CONTEXT_HTP_GRAPH_INFO_BLOB_VERSION_V1":                  htpGraphBlobInfoV1,
		"QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_DCVS_V3":             powerOptDcvsV3,
		"QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_CONTROL_LATENCY": powerOptRPCLatency,
		"QNN_HTP_PERF_INFRASTRUCTURE_POWER_CONFIGOPTION_RPC_POLLING_TIME":    powerOptRPCPolling,
		"QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_ADJUST_UP_DOWN":               powerModeAdjustUpDown,
		"QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_POWER_SAVER_MODE":             powerModePowerSaver,
		"QNN_HTP_PERF_INFRASTRUCTURE_POWERMODE_PERFORMANCE_MODE":             powerModePerformance,
		"DCVS_VOLTAGE_VCORNER_SVS":                                           vcornerSVS, "DCVS_VOLTAGE_VCORNER_TURBO": vcornerTurbo,
		"DCVS_VOLTAGE_VCORNER_MAX_VOLTAGE_CORNER":     vcornerMax,
		"QNN_PROPERTY_GROUP_DEVICE":                   propertyGroupDevice,
		"QNN_COMMON_ERROR_SYSTEM_COMMUNICATION":       codeSystemCommunication,
		"QNN_COMMON_ERROR_SYSTEM_COMMUNICATION_FATAL": codeSystemCommunicationFatal,
	} {
		w, ok := lt.constants[name]
		if !ok {
			t.Errorf("%s: not in the layout table", name)
		} else if w != v {
			t.Errorf("%s: runtime %d, table %d", name, v, w)
		}
	}
}

// TestErrorNamesMatchTable checks ErrorName against every error code the
// table lists.
func TestErrorNamesMatchTable(t *testing.T) {
	data, err := os.ReadFile("testdata/layout-api2.32.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := bytes.Cut(data, []byte("error codes"))
	if !ok {
		t.Fatal("no error-code section in the layout table")
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(section))
	for sc.Scan() {
		m := reConst.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		code, _ := strconv.ParseUint(m[2], 10, 64)
		if got := ErrorName(code); got != m[1] {
			t.Errorf("ErrorName(%d) = %s, table %s", code, got, m[1])
		}
		n++
	}
	if n < 50 {
		t.Errorf("checked only %d error codes", n)
	}
}
