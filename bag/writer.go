package bag

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/fastwam/actionexpert/msgs"
)

// Compression is the MCAP chunk compression of a written bag.
type Compression string

// Chunk compressions. rosbag2 itself writes uncompressed chunks unless told
// otherwise; float tensors barely compress, so none is the default here too.
const (
	CompressionNone Compression = ""
	CompressionZstd Compression = "zstd"
	CompressionLZ4  Compression = "lz4"
)

// DefaultChunkSize is the MCAP chunk size rosbag2 uses (the MCAP C++
// writer's default, 768 KiB). A message larger than a chunk gets a chunk of
// its own.
const DefaultChunkSize = 768 * 1024

// Profile, encodings and names of rosbag2's MCAP files and bag folders.
const (
	ProfileROS2        = "ros2"                 // MCAP header profile
	SchemaEncodingROS2 = "ros2msg"              // schema encoding of .msg definitions
	MessageEncodingCDR = "cdr"                  // channel message encoding
	QoSMetadataKey     = "offered_qos_profiles" // channel metadata key of the QoS profiles
	ROSDistroRecord    = "rosbag2"              // name of the metadata record holding ROS_DISTRO
	ROSDistroKey       = "ROS_DISTRO"           // its key
	StorageIdentifier  = "mcap"                 // storage_identifier in metadata.yaml
)

const (
	defaultROSDistro = "humble"
	writeBufferSize  = 1 << 20
	fileSuffix       = "_0.mcap"
	cdrHeaderLen     = 4
)

// WriterOptions configure Create. The zero value writes uncompressed 768 KiB
// chunks for ROS 2 Humble with the definitions of package msgs.
type WriterOptions struct {
	// Compression of the MCAP chunks.
	Compression Compression
	// ChunkSize is the uncompressed size at which a chunk is closed; 0 means
	// DefaultChunkSize.
	ChunkSize int64
	// ROSDistro goes into the file's "rosbag2" metadata record (and, from
	// metadata version 8, into metadata.yaml); "" means "humble" for
	// metadata version 5 and "jazzy" for version 9.
	ROSDistro string
	// MetadataVersion is the rosbag2 metadata version written:
	// MetadataVersionHumble (5, what ROS 2 Humble's rosbag2 writes, and so
	// what `ros2 bag` of every later distro reads too) or
	// MetadataVersionJazzy (9: the QoS profiles as a list of named
	// policies in metadata.yaml and named policies in the MCAP channel
	// metadata, plus type_description_hash, custom_data and ros_distro). 0
	// means 5, so that bags written before the option existed come out
	// byte for byte the same.
	MetadataVersion int
	// Definition returns the full ros2msg definition of a message type; nil
	// means msgs.Definition (this project's messages and their standard
	// dependencies). Supply one to record other types.
	Definition func(rosType string) (string, error)
}

// Writer writes one bag. Its methods are safe for concurrent use.
type Writer struct {
	mu     sync.Mutex
	dir    string
	file   string // file name inside dir
	f      *os.File
	bw     *bufio.Writer
	mw     *mcap.Writer
	define func(string) (string, error)

	version int    // metadata version written
	distro  string // ROS distro written

	topics   map[string]*writerTopic
	order    []*writerTopic
	schemas  map[string]uint16 // ROS type -> schema ID
	count    uint64
	start    uint64 // earliest log time (ns), valid when count > 0
	end      uint64
	closed   bool
	writeErr error // first failed write; the file is unusable after it
}

type writerTopic struct {
	channel uint16
	meta    TopicMetadata
	qos     QoS
}

// Create makes the bag folder dir (which must not exist; its parent must)
// and starts dir/<base name of dir>_0.mcap. Close writes the MCAP summary
// and metadata.yaml; a bag is not readable by rosbag2 before that.
func Create(dir string, opts WriterOptions) (*Writer, error) {
	var compression mcap.CompressionFormat
	switch opts.Compression {
	case CompressionNone:
		compression = mcap.CompressionNone
	case CompressionZstd:
		compression = mcap.CompressionZSTD
	case CompressionLZ4:
		compression = mcap.CompressionLZ4
	default:
		return nil, fmt.Errorf("bag: unknown compression %q (want \"\", %q or %q)", opts.Compression, CompressionZstd, CompressionLZ4)
	}
	chunkSize := opts.ChunkSize
	if chunkSize < 0 {
		return nil, fmt.Errorf("bag: chunk size %d is negative", chunkSize)
	}
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	version := opts.MetadataVersion
	switch version {
	case 0:
		version = MetadataVersionHumble
	case MetadataVersionHumble, MetadataVersionJazzy:
	default:
		return nil, fmt.Errorf("bag: metadata version %d is not one this writer writes (want %d for Humble or %d for Jazzy)",
			version, MetadataVersionHumble, MetadataVersionJazzy)
	}
	distro := opts.ROSDistro
	if distro == "" {
		distro = defaultROSDistro
		if version >= MetadataVersionJazzy {
			distro = "jazzy"
		}
	}
	define := opts.Definition
	if define == nil {
		define = msgs.Definition
	}
	name := filepath.Base(filepath.Clean(dir))
	if name == "." || name == string(filepath.Separator) || name == ".." {
		return nil, fmt.Errorf("bag: %q is not a usable bag folder name", dir)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("bag: output folder %s already exists: %w", dir, err)
		}
		return nil, fmt.Errorf("bag: create bag folder: %w", err)
	}
	w := &Writer{
		dir:     dir,
		file:    name + fileSuffix,
		version: version,
		distro:  distro,
		define:  define,
		topics:  map[string]*writerTopic{},
		schemas: map[string]uint16{},
	}
	f, err := os.OpenFile(filepath.Join(dir, w.file), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bag: %w", err)
	}
	w.f = f
	w.bw = bufio.NewWriterSize(f, writeBufferSize)
	mw, err := mcap.NewWriter(w.bw, &mcap.WriterOptions{
		Chunked:     true,
		ChunkSize:   chunkSize,
		Compression: compression,
		IncludeCRC:  true,
	})
	if err == nil {
		w.mw = mw
		err = mw.WriteHeader(&mcap.Header{Profile: ProfileROS2})
	}
	if err == nil {
		err = w.mw.WriteMetadata(&mcap.Metadata{Name: ROSDistroRecord, Metadata: map[string]string{ROSDistroKey: distro}})
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bag: start %s: %w", f.Name(), err)
	}
	return w, nil
}

// Dir returns the bag folder.
func (w *Writer) Dir() string { return w.dir }

// AddTopic declares a topic: its fully qualified name ("/ns/topic"), its ROS
// type ("package/msg/Type", whose definition WriterOptions.Definition must
// know) and the QoS profile its publisher offers. Adding a topic again with
// the same type and QoS does nothing; with another, it fails.
func (w *Writer) AddTopic(name, rosType string, qos QoS) error {
	if name == "" || name[0] != '/' || strings.ContainsAny(name, " \t\n") {
		return fmt.Errorf("bag: topic name %q is not a fully qualified ROS name (like /fastwam/actions)", name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if t, ok := w.topics[name]; ok {
		if t.meta.Type == rosType && t.qos == qos {
			return nil
		}
		return fmt.Errorf("bag: topic %s already added with type %s", name, t.meta.Type)
	}
	if len(w.topics) >= 0xfffe {
		return fmt.Errorf("bag: too many topics (MCAP channel ids are 16-bit)")
	}
	schemaID, ok := w.schemas[rosType]
	if !ok {
		def, err := w.define(rosType)
		if err != nil {
			return fmt.Errorf("bag: topic %s: %w", name, err)
		}
		schemaID = uint16(len(w.schemas) + 1) // 0 means "no schema"
		err = w.mw.WriteSchema(&mcap.Schema{ID: schemaID, Name: rosType, Encoding: SchemaEncodingROS2, Data: []byte(def)})
		if err != nil {
			return w.fail(fmt.Errorf("bag: write schema of %s: %w", rosType, err))
		}
		w.schemas[rosType] = schemaID
	}
	t := &writerTopic{
		channel: uint16(len(w.topics) + 1),
		qos:     qos,
		meta: TopicMetadata{
			Name:                name,
			Type:                rosType,
			SerializationFormat: MessageEncodingCDR,
			OfferedQoSProfiles:  []QoS{qos},
		},
	}
	err := w.mw.WriteChannel(&mcap.Channel{
		ID:              t.channel,
		SchemaID:        schemaID,
		Topic:           name,
		MessageEncoding: MessageEncodingCDR,
		Metadata:        map[string]string{QoSMetadataKey: EncodeQoSProfilesFor(w.version, t.meta.OfferedQoSProfiles)},
	})
	if err != nil {
		return w.fail(fmt.Errorf("bag: write channel of %s: %w", name, err))
	}
	w.topics[name] = t
	w.order = append(w.order, t)
	return nil
}

// Write records one message: the CDR bytes of a message of the topic's
// type (encapsulation header included), received at logTime, which must
// not be before 1970. Messages may come in any time order; readers return
// them in log-time order.
func (w *Writer) Write(topic string, logTime time.Time, cdr []byte) error {
	if len(cdr) < cdrHeaderLen || cdr[0] != 0 || cdr[1] != 1 {
		return fmt.Errorf("bag: message on %s is not little-endian CDR (want a 00 01 encapsulation header)", topic)
	}
	ns := logTime.UnixNano()
	if ns < 0 {
		return fmt.Errorf("bag: message on %s has log time %v, before 1970", topic, logTime)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	t, ok := w.topics[topic]
	if !ok {
		return fmt.Errorf("bag: topic %s was not added (call AddTopic first)", topic)
	}
	err := w.mw.WriteMessage(&mcap.Message{
		ChannelID:   t.channel,
		LogTime:     uint64(ns),
		PublishTime: uint64(ns),
		Data:        cdr,
	})
	if err != nil {
		return w.fail(fmt.Errorf("bag: write message on %s: %w", topic, err))
	}
	t.meta.MessageCount++
	if w.count == 0 || uint64(ns) < w.start {
		w.start = uint64(ns)
	}
	if w.count == 0 || uint64(ns) > w.end {
		w.end = uint64(ns)
	}
	w.count++
	return nil
}

// usable reports why the writer cannot be used, if it cannot.
func (w *Writer) usable() error {
	if w.closed {
		return errors.New("bag: writer is closed")
	}
	if w.writeErr != nil {
		return fmt.Errorf("bag: an earlier write failed: %w", w.writeErr)
	}
	return nil
}

func (w *Writer) fail(err error) error {
	w.writeErr = err
	return err
}

// Metadata returns the metadata.yaml content of the bag as written so far.
func (w *Writer) Metadata() *Metadata {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.metadata()
}

func (w *Writer) metadata() *Metadata {
	m := &Metadata{
		Version:           w.version,
		StorageIdentifier: StorageIdentifier,
		StartingTime:      emptyBagStart(),
		MessageCount:      w.count,
		RelativeFilePaths: []string{w.file},
	}
	if w.count > 0 {
		m.StartingTime = time.Unix(0, int64(w.start))
		m.Duration = time.Duration(w.end - w.start)
	}
	for _, t := range w.order {
		m.Topics = append(m.Topics, t.meta)
	}
	m.Files = []FileMetadata{{Path: w.file, StartingTime: m.StartingTime, Duration: m.Duration, MessageCount: w.count}}
	if w.version >= 8 {
		m.ROSDistro = w.distro
	}
	return m
}

// Close finishes the MCAP file (summary, indexes, footer), syncs it and
// writes metadata.yaml. It is safe to call more than once; only the first
// call does anything.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.writeErr
	if err == nil {
		if err = w.mw.Close(); err != nil {
			err = fmt.Errorf("bag: finish %s: %w", w.file, err)
		}
	}
	if err == nil {
		if err = w.bw.Flush(); err != nil {
			err = fmt.Errorf("bag: write %s: %w", w.file, err)
		}
	}
	if err == nil {
		if err = w.f.Sync(); err != nil {
			err = fmt.Errorf("bag: sync %s: %w", w.file, err)
		}
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("bag: close %s: %w", w.file, cerr)
	}
	if err != nil {
		return err
	}
	path := filepath.Join(w.dir, MetadataFile)
	if err := os.WriteFile(path, w.metadata().Encode(), 0o644); err != nil {
		return fmt.Errorf("bag: write %s: %w", path, err)
	}
	return nil
}
