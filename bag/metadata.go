package bag

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MetadataFile is the name of a bag folder's metadata file.
const MetadataFile = "metadata.yaml"

// metadataVersion is the rosbag2_bagfile_information version ROS 2 Humble
// writes.
const metadataVersion = 5

// Metadata is a bag folder's metadata.yaml (rosbag2_bagfile_information).
type Metadata struct {
	Version           int
	StorageIdentifier string // "mcap" for the bags of this package
	Duration          time.Duration
	StartingTime      time.Time // earliest log time; rosbag2 writes the largest int64 ns for an empty bag
	MessageCount      uint64
	Topics            []TopicMetadata
	CompressionFormat string // rosbag2 file or message compression; "" (MCAP chunk compression is not this)
	CompressionMode   string
	RelativeFilePaths []string
	Files             []FileMetadata
}

// TopicMetadata is one entry of topics_with_message_count.
type TopicMetadata struct {
	Name                string
	Type                string // e.g. "fastwam_action_expert/msg/VideoKVCache"
	SerializationFormat string // "cdr"
	OfferedQoSProfiles  string // YAML text, see EncodeQoSProfiles
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

// Encode returns the metadata as rosbag2 (yaml-cpp) writes metadata.yaml:
// the same keys, order, indentation and quoting.
func (m *Metadata) Encode() []byte {
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat(" ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	w(0, "rosbag2_bagfile_information:")
	w(2, "version: %d", m.Version)
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
			w(8, "offered_qos_profiles: %s", yamlString(t.OfferedQoSProfiles))
			w(6, "message_count: %d", t.MessageCount)
		}
	}
	w(2, "compression_format: %s", yamlString(m.CompressionFormat))
	w(2, "compression_mode: %s", yamlString(m.CompressionMode))
	if len(m.RelativeFilePaths) == 0 {
		w(2, "relative_file_paths: []")
	} else {
		w(2, "relative_file_paths:")
		for _, p := range m.RelativeFilePaths {
			w(4, "- %s", yamlString(p))
		}
	}
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
				OfferedQoSProfiles  string `yaml:"offered_qos_profiles"`
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

// ParseMetadata parses the content of a metadata.yaml. It checks what this
// package relies on: the version, the storage identifier and file paths
// that stay inside the bag folder.
func ParseMetadata(data []byte) (*Metadata, error) {
	var y yamlMetadata
	if err := yaml.Unmarshal(data, &y); err != nil {
		return nil, fmt.Errorf("bag: metadata is not valid YAML: %w", err)
	}
	info := y.Info
	switch {
	case info == nil:
		return nil, errors.New("bag: metadata has no rosbag2_bagfile_information")
	case info.Version == nil:
		return nil, errors.New("bag: metadata has no version")
	case info.StorageIdentifier == nil:
		return nil, errors.New("bag: metadata has no storage_identifier")
	}
	m := &Metadata{
		Version:           *info.Version,
		StorageIdentifier: *info.StorageIdentifier,
		MessageCount:      info.MessageCount,
		CompressionFormat: info.CompressionFormat,
		CompressionMode:   info.CompressionMode,
		RelativeFilePaths: info.RelativeFilePaths,
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
		m.Topics = append(m.Topics, TopicMetadata{
			Name:                t.Topic.Name,
			Type:                t.Topic.Type,
			SerializationFormat: t.Topic.SerializationFormat,
			OfferedQoSProfiles:  t.Topic.OfferedQoSProfiles,
			MessageCount:        t.MessageCount,
		})
	}
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
	for _, p := range m.RelativeFilePaths {
		if err := checkRelativePath(p); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// checkRelativePath rejects a bag file path that is empty, absolute or
// leaves the bag folder.
func checkRelativePath(p string) error {
	if p == "" || path.IsAbs(p) || filepath.IsAbs(p) || !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("bag: metadata file path %q is not a path inside the bag folder", p)
	}
	return nil
}

// ReadMetadata reads dir/metadata.yaml.
func ReadMetadata(dir string) (*Metadata, error) {
	data, err := os.ReadFile(filepath.Join(dir, MetadataFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("bag: %s has no %s: %w", dir, MetadataFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bag: %w", err)
	}
	m, err := ParseMetadata(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, filepath.Join(dir, MetadataFile))
	}
	return m, nil
}
