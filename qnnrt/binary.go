package qnnrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// Quantization is a tensor's quantization parameters. Defined is true only
// when the library marks the encoding DEFINED; float tensors come with
// UNDEFINED and zeros.
type Quantization struct {
	Defined  bool
	Encoding uint32  // QNN_QUANTIZATION_ENCODING_*: 0 scale/offset, 2 bit-width scale/offset, ...
	Scale    float32 // scale/offset encodings: real = (q + Offset) * Scale
	Offset   int32
	Bitwidth uint32 // bit-width scale/offset encoding only
}

// TensorInfo describes one graph input or output as the context binary
// declares it.
type TensorInfo struct {
	Version  uint32 // Qnn_Tensor_t version reported (1 or 2)
	ID       uint32
	Name     string
	Type     uint32 // QNN_TENSOR_TYPE_*: 0 APP_WRITE (input), 1 APP_READ (output), ...
	DataType DataType
	Dims     []uint32
	Quant    Quantization
}

// Elements is the product of the dimensions (1 for a scalar).
func (t TensorInfo) Elements() int {
	n := 1
	for _, d := range t.Dims {
		n *= int(d)
	}
	return n
}

// Bytes is Elements times the element size (0 for a type without one).
func (t TensorInfo) Bytes() int { return t.Elements() * t.DataType.Size() }

// Shape formats the dimensions as [d0,d1,...].
func (t TensorInfo) Shape() string { return formatDims(t.Dims) }

func formatDims(dims []uint32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range dims {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// GraphInfo describes one graph of a context binary.
type GraphInfo struct {
	Name    string
	Inputs  []TensorInfo
	Outputs []TensorInfo
	// SpillFill is the HTP spill-fill buffer size the graph needs, from
	// graph-info v3's HTP graph blob info; 0 when the metadata has none.
	SpillFill uint64
}

// ContextInfo is the metadata of a context binary, deep-copied out of the
// system library.
type ContextInfo struct {
	Path              string  // file read, "" when parsed from memory
	Size              int64   // file size in bytes
	Format            Version // container format from the file header (2.2, 2.3, ...)
	BinaryInfoVersion uint32  // QnnSystemContext_BinaryInfo_t version (1, 2 or 3)
	GraphInfoStride   int     // the system library's sizeof(QnnSystemContext_GraphInfo_t) as detected
	BackendID         uint32
	BuildID           string
	CoreAPI           Version
	BackendAPI        Version
	SocVersion        string // "" when absent
	SocModel          uint32 // 0 when absent (binary info v3, or the platform info)
	DSPArch           uint32 // HTP architecture (e.g. 79 for v79), 0 when absent
	ContextBlobSize   uint64
	// SpillFillBufferSize is the largest spill-fill buffer the context's
	// graphs need: the largest GraphInfo.SpillFill, or, for binary info
	// v1/v2, the HTP hardware-info blob's spillFillBufferSize when that is
	// larger. 0 when the metadata reports none.
	SpillFillBufferSize uint64
	Graphs              []GraphInfo
}

// Graph returns the graph named name.
func (c *ContextInfo) Graph(name string) (*GraphInfo, bool) {
	for i := range c.Graphs {
		if c.Graphs[i].Name == name {
			return &c.Graphs[i], true
		}
	}
	return nil, false
}

// GraphNames lists the graphs in binary order.
func (c *ContextInfo) GraphNames() []string {
	names := make([]string, len(c.Graphs))
	for i, g := range c.Graphs {
		names[i] = g.Name
	}
	return names
}

// WriteListing writes a human-readable description of the binary: the
// ids, versions and every graph's inputs and outputs with their types,
// shapes and quantization.
func (c *ContextInfo) WriteListing(w io.Writer) error {
	ew := &errWriter{w: w}
	if c.Path != "" {
		ew.printf("context binary %s\n", c.Path)
	}
	ew.printf("  size            %d bytes (%s)\n", c.Size, humanBytes(c.Size))
	ew.printf("  format          %d.%d\n", c.Format.Major, c.Format.Minor)
	ew.printf("  binary info     v%d (graph-info stride %d)\n", c.BinaryInfoVersion, c.GraphInfoStride)
	ew.printf("  backend         %d (%s)\n", c.BackendID, backendName(c.BackendID))
	ew.printf("  core API        %s\n", c.CoreAPI)
	ew.printf("  backend API     %s\n", c.BackendAPI)
	ew.printf("  build id        %s\n", orDash(c.BuildID))
	ew.printf("  SoC version     %s\n", orDash(c.SocVersion))
	if c.SocModel != 0 {
		ew.printf("  SoC model       %d\n", c.SocModel)
	} else {
		ew.printf("  SoC model       -\n")
	}
	if c.DSPArch != 0 {
		ew.printf("  DSP arch        v%d\n", c.DSPArch)
	} else {
		ew.printf("  DSP arch        -\n")
	}
	if c.SpillFillBufferSize != 0 {
		ew.printf("  spill-fill      %d bytes (%s)\n", c.SpillFillBufferSize, humanBytes(int64(c.SpillFillBufferSize)))
	} else {
		ew.printf("  spill-fill      -\n")
	}
	ew.printf("  graphs          %d\n", len(c.Graphs))
	for _, g := range c.Graphs {
		ew.printf("\ngraph %q: %d input(s), %d output(s)", g.Name, len(g.Inputs), len(g.Outputs))
		if g.SpillFill != 0 {
			ew.printf(", spill-fill %s", humanBytes(int64(g.SpillFill)))
		}
		ew.printf("\n")
		for i, t := range g.Inputs {
			ew.printf("  in  %2d  %s\n", i, describeTensor(t))
		}
		for i, t := range g.Outputs {
			ew.printf("  out %2d  %s\n", i, describeTensor(t))
		}
	}
	return ew.err
}

func describeTensor(t TensorInfo) string {
	s := fmt.Sprintf("%-24s id %-4d %-16s %-22s %s", t.Name, t.ID, t.DataType, t.Shape(), humanBytes(int64(t.Bytes())))
	if t.Quant.Defined {
		switch t.Quant.Encoding {
		case encodingScaleOffset:
			s += fmt.Sprintf("  scale %g offset %d", t.Quant.Scale, t.Quant.Offset)
		case encodingBwScaleOffset:
			s += fmt.Sprintf("  bitwidth %d scale %g offset %d", t.Quant.Bitwidth, t.Quant.Scale, t.Quant.Offset)
		default:
			s += fmt.Sprintf("  quantization encoding %d", t.Quant.Encoding)
		}
	}
	return s
}

func backendName(id uint32) string {
	switch id {
	case backendIDHTP:
		return "HTP"
	case backendIDCPU:
		return "CPU"
	}
	return "unknown"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// Inspect reads the metadata of the context binary at path with the system
// library of opts and writes the listing of ContextInfo.WriteListing to w.
// It does not need the backend library.
func Inspect(w io.Writer, path string, opts Options) error {
	l, err := OpenSystem(opts)
	if err != nil {
		return err
	}
	info, err := l.ReadContextInfo(path)
	if err == nil {
		err = info.WriteListing(w)
	}
	return errors.Join(err, l.Close())
}

// mappedFile is a context binary mapped read-only.
type mappedFile struct {
	path   string
	data   []byte
	format Version
}

func (m *mappedFile) unmap() error {
	if m.data == nil {
		return nil
	}
	d := m.data
	m.data = nil
	if err := syscall.Munmap(d); err != nil {
		return fmt.Errorf("qnnrt: munmap %s: %w", m.path, err)
	}
	return nil
}

// Header facts of the context-binary container.
const (
	headerLen            = 0x28
	headerPayloadOffset  = 0x18
	headerPayloadSize    = 0x20
	containerMajor       = 2
	containerMaxMinor    = 255
	containerSizedMinor  = 3 // from 2.3 the header records the payload offset and size
	maxContextBinarySize = 1 << 40
)

// mapContextBinary maps path read-only and checks the container header, so
// that a file that is not a context binary fails early and clearly.
func mapContextBinary(path string) (*mappedFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("qnnrt: open context binary: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("qnnrt: stat context binary: %w", err)
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("qnnrt: context binary %s is not a regular file", path)
	}
	if size == 0 {
		return nil, fmt.Errorf("qnnrt: context binary %s is empty", path)
	}
	if size < headerLen {
		return nil, fmt.Errorf("qnnrt: %s is not a QNN context binary: %d bytes is shorter than the %d-byte header", path, size, headerLen)
	}
	if size > maxContextBinarySize || int64(int(size)) != size {
		return nil, fmt.Errorf("qnnrt: context binary %s is too large (%d bytes)", path, size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("qnnrt: mmap context binary %s: %w", path, err)
	}
	m := &mappedFile{path: path, data: data}
	if m.format, err = checkHeader(path, data); err != nil {
		_ = m.unmap()
		return nil, err
	}
	return m, nil
}

// checkHeader validates the container header of a context binary.
func checkHeader(path string, data []byte) (Version, error) {
	if len(data) < headerLen {
		return Version{}, fmt.Errorf("qnnrt: %s is not a QNN context binary: %d bytes is shorter than the %d-byte header", path, len(data), headerLen)
	}
	v := Version{Major: binary.BigEndian.Uint32(data[0:4]), Minor: binary.BigEndian.Uint32(data[4:8])}
	if v.Major != containerMajor || v.Minor > containerMaxMinor {
		return v, fmt.Errorf("qnnrt: %s is not a QNN context binary: header starts % x, want format 2.x (big-endian 00 00 00 02 then the minor)",
			path, data[:8])
	}
	if v.Minor >= containerSizedMinor {
		off := binary.LittleEndian.Uint64(data[headerPayloadOffset:])
		n := binary.LittleEndian.Uint64(data[headerPayloadSize:])
		if off < headerLen || off > uint64(len(data)) || n != uint64(len(data))-off {
			return v, fmt.Errorf("qnnrt: %s is not a valid QNN context binary (format %d.%d): payload offset %d + size %d != file size %d (truncated or padded?)",
				path, v.Major, v.Minor, off, n, len(data))
		}
	}
	return v, nil
}

// ReadContextInfo maps the context binary at path and returns its metadata
// as the system library reports it.
func (l *Library) ReadContextInfo(path string) (*ContextInfo, error) {
	m, err := mapContextBinary(path)
	if err != nil {
		return nil, err
	}
	defer m.unmap()
	info, err := l.parseContextInfo(m.data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	info.Path = path
	info.Format = m.format
	return info, nil
}

// ParseContextInfo returns the metadata of a context binary held in memory.
func (l *Library) ParseContextInfo(buf []byte) (*ContextInfo, error) {
	v, err := checkHeader("buffer", buf)
	if err != nil {
		return nil, err
	}
	info, err := l.parseContextInfo(buf)
	if err != nil {
		return nil, err
	}
	info.Format = v
	return info, nil
}

func (l *Library) parseContextInfo(buf []byte) (*ContextInfo, error) {
	l.mu.Lock()
	closed := l.closed || l.systemHandle == 0
	l.mu.Unlock()
	if closed {
		return nil, errors.New("qnnrt: library is closed")
	}
	if len(buf) == 0 {
		return nil, errors.New("qnnrt: context binary is empty")
	}
	var sys uintptr
	if ret := ccall(l.sys[fnSystemContextCreate], uintptr(unsafe.Pointer(&sys))); ret != 0 {
		return nil, l.qnnError("systemContextCreate", ret)
	}
	var info unsafe.Pointer
	if ret := ccall(l.sys[fnSystemContextGetMetaData], sys, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&info))); ret != 0 {
		ccall(l.sys[fnSystemContextFree], sys)
		return nil, l.qnnError("systemContextGetMetaData", ret)
	}
	ci, perr := readBinaryInfo(info)
	if ret := ccall(l.sys[fnSystemContextFree], sys); ret != 0 && perr == nil {
		return nil, l.qnnError("systemContextFree", ret)
	}
	if perr != nil {
		return nil, perr
	}
	ci.Size = int64(len(buf))
	return ci, nil
}

// readBinaryInfo deep-copies a QnnSystemContext_BinaryInfo_t.
func readBinaryInfo(p unsafe.Pointer) (*ContextInfo, error) {
	if p == nil {
		return nil, errors.New("qnnrt: system library returned no binary info")
	}
	hdr := (*binaryInfoHeader)(p)
	body := unsafe.Add(p, unsafe.Sizeof(binaryInfoHeader{}))
	ci := &ContextInfo{BinaryInfoVersion: hdr.Version}
	var numGraphs uint32
	var graphs, platform unsafe.Pointer
	switch hdr.Version {
	case binaryInfoVersion1, binaryInfoVersion2:
		b := (*binaryInfoV1)(body)
		ci.BackendID = b.BackendID
		ci.BuildID = goString(b.BuildID)
		ci.CoreAPI = b.CoreAPIVersion.version()
		ci.BackendAPI = b.BackendAPIVersion.version()
		ci.SocVersion = goString(b.SocVersion)
		ci.ContextBlobSize = b.ContextBlobSize
		numGraphs, graphs = b.NumGraphs, b.Graphs
		if hdr.Version == binaryInfoVersion2 {
			platform = (*binaryInfoV2)(body).PlatformInfo
		}
		ci.SpillFillBufferSize = readHwBlobSpillFill(b.HwInfoBlob, b.HwInfoBlobSize)
	case binaryInfoVersion3:
		b := (*binaryInfoV3)(body)
		ci.BackendID = b.BackendID
		ci.BuildID = goString(b.BuildID)
		ci.CoreAPI = b.CoreAPIVersion.version()
		ci.BackendAPI = b.BackendAPIVersion.version()
		ci.SocVersion = goString(b.SocVersion)
		ci.ContextBlobSize = b.ContextBlobSize
		ci.SocModel = b.SocModel
		numGraphs, graphs, platform = b.NumGraphs, b.Graphs, b.PlatformInfo
	default:
		return nil, fmt.Errorf("qnnrt: system library reports binary info version %d; this runtime reads versions 1, 2 and 3", hdr.Version)
	}
	if soc, arch := readPlatformInfo(platform); soc != 0 || arch != 0 {
		if ci.SocModel == 0 {
			ci.SocModel = soc
		}
		ci.DSPArch = arch
	}
	if numGraphs > maxGraphs {
		return nil, fmt.Errorf("qnnrt: binary info lists %d graphs (more than %d: corrupt metadata)", numGraphs, maxGraphs)
	}
	if numGraphs > 0 && graphs == nil {
		return nil, fmt.Errorf("qnnrt: binary info lists %d graphs but no graph array", numGraphs)
	}
	stride, err := graphInfoStride(graphs, int(numGraphs))
	if err != nil {
		return nil, err
	}
	ci.GraphInfoStride = stride
	for i := range int(numGraphs) {
		g, err := readGraphInfo(unsafe.Add(graphs, i*stride))
		if err != nil {
			return nil, fmt.Errorf("qnnrt: graph %d of the binary info: %w", i, err)
		}
		if stride == graphInfoStrideV3 {
			g.SpillFill = readGraphSpillFill((*systemGraphInfoV3)(unsafe.Add(graphs, i*stride)))
		}
		ci.SpillFillBufferSize = max(ci.SpillFillBufferSize, g.SpillFill)
		ci.Graphs = append(ci.Graphs, g)
	}
	return ci, nil
}

// graphInfoStride determines the library's sizeof(QnnSystemContext_GraphInfo_t).
// A graph-info v3 entry proves the 88-byte layout. Otherwise the 64-byte
// stride is tried first: it never reads past an array of either stride, and
// with 88-byte entries it lands on bytes that do not form a valid entry.
func graphInfoStride(graphs unsafe.Pointer, n int) (int, error) {
	if n == 0 {
		return graphInfoStrideV3, nil
	}
	first := (*systemGraphInfo)(graphs)
	if first.Version == graphInfoVersion3 {
		return graphInfoStrideV3, nil
	}
	if !plausibleGraphInfo(first) {
		return 0, fmt.Errorf("qnnrt: first graph info is not valid (version %d)", first.Version)
	}
	if n == 1 {
		return graphInfoStrideOld, nil
	}
	for _, stride := range []int{graphInfoStrideOld, graphInfoStrideV3} {
		ok := true
		for i := 1; i < n && ok; i++ {
			ok = plausibleGraphInfo((*systemGraphInfo)(unsafe.Add(graphs, i*stride)))
		}
		if ok {
			return stride, nil
		}
	}
	return 0, fmt.Errorf("qnnrt: cannot tell the graph-info stride of the system library (neither %d nor %d bytes gives %d valid entries)",
		graphInfoStrideOld, graphInfoStrideV3, n)
}

func plausibleGraphInfo(g *systemGraphInfo) bool {
	if g.Version < 1 || g.Version > graphInfoVersion3 || g.V1.GraphName == nil {
		return false
	}
	if g.V1.NumGraphInputs > maxTensorsPerGraph || g.V1.NumGraphOutputs > maxTensorsPerGraph {
		return false
	}
	return (g.V1.NumGraphInputs == 0 || g.V1.GraphInputs != nil) && (g.V1.NumGraphOutputs == 0 || g.V1.GraphOutputs != nil)
}

func readGraphInfo(p unsafe.Pointer) (GraphInfo, error) {
	g := (*systemGraphInfo)(p)
	if !plausibleGraphInfo(g) {
		return GraphInfo{}, fmt.Errorf("invalid graph info (version %d, %d inputs, %d outputs)", g.Version, g.V1.NumGraphInputs, g.V1.NumGraphOutputs)
	}
	out := GraphInfo{Name: goString(g.V1.GraphName)}
	var err error
	if out.Inputs, err = readTensors(g.V1.GraphInputs, int(g.V1.NumGraphInputs)); err != nil {
		return out, fmt.Errorf("graph %q inputs: %w", out.Name, err)
	}
	if out.Outputs, err = readTensors(g.V1.GraphOutputs, int(g.V1.NumGraphOutputs)); err != nil {
		return out, fmt.Errorf("graph %q outputs: %w", out.Name, err)
	}
	return out, nil
}

func readTensors(p unsafe.Pointer, n int) ([]TensorInfo, error) {
	out := make([]TensorInfo, 0, n)
	for i := range n {
		t := (*qnnTensor)(unsafe.Add(p, uintptr(i)*unsafe.Sizeof(qnnTensor{})))
		if t.Version != tensorVersion1 && t.Version != tensorVersion2 {
			return nil, fmt.Errorf("tensor %d has Qnn_Tensor_t version %d; want 1 or 2", i, t.Version)
		}
		v := &t.V2.tensorV1
		ti := TensorInfo{Version: t.Version, ID: v.ID, Name: goString(v.Name), Type: v.Type, DataType: DataType(v.DataType)}
		if v.Rank > maxRank || (v.Rank > 0 && v.Dimensions == nil) {
			return nil, fmt.Errorf("tensor %q has rank %d with dimensions %p", ti.Name, v.Rank, v.Dimensions)
		}
		if v.Rank > 0 {
			ti.Dims = append([]uint32(nil), unsafe.Slice((*uint32)(v.Dimensions), v.Rank)...)
		}
		q := &v.QuantizeParams
		ti.Quant = Quantization{Defined: q.EncodingDefinition == definitionDefined, Encoding: q.QuantizationEncoding}
		if ti.Quant.Defined {
			switch q.QuantizationEncoding {
			case encodingScaleOffset:
				so := q.scaleOffset()
				ti.Quant.Scale, ti.Quant.Offset = so.Scale, so.Offset
			case encodingBwScaleOffset:
				bw := q.bwScaleOffset()
				ti.Quant.Bitwidth, ti.Quant.Scale, ti.Quant.Offset = bw.Bitwidth, bw.Scale, bw.Offset
			}
		}
		out = append(out, ti)
	}
	return out, nil
}

// readPlatformInfo follows QnnDevice_PlatformInfo_t to the first HTP
// hardware device's on-chip extension and returns its SoC model and
// architecture, or zeros when any link is missing.
func readPlatformInfo(p unsafe.Pointer) (socModel, arch uint32) {
	if p == nil {
		return 0, 0
	}
	pi := (*platformInfo)(p)
	if pi.Version != 1 || pi.NumHwDevices == 0 || pi.NumHwDevices > 64 || pi.HwDevices == nil {
		return 0, 0
	}
	hw := (*hardwareDeviceInfo)(pi.HwDevices)
	if hw.Version != 1 || hw.DeviceInfoExtension == nil {
		return 0, 0
	}
	ext := (*htpDeviceInfoExtension)(hw.DeviceInfoExtension)
	if ext.DevType != 0 {
		return 0, 0
	}
	return ext.OnChip.SocModel, ext.OnChip.Arch
}

// maxSpillFill bounds a spill-fill size read from metadata: more than the
// DSP's 4 GB address space is corrupt metadata, read as 0 (none).
const maxSpillFill = 1 << 32

// readGraphSpillFill returns the spill-fill size in a graph-info v3 entry's
// HTP graph blob info (QnnHtpSystemContext_GraphBlobInfo_t version 1), or 0
// when the entry is another version, has no blob, a blob too small or of
// another version, or an implausible size.
func readGraphSpillFill(g *systemGraphInfoV3) uint64 {
	if g.Version != graphInfoVersion3 || g.GraphBlobInfo == nil ||
		uintptr(g.GraphBlobInfoSize) < unsafe.Offsetof(htpGraphBlobInfo{}.SpillFillBufferSize)+8 {
		return 0
	}
	b := (*htpGraphBlobInfo)(g.GraphBlobInfo)
	if b.Version != htpGraphBlobInfoV1 || b.SpillFillBufferSize > maxSpillFill {
		return 0
	}
	return b.SpillFillBufferSize
}

// readHwBlobSpillFill returns the spill-fill size of a binary info v1/v2
// HTP hardware-info blob (QnnHtpSystemContext_HwBlobInfo_t version 1), or 0
// when there is none, it is too small or of another version, or the size
// is implausible.
func readHwBlobSpillFill(p unsafe.Pointer, size uint32) uint64 {
	if p == nil || uintptr(size) < unsafe.Sizeof(htpHwBlobInfo{}) {
		return 0
	}
	b := (*htpHwBlobInfo)(p)
	if b.Version != htpHwBlobInfoV1 || b.SpillFillBufferSize > maxSpillFill {
		return 0
	}
	return b.SpillFillBufferSize
}
