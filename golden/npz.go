package golden

import (
	"archive/zip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
)

// readChunk is how much data is read between two cancellation checks.
const readChunk = 1 << 20

// maxDeflateRatio bounds how much deflate can expand its input: a stored
// block of length codes emits at most 258 bytes per 1.94 bits (about
// 1032:1). A zip entry claiming more than that is lying about its size.
const maxDeflateRatio = 1032

// archive is an .npz file: a zip of .npy members, indexed by array name.
type archive struct {
	name    string
	size    int64
	rec     *lastRead
	members map[string]*zip.File // by array name (the member name without .npy)
	order   []string             // array names in archive order
}

// lastRead is an io.ReaderAt that remembers where its last read started.
// File.DataOffset reads a member's local header at the offset the central
// directory gives (plus any prefix before the archive), which archive/zip
// keeps to itself; this is how the reader learns that offset.
type lastRead struct {
	r        io.ReaderAt
	off, len int64
}

func (l *lastRead) ReadAt(p []byte, off int64) (int, error) {
	l.off, l.len = off, int64(len(p))
	return l.r.ReadAt(p, off)
}

// openArchive indexes the members of an .npz image of size bytes. Nothing
// is inflated; a name held by two members is refused.
func openArchive(name string, r io.ReaderAt, size int64) (*archive, error) {
	rec := &lastRead{r: r}
	z, err := zip.NewReader(rec, size)
	if errors.Is(err, zip.ErrInsecurePath) {
		err = nil // member names are only array names here, never paths
	}
	if err != nil {
		return nil, fmt.Errorf("golden: %s is not a readable .npz archive: %w", name, err)
	}
	a := &archive{name: name, size: size, rec: rec, members: make(map[string]*zip.File, len(z.File))}
	for _, f := range z.File {
		key := strings.TrimSuffix(f.Name, ".npy")
		if prev, dup := a.members[key]; dup {
			if prev.Name == f.Name {
				return nil, fmt.Errorf("golden: %s: member %q appears twice; numpy reads the last copy, refusing the ambiguous archive", name, f.Name)
			}
			return nil, fmt.Errorf("golden: %s: members %q and %q both hold array %q; refusing the ambiguous archive", name, prev.Name, f.Name, key)
		}
		a.members[key] = f
		a.order = append(a.order, key)
	}
	return a, nil
}

// array is one .npy member whose header has been read and checked.
type array struct {
	key    string
	f      *zip.File
	header *npyHeader
}

// member returns the zip member of array key, or nil.
func (a *archive) member(key string) *zip.File { return a.members[key] }

// open reads and checks the header of array key (which must be present)
// and that the member holds exactly the data the header declares. It
// inflates only the header.
func (a *archive) open(ctx context.Context, key string) (*array, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f := a.members[key]
	if err := plausible(f, a.size); err != nil {
		return nil, err
	}
	if err := a.localHeader(f); err != nil {
		return nil, err
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	h, err := readNPYHeader(io.LimitReader(rc, int64(f.UncompressedSize64)))
	if err != nil {
		return nil, err
	}
	if have := int64(f.UncompressedSize64) - h.dataOff; have != h.dataBytes() {
		return nil, fmt.Errorf("the header declares shape %v of %s, %d bytes of data, but the member holds %d after its %d-byte header",
			h.shape, h.dtype.descr, h.dataBytes(), max(have, 0), h.dataOff)
	}
	return &array{key: key, f: f, header: h}, nil
}

// localHeader checks what Python's zipfile checks of a member before it
// reads it: the entry is not encrypted (general-purpose flag bit 0), and
// its local file header names the member the central directory names.
// archive/zip checks neither; a member whose two names differ is read by
// one tool under one name and by another under the other.
func (a *archive) localHeader(f *zip.File) error {
	if f.Flags&1 != 0 {
		return fmt.Errorf("the zip entry is encrypted (general-purpose flag bit 0 set); numpy cannot read it without a password, and neither can this reader")
	}
	body, err := f.DataOffset() // reads the 30-byte local header, and records where
	if err != nil {
		return fmt.Errorf("the zip entry's local header is unreadable: %w", err)
	}
	at := a.rec.off
	var fixed [30]byte
	if a.rec.len != int64(len(fixed)) {
		return fmt.Errorf("cannot locate the zip entry's local header (archive/zip read %d bytes at %d)", a.rec.len, at)
	}
	if _, err := a.rec.r.ReadAt(fixed[:], at); err != nil {
		return fmt.Errorf("the zip entry's local header is unreadable: %w", err)
	}
	nameLen := int64(binary.LittleEndian.Uint16(fixed[26:]))
	extraLen := int64(binary.LittleEndian.Uint16(fixed[28:]))
	if at+30+nameLen+extraLen != body {
		return fmt.Errorf("cannot locate the zip entry's local header (at %d, the data at %d)", at, body)
	}
	local := make([]byte, nameLen)
	if _, err := a.rec.r.ReadAt(local, at+30); err != nil {
		return fmt.Errorf("the zip entry's local header is unreadable: %w", err)
	}
	if string(local) != f.Name {
		return fmt.Errorf("the zip entry's local header names %s, the central directory %q; refusing the ambiguous member (Python's zipfile does too)",
			quoteName(local), f.Name)
	}
	return nil
}

// quoteName quotes a name from a header for a message, shortened when long.
func quoteName(b []byte) string {
	if len(b) > 120 {
		return strconv.Quote(string(b[:120])) + "..."
	}
	return strconv.Quote(string(b))
}

// plausible checks a zip entry's sizes against the archive before anything
// is inflated, so that its declared uncompressed size can bound the reads.
func plausible(f *zip.File, archiveSize int64) error {
	c, u := f.CompressedSize64, f.UncompressedSize64
	if c > uint64(archiveSize) {
		return fmt.Errorf("the zip entry claims %d compressed bytes, more than the %d-byte archive", c, archiveSize)
	}
	switch f.Method {
	case zip.Store:
		if u != c {
			return fmt.Errorf("the stored zip entry claims %d bytes but holds %d", u, c)
		}
	case zip.Deflate:
		if u > 64 && (u-64)/maxDeflateRatio > c {
			return fmt.Errorf("the zip entry claims %d bytes inflated from %d, more than deflate can expand (%d:1)", u, c, maxDeflateRatio)
		}
	default:
		return fmt.Errorf("the zip entry uses compression method %d, want stored (0) or deflate (8)", f.Method)
	}
	return nil
}

// read inflates the array's data into float32, checking for cancellation
// every readChunk bytes. It reads the member to its end, where archive/zip
// checks the CRC, and refuses a member that inflates to more or fewer bytes
// than its header declares.
func (x *array) read(ctx context.Context) ([]float32, error) {
	h := x.header
	rc, err := x.f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	want := h.dataOff + h.dataBytes()
	// archive/zip checks the CRC only when the entry's is not zero; numpy
	// always checks it, and so do we.
	sum := crc32.NewIEEE()
	r := io.TeeReader(io.LimitReader(rc, want+1), sum)
	if _, err := io.CopyN(io.Discard, r, h.dataOff); err != nil {
		return nil, fmt.Errorf("re-reading the header: %w", err)
	}
	out := make([]float32, h.count) // h.count·size bytes were checked against the entry's size
	buf := make([]byte, min(h.dataBytes(), readChunk/int64(h.dtype.size)*int64(h.dtype.size)))
	per := len(buf) / h.dtype.size
	for done := 0; done < len(out); done += per {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(per, len(out)-done)
		got, err := io.ReadFull(r, buf[:n*h.dtype.size])
		if err != nil {
			return nil, fmt.Errorf("inflated only %d of the %d data bytes: %w", int64(done*h.dtype.size+got), h.dataBytes(), err)
		}
		h.dtype.decode(out[done:done+n], buf[:n*h.dtype.size])
	}
	var one [1]byte
	switch n, err := io.ReadFull(r, one[:]); {
	case n > 0 || errors.Is(err, zip.ErrFormat): // archive/zip's report of more bytes than the entry's size
		return nil, fmt.Errorf("the member inflates to more than the %d bytes its zip entry declares", want)
	case err != io.EOF:
		return nil, fmt.Errorf("damaged: %w", err)
	case sum.Sum32() != x.f.CRC32:
		return nil, fmt.Errorf("damaged: zip checksum %08x, the entry records %08x", sum.Sum32(), x.f.CRC32)
	}
	return out, nil
}
