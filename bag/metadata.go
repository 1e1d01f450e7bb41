package bag

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fastwam/actionexpert/internal/regfile"
)

// MetadataFile is the name of a bag folder's metadata file.
const MetadataFile = "metadata.yaml"

// Versions of rosbag2_bagfile_information. Humble's rosbag2 writes version 5,
// Jazzy's version 9; the reader reads every version from 1 to 9 with the
// fields rosbag2's own reader expects of it (see ParseMetadata).
const (
	MetadataVersionHumble = 5
	MetadataVersionJazzy  = 9
	minMetadataVersion    = 1
	maxMetadataVersion    = 9
)

// MaxMetadataBytes bounds the size of a metadata.yaml the reader accepts:
// 4 MiB holds the metadata of thousands of topics (a version 9 topic entry
// is under 1 KiB), and parsing it peaks at a few tens of megabytes.
const MaxMetadataBytes = 4 << 20

// maxBagFiles bounds the number of files a bag's metadata.yaml may list.
const maxBagFiles = 4096

// Metadata is a bag folder's metadata.yaml (rosbag2_bagfile_information).
// Which fields a version has is rosbag2's rule: compression_format and
// compression_mode from version 3, files from 5, custom_data from 6,
// each topic's type_description_hash from 7, ros_distro from 8; the
// offered QoS profiles are a YAML string holding a list of profiles with
// numbered policies in versions 4 to 8 and a YAML list of profiles with
// named policies from version 9.
type Metadata struct {
	Version           int
	StorageIdentifier string // "mcap" or "sqlite3"
	Duration          time.Duration
	StartingTime      time.Time // earliest log time; rosbag2 writes the largest int64 ns for an empty bag
	MessageCount      uint64
	Topics            []TopicMetadata
	CompressionFormat string // rosbag2 file or message compression; "" (MCAP chunk compression is not this)
	CompressionMode   string
	RelativeFilePaths []string
	Files             []FileMetadata
	CustomData        map[string]string // version 6 and later; nil when there is none
	ROSDistro         string            // version 8 and later
}

// TopicMetadata is one entry of topics_with_message_count.
type TopicMetadata struct {
	Name                string
	Type                string // e.g. "fastwam_action_expert/msg/VideoKVCache"
	SerializationFormat string // "cdr"
	OfferedQoSProfiles  []QoS
	TypeDescriptionHash string // version 7 and later: "RIHS01_<sha256 hex>", or "" when unknown
	MessageCount        uint64
}

// FileMetadata is one entry of files.
type FileMetadata struct {
	Path         string
	StartingTime time.Time
	Duration     time.Duration
	MessageCount uint64
}

// emptyBagStart is the starting time rosbag2 writes for a bag without
// messages: the largest int64 nanosecond count.
func emptyBagStart() time.Time { return time.Unix(0, math.MaxInt64) }

// Encode returns the metadata as rosbag2 (yaml-cpp) writes metadata.yaml
// for m.Version: the same keys, order, indentation and quoting, and the
// fields that version has (see Metadata).
func (m *Metadata) Encode() []byte {
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat(" ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	v := m.Version
	w(0, "rosbag2_bagfile_information:")
	w(2, "version: %d", v)
	w(2, "storage_identifier: %s", yamlString(m.StorageIdentifier))
	w(2, "duration:")
	w(4, "nanoseconds: %d", m.Duration.Nanoseconds())
	w(2, "starting_time:")
	w(4, "nanoseconds_since_epoch: %d", epochNanos(m.StartingTime))
	w(2, "message_count: %d", m.MessageCount)
	if len(m.Topics) == 0 {
		w(2, "topics_with_message_count: []")
	} else {
		w(2, "topics_with_message_count:")
		for _, t := range m.Topics {
			w(4, "- topic_metadata:")
			w(8, "name: %s", yamlString(t.Name))
			w(8, "type: %s", yamlString(t.Type))
			w(8, "serialization_format: %s", yamlString(t.SerializationFormat))
			switch {
			case v >= 9 && len(t.OfferedQoSProfiles) == 0:
				w(8, "offered_qos_profiles: []")
			case v >= 9:
				// A block list of named policies, one level in.
				w(8, "offered_qos_profiles:")
				for _, line := range strings.Split(EncodeQoSProfilesFor(v, t.OfferedQoSProfiles), "\n") {
					w(10, "%s", line)
				}
			case v >= 4:
				w(8, "offered_qos_profiles: %s", yamlString(EncodeQoSProfiles(t.OfferedQoSProfiles)))
			}
			if v >= 7 {
				w(8, "type_description_hash: %s", yamlString(t.TypeDescriptionHash))
			}
			w(6, "message_count: %d", t.MessageCount)
		}
	}
	if v >= 3 {
		w(2, "compression_format: %s", yamlString(m.CompressionFormat))
		w(2, "compression_mode: %s", yamlString(m.CompressionMode))
	}
	if len(m.RelativeFilePaths) == 0 {
		w(2, "relative_file_paths: []")
	} else {
		w(2, "relative_file_paths:")
		for _, p := range m.RelativeFilePaths {
			w(4, "- %s", yamlString(p))
		}
	}
	if v >= 5 {
		if len(m.Files) == 0 {
			w(2, "files: []")
		} else {
			w(2, "files:")
			for _, f := range m.Files {
				w(4, "- path: %s", yamlString(f.Path))
				w(6, "starting_time:")
				w(8, "nanoseconds_since_epoch: %d", epochNanos(f.StartingTime))
				w(6, "duration:")
				w(8, "nanoseconds: %d", f.Duration.Nanoseconds())
				w(6, "message_count: %d", f.MessageCount)
			}
		}
	}
	if v >= 6 {
		if len(m.CustomData) == 0 {
			// yaml-cpp writes an empty map as a null.
			w(2, "custom_data: ~")
		} else {
			w(2, "custom_data:")
			keys := slices.Sorted(maps.Keys(m.CustomData))
			for _, k := range keys {
				w(4, "%s: %s", yamlString(k), yamlString(m.CustomData[k]))
			}
		}
	}
	if v >= 8 {
		w(2, "ros_distro: %s", yamlString(m.ROSDistro))
	}
	// yaml-cpp writes no newline after the last line.
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// epochNanos returns t in nanoseconds since the epoch, 0 for the zero Time
// or a time before 1970.
func epochNanos(t time.Time) int64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return t.UnixNano()
}

// yamlString returns s as a plain YAML scalar when that reads back as the
// same string, else double-quoted with escapes (as yaml-cpp does for the
// multi-line QoS text and for empty strings).
func yamlString(s string) string {
	plain := s != "" && !strings.ContainsAny(s[:1], "-.?:,[]{}#&*!|>'\"%@`~ ")
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_/.-", r)) {
			plain = false
			break
		}
	}
	if plain {
		switch strings.ToLower(s) {
		case "true", "false", "yes", "no", "on", "off", "y", "n", "null":
			plain = false
		}
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			plain = false
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// yamlMetadata mirrors metadata.yaml for parsing.
type yamlMetadata struct {
	Info *struct {
		Version           *int           `yaml:"version"`
		StorageIdentifier *string        `yaml:"storage_identifier"`
		Duration          yamlNanos      `yaml:"duration"`
		StartingTime      yamlEpochNanos `yaml:"starting_time"`
		MessageCount      uint64         `yaml:"message_count"`
		Topics            []struct {
			Topic struct {
				Name                string `yaml:"name"`
				Type                string `yaml:"type"`
				SerializationFormat string `yaml:"serialization_format"`
				// A string before version 9, a list from version 9.
				OfferedQoSProfiles  yaml.Node `yaml:"offered_qos_profiles"`
				TypeDescriptionHash string    `yaml:"type_description_hash"`
			} `yaml:"topic_metadata"`
			MessageCount uint64 `yaml:"message_count"`
		} `yaml:"topics_with_message_count"`
		CompressionFormat string   `yaml:"compression_format"`
		CompressionMode   string   `yaml:"compression_mode"`
		RelativeFilePaths []string `yaml:"relative_file_paths"`
		Files             []struct {
			Path         string         `yaml:"path"`
			StartingTime yamlEpochNanos `yaml:"starting_time"`
			Duration     yamlNanos      `yaml:"duration"`
			MessageCount uint64         `yaml:"message_count"`
		} `yaml:"files"`
		CustomData map[string]string `yaml:"custom_data"`
		ROSDistro  string            `yaml:"ros_distro"`
	} `yaml:"rosbag2_bagfile_information"`
}

type yamlNanos struct {
	Nanoseconds uint64 `yaml:"nanoseconds"`
}

type yamlEpochNanos struct {
	Nanoseconds uint64 `yaml:"nanoseconds_since_epoch"`
}

func nanos(field string, v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("bag: metadata %s %d ns is out of range", field, v)
	}
	return int64(v), nil
}

// ParseMetadata parses the content of a metadata.yaml of any version from
// 1 to 9, reading the fields that version has as rosbag2 does (see
// Metadata): fields of later versions are ignored, and the offered QoS
// profiles must be a string up to version 8 and a list from version 9.
// It checks what this package relies on: the version, the storage
// identifier, and file paths that stay inside the bag folder, each listed
// once, at most maxBagFiles of them; and that the metadata agrees with
// itself, as rosbag2 writes it: one YAML document, the files (version 5
// on) those of relative_file_paths, and message_count the sum of the
// topics' counts.
func ParseMetadata(data []byte) (*Metadata, error) {
	var y yamlMetadata
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("bag: metadata is not valid YAML: %w", err)
	}
	var second yaml.Node
	switch err := dec.Decode(&second); {
	case err == nil:
		return nil, fmt.Errorf("bag: metadata holds a second YAML document (from line %d): want one document, as rosbag2 writes it", second.Line)
	case !errors.Is(err, io.EOF):
		return nil, fmt.Errorf("bag: metadata is not valid YAML: %w", err)
	}
	info := y.Info
	switch {
	case info == nil:
		return nil, errors.New("bag: metadata has no rosbag2_bagfile_information")
	case info.Version == nil:
		return nil, errors.New("bag: metadata has no version")
	case *info.Version < minMetadataVersion || *info.Version > maxMetadataVersion:
		return nil, fmt.Errorf("bag: metadata version %d is not one this reader knows (versions %d to %d: Humble writes %d, Jazzy %d)",
			*info.Version, minMetadataVersion, maxMetadataVersion, MetadataVersionHumble, MetadataVersionJazzy)
	case info.StorageIdentifier == nil:
		return nil, errors.New("bag: metadata has no storage_identifier")
	}
	v := *info.Version
	m := &Metadata{
		Version:           v,
		StorageIdentifier: *info.StorageIdentifier,
		MessageCount:      info.MessageCount,
		RelativeFilePaths: info.RelativeFilePaths,
	}
	if v >= 3 {
		m.CompressionFormat, m.CompressionMode = info.CompressionFormat, info.CompressionMode
	}
	if v >= 6 && len(info.CustomData) > 0 {
		m.CustomData = info.CustomData
	}
	if v >= 8 {
		m.ROSDistro = info.ROSDistro
	}
	d, err := nanos("duration", info.Duration.Nanoseconds)
	if err != nil {
		return nil, err
	}
	m.Duration = time.Duration(d)
	start, err := nanos("starting_time", info.StartingTime.Nanoseconds)
	if err != nil {
		return nil, err
	}
	m.StartingTime = time.Unix(0, start)
	for _, t := range info.Topics {
		tm := TopicMetadata{
			Name:                t.Topic.Name,
			Type:                t.Topic.Type,
			SerializationFormat: t.Topic.SerializationFormat,
			MessageCount:        t.MessageCount,
		}
		if v >= 7 {
			tm.TypeDescriptionHash = t.Topic.TypeDescriptionHash
		}
		if tm.OfferedQoSProfiles, err = topicQoS(v, &t.Topic.OfferedQoSProfiles); err != nil {
			return nil, fmt.Errorf("%w (topic %s)", err, tm.Name)
		}
		m.Topics = append(m.Topics, tm)
	}
	if v >= 5 {
		for _, f := range info.Files {
			d, err := nanos("files duration", f.Duration.Nanoseconds)
			if err != nil {
				return nil, err
			}
			s, err := nanos("files starting_time", f.StartingTime.Nanoseconds)
			if err != nil {
				return nil, err
			}
			m.Files = append(m.Files, FileMetadata{Path: f.Path, StartingTime: time.Unix(0, s), Duration: time.Duration(d), MessageCount: f.MessageCount})
		}
	}
	if n := len(m.RelativeFilePaths); n > maxBagFiles {
		return nil, fmt.Errorf("bag: metadata lists %d files, more than the %d this reader opens", n, maxBagFiles)
	}
	seen := make(map[string]bool, len(m.RelativeFilePaths))
	for _, p := range m.RelativeFilePaths {
		if err := checkRelativePath(p); err != nil {
			return nil, err
		}
		clean := path.Clean(filepath.ToSlash(p))
		if seen[clean] {
			return nil, fmt.Errorf("bag: metadata lists file %q more than once: each file of a bag is listed once", p)
		}
		seen[clean] = true
	}
	if err := m.checkCounts(); err != nil {
		return nil, err
	}
	if err := m.checkFiles(seen); err != nil {
		return nil, err
	}
	return m, nil
}

// checkCounts checks that message_count is the sum of the topics' counts,
// as rosbag2's writer computes it when it closes the bag. The files'
// counts are not compared: rosbag2 counts a message in its file when it
// enters the write cache and in its topic only once written, so a full
// cache that drops messages leaves the files' sum above the total.
func (m *Metadata) checkCounts() error {
	var topics uint64
	for _, t := range m.Topics {
		if topics+t.MessageCount < topics {
			return fmt.Errorf("bag: metadata topics' message counts overflow (topic %s)", t.Name)
		}
		topics += t.MessageCount
	}
	if topics != m.MessageCount {
		return fmt.Errorf("bag: metadata message_count is %d, but its topics' message counts sum to %d: want the same (rosbag2 writes the total)", m.MessageCount, topics)
	}
	return nil
}

// checkFiles checks that the files entries (version 5 on; none is
// accepted, as before version 5) name the files of relative_file_paths
// (listed, cleaned, in listed), each once. A compressed bag is not
// compared (rosbag2 renames its files in relative_file_paths only, and the
// reader refuses it anyway, saying why).
func (m *Metadata) checkFiles(listed map[string]bool) error {
	if len(m.Files) == 0 || m.CompressionFormat != "" || m.CompressionMode != "" {
		return nil
	}
	seen := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		clean := path.Clean(filepath.ToSlash(f.Path))
		switch {
		case !listed[clean]:
			return fmt.Errorf("bag: metadata files names %q, which relative_file_paths does not list (%s): want the same files in both",
				f.Path, strings.Join(m.RelativeFilePaths, ", "))
		case seen[clean]:
			return fmt.Errorf("bag: metadata files names %q more than once: each file of a bag is listed once", f.Path)
		}
		seen[clean] = true
	}
	if len(seen) != len(listed) {
		for _, p := range m.RelativeFilePaths {
			if !seen[path.Clean(filepath.ToSlash(p))] {
				return fmt.Errorf("bag: metadata relative_file_paths lists %q, which files does not: want the same files in both", p)
			}
		}
	}
	return nil
}

// topicQoS reads a topic's offered_qos_profiles as metadata version v has
// them: absent before version 4, a YAML string holding the list up to
// version 8, the list itself from version 9.
func topicQoS(v int, n *yaml.Node) ([]QoS, error) {
	switch {
	case v < 4 || n.Kind == 0:
		return nil, nil
	case v < 9:
		var text string
		if n.Kind != yaml.ScalarNode || n.Decode(&text) != nil {
			return nil, fmt.Errorf("bag: metadata version %d has offered_qos_profiles as a YAML %s (line %d), want a string holding the list (lists are version 9's form)",
				v, nodeKind(n), n.Line)
		}
		return ParseQoSProfiles(text)
	default:
		if n.Kind != yaml.SequenceNode {
			return nil, fmt.Errorf("bag: metadata version %d has offered_qos_profiles as a YAML %s (line %d), want a list of profiles (strings are the form before version 9)",
				v, nodeKind(n), n.Line)
		}
		return decodeQoSProfiles(n)
	}
}

// nodeKind names a YAML node's kind for errors.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "map"
	case yaml.ScalarNode:
		return "scalar"
	}
	return "node"
}

// checkRelativePath rejects a bag file path that is empty, absolute or
// leaves the bag folder.
func checkRelativePath(p string) error {
	if p == "" || path.IsAbs(p) || filepath.IsAbs(p) || !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("bag: metadata file path %q is not a path inside the bag folder", p)
	}
	return nil
}

// ReadMetadata reads dir/metadata.yaml, which must be a regular file of at
// most MaxMetadataBytes.
func ReadMetadata(dir string) (*Metadata, error) {
	p := filepath.Join(dir, MetadataFile)
	data, err := regfile.ReadFile(p, "the bag's "+MetadataFile, MaxMetadataBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bag: %s has no %s: %w", dir, MetadataFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bag: %w", err)
	}
	m, err := ParseMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, p)
	}
	return m, nil
}
