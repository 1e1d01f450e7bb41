package bag

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/internal/regfile"
)

// DefaultMaxChunkBytes is the default of ReaderOptions.MaxChunkBytes: 1 GiB,
// room for a chunk holding a few 72 MB KV-cache messages.
const DefaultMaxChunkBytes = 1 << 30

// ReaderOptions configure OpenWith.
type ReaderOptions struct {
	// Topics, if not empty, restricts the messages returned to these topics.
	Topics []string
	// MaxChunkBytes bounds every record read and every chunk decompressed
	// (a file announcing more is rejected), and so the memory the reader
	// needs per chunk it holds; in an SQLite database it bounds every
	// message read. 0 means DefaultMaxChunkBytes.
	MaxChunkBytes int64
}

// Message is one recorded message.
type Message struct {
	Topic       string
	Type        string // ROS type of the topic, "package/msg/Type"
	LogTime     time.Time
	PublishTime time.Time
	// Data is the serialized message (CDR with its encapsulation header for
	// rosbag2 bags). It views a buffer the reader never reuses, so it stays
	// valid after later calls to Next.
	Data []byte

	logTime, publishTime uint64 // nanoseconds since the epoch
}

// Topic describes a recorded topic.
type Topic struct {
	Name               string
	Type               string // "package/msg/Type"
	MessageEncoding    string // "cdr"
	SchemaEncoding     string // "ros2msg"
	Definition         string // the full message definition stored as the schema
	OfferedQoSProfiles []QoS
	MessageCount       uint64 // from the files' statistics, or counted when a file without them was scanned
}

// Reader reads the messages of a bag in log-time order. It streams: of
// each file it holds the decompressed chunks whose messages it has not
// returned yet, and it loads a chunk only when that chunk may hold the
// next message in (log time, file order), so chunks that merely share log
// times are held one at a time and the memory it needs is bounded by the
// largest chunk (more only where chunks' time ranges really overlap).
// Every decompression is bounded by the chunk's declared size, itself
// bounded by ReaderOptions.MaxChunkBytes.
//
// A file without a summary (a recording that was not closed) or whose
// summary lists no channels is scanned once when it is opened, chunk by
// chunk, so that Topics is complete from the start; its chunks are then
// read in log-time order like an indexed file's, or, when it holds
// messages outside chunks, in file order, which must then be log-time
// order: a message earlier than the one before it is refused (such a file
// has no index to sort by; rosbag2 and Writer never write one).
//
// Only channels with message encoding "cdr" are read: opening a bag (or
// reading on) fails, naming the topic and its encoding, when a wanted
// topic (see ReaderOptions.Topics) has another one.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	meta   *Metadata
	files  []source
	osf    []*os.File
	heads  []*Message
	done   []bool
	topics []Topic
	err    error
}

// source is one file of a bag: an MCAP file (fileReader) or an SQLite
// database (sqliteFile).
type source interface {
	// nextMessage returns the file's next wanted message in log-time
	// order, or io.EOF.
	nextMessage(ctx context.Context) (Message, error)
	// fileTopics lists the file's topics in the order of their ids.
	fileTopics() ([]Topic, error)
	// path names the file in errors.
	path() string
	close() error
}

// Open opens a bag: a bag folder (its metadata.yaml lists the files;
// without one, every *.mcap and *.db3 file of the folder is read) or a
// single .mcap or .db3 file. Files are MCAP or SQLite databases as
// rosbag2's sqlite3 storage writes them (Humble's default), told apart by
// their first bytes. It is OpenWith with a background context and no
// options.
func Open(path string) (*Reader, error) {
	return OpenWith(context.Background(), path, ReaderOptions{})
}

// OpenWith opens a bag like Open, with options. Opening a file without a
// summary scans it (see Reader); ctx stops that scan, between records and
// chunks.
func OpenWith(ctx context.Context, path string, opts ReaderOptions) (*Reader, error) {
	limit := opts.MaxChunkBytes
	switch {
	case limit < 0:
		return nil, fmt.Errorf("bag: MaxChunkBytes %d is negative", limit)
	case limit == 0:
		limit = DefaultMaxChunkBytes
	case limit > maxLimit:
		limit = maxLimit
	}
	var want map[string]bool
	if len(opts.Topics) > 0 {
		want = map[string]bool{}
		for _, t := range opts.Topics {
			want[t] = true
		}
	}
	paths, meta, err := bagFiles(path)
	if err != nil {
		return nil, err
	}
	r := &Reader{meta: meta}
	for _, p := range paths {
		src, err := r.openSource(ctx, p, limit, want)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.files = append(r.files, src)
	}
	r.heads = make([]*Message, len(r.files))
	r.done = make([]bool, len(r.files))
	if r.topics, err = mergeTopics(r.files); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// openSource opens one file of a bag as MCAP or SQLite, as its first bytes
// say.
func (r *Reader) openSource(ctx context.Context, p string, limit int64, want map[string]bool) (source, error) {
	f, size, err := regfile.Open(p, "a bag file (.mcap or .db3)")
	if err != nil {
		return nil, fmt.Errorf("bag: %w", err)
	}
	head := make([]byte, len(sqliteMagic))
	n, _ := f.ReadAt(head, 0)
	if isSQLite(head[:n]) {
		f.Close()
		if r.meta != nil && r.meta.StorageIdentifier != StorageSQLite3 {
			return nil, fmt.Errorf("bag: %s is an SQLite database, but %s says storage %q", p, MetadataFile, r.meta.StorageIdentifier)
		}
		return openSQLite(ctx, p, limit, want)
	}
	if r.meta != nil && r.meta.StorageIdentifier == StorageSQLite3 {
		f.Close()
		return nil, fmt.Errorf("bag: %s is not an SQLite 3 database (it starts %q, want %q), but %s says storage %q",
			p, head[:n], sqliteMagic, MetadataFile, StorageSQLite3)
	}
	r.osf = append(r.osf, f)
	return openFile(ctx, f, size, p, limit, want)
}

// bagFiles resolves path to the MCAP files to read and the bag's metadata
// (nil for a single file or a folder without metadata.yaml).
func bagFiles(path string) ([]string, *Metadata, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("bag: %w", err)
	}
	if !st.IsDir() {
		return []string{path}, nil, nil
	}
	if err := insideFolder(path, filepath.Join(path, MetadataFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	meta, err := ReadMetadata(path)
	if errors.Is(err, fs.ErrNotExist) {
		var matches []string
		for _, pattern := range []string{"*.mcap", "*.db3"} {
			m, err := filepath.Glob(filepath.Join(path, pattern))
			if err != nil {
				return nil, nil, fmt.Errorf("bag: %w", err)
			}
			matches = append(matches, m...)
		}
		if len(matches) == 0 {
			return nil, nil, fmt.Errorf("bag: %s has neither %s nor .mcap or .db3 files", path, MetadataFile)
		}
		slices.Sort(matches)
		for _, m := range matches {
			if err := insideFolder(path, m); err != nil {
				return nil, nil, err
			}
		}
		return matches, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if meta.StorageIdentifier != StorageIdentifier && meta.StorageIdentifier != StorageSQLite3 {
		return nil, nil, fmt.Errorf("bag: %s uses storage %q; this reader reads %q and %q bags only",
			path, meta.StorageIdentifier, StorageIdentifier, StorageSQLite3)
	}
	if meta.CompressionFormat != "" || meta.CompressionMode != "" {
		return nil, nil, fmt.Errorf("bag: %s uses rosbag2 %s compression (%s mode), which this reader does not support",
			path, meta.CompressionFormat, meta.CompressionMode)
	}
	if len(meta.RelativeFilePaths) == 0 {
		return nil, nil, fmt.Errorf("bag: %s lists no files", filepath.Join(path, MetadataFile))
	}
	var paths []string
	for _, p := range meta.RelativeFilePaths {
		full := filepath.Join(path, filepath.FromSlash(p))
		if err := insideFolder(path, full); err != nil {
			return nil, nil, err
		}
		paths = append(paths, full)
	}
	return paths, meta, nil
}

// insideFolder checks that file, once every symbolic link is resolved,
// still lies inside the bag folder dir: a link inside a bag that points
// out of it is refused, as a path with ".." is. A missing file is
// reported as such (fs.ErrNotExist).
func insideFolder(dir, file string) error {
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("bag: %w", err)
	}
	realFile, err := filepath.EvalSymlinks(file)
	if err != nil {
		return fmt.Errorf("bag: %w", err)
	}
	rel, err := filepath.Rel(realDir, realFile)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("bag: %s resolves to %s, outside the bag folder %s: a bag's files must lie inside its folder", file, realFile, realDir)
	}
	return nil
}

// mergeTopics lists the topics of all files, in id order of the first
// file that has them, with summed message counts.
func mergeTopics(files []source) ([]Topic, error) {
	// Each file's list is made once, and the merged list and its index are
	// sized for all of them at once: growing them topic by topic cost
	// 48 MB of allocations for the 65,535 channels of a 2.3 MB file.
	lists := make([][]Topic, len(files))
	total := 0
	for i, f := range files {
		ts, err := f.fileTopics()
		if err != nil {
			return nil, err
		}
		lists[i] = ts
		total += len(ts)
	}
	if len(files) == 1 {
		return lists[0], nil
	}
	topics := make([]Topic, 0, total)
	byName := make(map[string]int, total)
	for fi, f := range files {
		for _, t := range lists[fi] {
			i, seen := byName[t.Name]
			if !seen {
				byName[t.Name] = len(topics)
				topics = append(topics, t)
				continue
			}
			if topics[i].Type != t.Type {
				return nil, fmt.Errorf("bag: topic %s has type %s in one file and %s in %s", t.Name, topics[i].Type, t.Type, f.path())
			}
			topics[i].MessageCount += t.MessageCount
		}
	}
	return topics, nil
}

// Metadata returns the bag's metadata.yaml, or nil when the bag was opened
// as a single .mcap file or its folder has none.
func (r *Reader) Metadata() *Metadata { return r.meta }

// Topics lists the recorded topics, all of them whatever
// ReaderOptions.Topics says, from the files' summaries or, for a file
// without one, from the scan of its records when it was opened.
func (r *Reader) Topics() []Topic { return slices.Clone(r.topics) }

// Next returns the next message in log-time order across the bag's files
// (messages with equal log times come in file order), or io.EOF after the
// last one. A file holding messages outside chunks without a chunk index
// (not what rosbag2 or Writer produce) is read in file order, and a message
// there that is earlier than the one before it is an error.
//
// When ctx is done before Next starts, it returns ctx's error and the
// reader stays usable; cancellation seen while a chunk is being loaded is
// an error like any other (it wraps ctx's error): after any error but
// io.EOF and that first case the reader is unusable. A single chunk's
// decompression is not interrupted: it is bounded by
// ReaderOptions.MaxChunkBytes.
func (r *Reader) Next(ctx context.Context) (Message, error) {
	if r.err != nil {
		return Message{}, r.err
	}
	if err := ctx.Err(); err != nil {
		return Message{}, fmt.Errorf("bag: reading stopped: %w", err)
	}
	best := -1
	for i, f := range r.files {
		if r.heads[i] == nil && !r.done[i] {
			m, err := f.nextMessage(ctx)
			switch {
			case errors.Is(err, io.EOF):
				r.done[i] = true
			case err != nil:
				r.err = err
				return Message{}, err
			default:
				r.heads[i] = &m
			}
		}
		if r.heads[i] != nil && (best < 0 || r.heads[i].logTime < r.heads[best].logTime) {
			best = i
		}
	}
	if best < 0 {
		return Message{}, io.EOF
	}
	m := *r.heads[best]
	r.heads[best] = nil
	return m, nil
}

// Messages iterates over the remaining messages, in log-time order (see
// Next). An error, ctx's included, ends the iteration after being yielded
// with an empty Message.
func (r *Reader) Messages(ctx context.Context) iter.Seq2[Message, error] {
	return func(yield func(Message, error) bool) {
		for {
			m, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
}

// Close closes the bag's files.
func (r *Reader) Close() error {
	var errs []string
	for _, f := range r.files {
		if err := f.close(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	for _, f := range r.osf {
		if err := f.Close(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	r.files, r.osf = nil, nil
	if r.err == nil {
		r.err = errors.New("bag: reader is closed")
	}
	if len(errs) > 0 {
		return fmt.Errorf("bag: close: %s", strings.Join(errs, "; "))
	}
	return nil
}
