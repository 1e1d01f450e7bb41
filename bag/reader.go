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
// Of a bag of several files, the reader holds open only the files that
// may hold the next message: each file is opened once by OpenWith, for its
// topics and the earliest log time it can hold, and closed again (the
// first one listed stays open); Next opens it again when the messages it
// returns reach that time, checking that it is the same file, unchanged,
// and closes it after its last message. A bag split as rosbag2 splits a
// recording, each file after the one before, needs one open file at a
// time however many it has (at most 4096); files whose times overlap are
// open together while they overlap. A file read linearly (see above) has
// no index to give its earliest time and is opened at the first Next.
//
// Only channels with message encoding "cdr" are read: opening a bag (or
// reading on) fails, naming the topic and its encoding, when a wanted
// topic (see ReaderOptions.Topics) has another one.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	meta   *Metadata
	files  []*bagFile
	topics []Topic
	limit  int64
	want   map[string]bool
	err    error
}

// bagFile is one file of a bag and how far it has been read. A file is
// open only while it may hold the next message: OpenWith opens each file
// in turn for its topics and the earliest log time it can hold (start),
// and closes it again (all but the first); Next opens a file when the
// messages it returns reach that file's start, and closes it at its end.
// A bag whose files follow one another in time, as rosbag2 splits them,
// therefore holds one file open at a time (two where one ends at the log
// time the next begins), however many it lists.
type bagFile struct {
	path  string
	st    os.FileInfo // the file as OpenWith found it; a reopened file must be the same
	start uint64      // no message of the file has an earlier log time
	src   source      // nil while the file is closed
	head  *Message    // the file's next message, read and not yet returned
	done  bool        // every message of the file was returned (or it has none)

	peakHeld int64 // the largest peak of decompressed bytes of its closed readers (tests)
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
	// startTime returns a log time no message of the file is earlier
	// than, checked as the messages are read, and whether the file may
	// hold any message.
	startTime() (uint64, bool)
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
	r := &Reader{meta: meta, limit: limit, want: want}
	lists := make([][]Topic, 0, len(paths))
	for i, p := range paths {
		bf := &bagFile{path: p}
		r.files = append(r.files, bf)
		src, err := r.openBagFile(ctx, bf)
		if err != nil {
			r.Close()
			return nil, err
		}
		ts, err := src.fileTopics()
		if err != nil {
			src.close()
			r.Close()
			return nil, err
		}
		lists = append(lists, ts)
		start, has := src.startTime()
		bf.start, bf.done = start, !has
		// The first file stays open, so that a bag of one file is opened
		// (and, without a summary, scanned) once; the others are reopened
		// when their messages are reached.
		if i == 0 && has {
			bf.src = src
			continue
		}
		if err := src.close(); err != nil {
			r.Close()
			return nil, fmt.Errorf("bag: close: %w", err)
		}
	}
	if r.topics, err = mergeTopics(lists, paths); err != nil {
		r.Close()
		return nil, err
	}
	if err := checkMetadataTopics(meta, r.topics, path); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// checkMetadataTopics checks that every topic metadata.yaml lists with a
// type has that type in the files (an MCAP channel's schema, a sqlite3
// topics row) where they record it; topics the files do not hold (no
// channel) are not compared.
func checkMetadataTopics(meta *Metadata, topics []Topic, path string) error {
	if meta == nil {
		return nil
	}
	inFiles := make(map[string]string, len(topics))
	for _, t := range topics {
		inFiles[t.Name] = t.Type
	}
	for _, t := range meta.Topics {
		if typ, ok := inFiles[t.Name]; ok && typ != t.Type {
			return fmt.Errorf("bag: %s gives topic %s the type %s, but the bag's files record it as %s: want the same type in both",
				filepath.Join(path, MetadataFile), t.Name, t.Type, typ)
		}
	}
	return nil
}

// openBagFile opens one file of a bag as MCAP or SQLite, as its first bytes
// say. The first time, it records what the file is (bf.st); when the file
// is opened again to read its messages, it must be that same file,
// unchanged.
func (r *Reader) openBagFile(ctx context.Context, bf *bagFile) (source, error) {
	p := bf.path
	f, size, err := regfile.Open(p, "a bag file (.mcap or .db3)")
	if err != nil {
		return nil, fmt.Errorf("bag: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bag: %w", err)
	}
	if bf.st == nil {
		bf.st = st
	} else if err := sameFile(p, bf.st, st, "it was opened again to read its messages"); err != nil {
		f.Close()
		return nil, err
	}
	head := make([]byte, len(sqliteMagic))
	n, _ := f.ReadAt(head, 0)
	if isSQLite(head[:n]) {
		f.Close()
		if r.meta != nil && r.meta.StorageIdentifier != StorageSQLite3 {
			return nil, fmt.Errorf("bag: %s is an SQLite database, but %s says storage %q", p, MetadataFile, r.meta.StorageIdentifier)
		}
		return openSQLite(ctx, p, bf.st, r.limit, r.want)
	}
	if r.meta != nil && r.meta.StorageIdentifier == StorageSQLite3 {
		f.Close()
		return nil, fmt.Errorf("bag: %s is not an SQLite 3 database (it starts %q, want %q), but %s says storage %q",
			p, head[:n], sqliteMagic, MetadataFile, StorageSQLite3)
	}
	fr, err := openFile(ctx, f, size, p, r.limit, r.want)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &mcapSource{fileReader: fr, file: f}, nil
}

// sameFile checks that st, the file now at path, is checked, the file
// as the bag was opened with: the same device and inode, size and
// modification time. when says why the file was looked at again.
func sameFile(path string, checked, st os.FileInfo, when string) error {
	if os.SameFile(checked, st) && st.Size() == checked.Size() && st.ModTime().Equal(checked.ModTime()) {
		return nil
	}
	return fmt.Errorf("bag: %s changed since the bag was opened (%d bytes, modified %s; now %d bytes, modified %s, or another file): %s",
		path, checked.Size(), checked.ModTime().Format(time.RFC3339Nano), st.Size(), st.ModTime().Format(time.RFC3339Nano), when)
}

// mcapSource is an MCAP file's reader with the file it reads, closed
// together.
type mcapSource struct {
	*fileReader
	file *os.File
}

func (m *mcapSource) close() error {
	return errors.Join(m.fileReader.close(), m.file.Close())
}

// closeFile closes a file that has been read to its end.
func (r *Reader) closeFile(bf *bagFile) error {
	bf.done = true
	if bf.src == nil {
		return nil
	}
	if m, ok := bf.src.(*mcapSource); ok {
		bf.peakHeld = max(bf.peakHeld, m.peakHeld)
	}
	err := bf.src.close()
	bf.src = nil
	if err != nil {
		return fmt.Errorf("bag: close: %w", err)
	}
	return nil
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

// mergeTopics lists the topics of all files (lists, one per file of
// paths), in id order of the first file that has them, with summed
// message counts.
func mergeTopics(lists [][]Topic, paths []string) ([]Topic, error) {
	// The merged list and its index are sized for all files at once:
	// growing them topic by topic cost 48 MB of allocations for the
	// 65,535 channels of a 2.3 MB file.
	if len(lists) == 1 {
		return lists[0], nil
	}
	total := 0
	for _, ts := range lists {
		total += len(ts)
	}
	topics := make([]Topic, 0, total)
	byName := make(map[string]int, total)
	for fi, ts := range lists {
		for _, t := range ts {
			i, seen := byName[t.Name]
			if !seen {
				byName[t.Name] = len(topics)
				topics = append(topics, t)
				continue
			}
			if topics[i].Type != t.Type {
				return nil, fmt.Errorf("bag: topic %s has type %s in one file and %s in %s", t.Name, topics[i].Type, t.Type, paths[fi])
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
	for {
		best := -1
		for i, bf := range r.files {
			if bf.src != nil && bf.head == nil {
				m, err := bf.src.nextMessage(ctx)
				switch {
				case errors.Is(err, io.EOF):
					if err := r.closeFile(bf); err != nil {
						r.err = err
						return Message{}, err
					}
				case err != nil:
					r.err = err
					return Message{}, err
				case m.logTime < bf.start:
					r.err = fmt.Errorf("bag: %s: message on %s at %d ns comes before %d ns, the earliest log time the file gave when the bag was opened",
						bf.path, m.Topic, m.logTime, bf.start)
					return Message{}, r.err
				default:
					bf.head = &m
				}
			}
			if bf.head != nil && (best < 0 || bf.head.logTime < r.files[best].head.logTime) {
				best = i
			}
		}
		// A file not open yet is opened when it may hold a message that
		// comes before the best one: one at an earlier log time, or at the
		// same log time in a file listed earlier.
		next := -1
		for i, bf := range r.files {
			if bf.src != nil || bf.done {
				continue
			}
			if best >= 0 {
				at := r.files[best].head.logTime
				if bf.start > at || bf.start == at && i > best {
					continue
				}
			}
			if next < 0 || bf.start < r.files[next].start {
				next = i
			}
		}
		if next < 0 {
			if best < 0 {
				return Message{}, io.EOF
			}
			bf := r.files[best]
			m := *bf.head
			bf.head = nil
			return m, nil
		}
		bf := r.files[next]
		src, err := r.openBagFile(ctx, bf)
		if err != nil {
			r.err = err
			return Message{}, err
		}
		bf.src = src
	}
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

// Close closes the bag's files that are open.
func (r *Reader) Close() error {
	var errs []string
	for _, bf := range r.files {
		if bf.src == nil {
			continue
		}
		if err := bf.src.close(); err != nil {
			errs = append(errs, err.Error())
		}
		bf.src = nil
	}
	r.files = nil
	if r.err == nil {
		r.err = errors.New("bag: reader is closed")
	}
	if len(errs) > 0 {
		return fmt.Errorf("bag: close: %s", strings.Join(errs, "; "))
	}
	return nil
}
