package bag

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// This file reads a message's data with SQLite's incremental blob I/O
// (sqlite3_blob_open, sqlite3_blob_read), in pieces of blobPiece bytes
// straight from the database's pages into the message's buffer. Reading
// the value through a query instead makes SQLite materialize the whole
// blob in its own heap first and the driver copy it into a Go slice: two
// copies of every message at once (624 MB to read one 300 MB message, 932
// MB when database/sql's Scan copied it a third time), where this reads
// it with one (the buffer returned) and a piece.
//
// modernc.org/sqlite's database/sql driver does not expose the blob API
// nor its connection's handle, so this file opens a second, read-only
// connection to the same file through modernc.org/sqlite/lib, the same
// SQLite translated to Go (no cgo), with the DSN and safety pragmas of the
// first. Its C-side memory (the connection's out-parameter slot, the piece
// buffer, three names) is allocated once when it opens and freed when it
// closes; a Go slice views C memory only inside readBlob, through
// libc.GoBytes, to copy a piece out.

// blobPiece is the size of the pieces a message's data is read in; it
// bounds how long a read runs before it checks for cancellation.
const blobPiece = 1 << 20

// blobReader is a connection used for incremental blob I/O on the data
// column of the messages table.
type blobReader struct {
	tls *libc.TLS
	db  uintptr // sqlite3*
	out uintptr // one pointer: the out parameter of open and blob_open
	buf uintptr // blobPiece bytes
	// The names blob_open takes, as C strings.
	zMain, zMessages, zData uintptr
}

// openBlobReader opens the database at dsn (a "file:" URI as sqliteDSN
// makes it) read-only, with the reader's pragmas.
func openBlobReader(dsn string) (_ *blobReader, err error) {
	b := &blobReader{tls: libc.NewTLS()}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.out = libc.Xmalloc(b.tls, 8); b.out == 0 {
		return nil, errors.New("open a connection for blob reads: out of memory")
	}
	if b.buf = libc.Xmalloc(b.tls, blobPiece); b.buf == 0 {
		return nil, errors.New("open a connection for blob reads: out of memory")
	}
	for _, s := range []struct {
		z    *uintptr
		text string
	}{{&b.zMain, "main"}, {&b.zMessages, "messages"}, {&b.zData, "data"}} {
		if *s.z, err = libc.CString(s.text); err != nil {
			return nil, fmt.Errorf("open a connection for blob reads: %w", err)
		}
	}
	name, err := libc.CString(dsn)
	if err != nil {
		return nil, fmt.Errorf("open a connection for blob reads: %w", err)
	}
	rc := sqlite3.Xsqlite3_open_v2(b.tls, name, b.out, sqlite3.SQLITE_OPEN_READONLY|sqlite3.SQLITE_OPEN_URI, 0)
	libc.Xfree(b.tls, name)
	b.db = b.pointer() // set even when the open fails, and then to be closed
	if rc != sqlite3.SQLITE_OK {
		return nil, b.errorf("open a connection for blob reads", rc)
	}
	pragmas, err := libc.CString("PRAGMA query_only = 1; PRAGMA trusted_schema = 0; PRAGMA cell_size_check = 1;")
	if err != nil {
		return nil, fmt.Errorf("open a connection for blob reads: %w", err)
	}
	rc = sqlite3.Xsqlite3_exec(b.tls, b.db, pragmas, 0, 0, 0)
	libc.Xfree(b.tls, pragmas)
	if rc != sqlite3.SQLITE_OK {
		return nil, b.errorf("set the pragmas of the connection for blob reads", rc)
	}
	return b, nil
}

// pointer returns the pointer SQLite stored in b.out.
func (b *blobReader) pointer() uintptr {
	slot := libc.GoBytes(b.out, strconv.IntSize/8)
	if strconv.IntSize == 32 {
		return uintptr(binary.NativeEndian.Uint32(slot))
	}
	return uintptr(binary.NativeEndian.Uint64(slot))
}

// errorf describes SQLite's error rc, with the connection's message.
func (b *blobReader) errorf(what string, rc int32) error {
	msg := ""
	if b.db != 0 {
		msg = libc.GoString(sqlite3.Xsqlite3_errmsg(b.tls, b.db))
	}
	return fmt.Errorf("%s: %s (%d)", what, msg, rc)
}

// readBlob reads the data of the messages row rowid, which must hold size
// bytes, in pieces, checking ctx between pieces.
func (b *blobReader) readBlob(ctx context.Context, rowid, size int64) ([]byte, error) {
	rc := sqlite3.Xsqlite3_blob_open(b.tls, b.db, b.zMain, b.zMessages, b.zData, rowid, 0, b.out)
	blob := b.pointer()
	if rc != sqlite3.SQLITE_OK {
		err := b.errorf("open the data", rc)
		if blob != 0 {
			sqlite3.Xsqlite3_blob_close(b.tls, blob)
		}
		return nil, err
	}
	defer sqlite3.Xsqlite3_blob_close(b.tls, blob)
	if n := int64(sqlite3.Xsqlite3_blob_bytes(b.tls, blob)); n != size {
		return nil, fmt.Errorf("the data is %d bytes, %d when the messages were listed", n, size)
	}
	data := make([]byte, size)
	for off := int64(0); off < size; off += blobPiece {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(blobPiece, size-off)
		// size is below 2^31: blob_bytes returned it as an int32.
		if rc := sqlite3.Xsqlite3_blob_read(b.tls, blob, b.buf, int32(n), int32(off)); rc != sqlite3.SQLITE_OK {
			return nil, b.errorf(fmt.Sprintf("read bytes [%d, %d) of the data", off, off+n), rc)
		}
		copy(data[off:off+n], libc.GoBytes(b.buf, int(n)))
	}
	return data, nil
}

// close closes the connection and frees its C memory. b may be partly
// opened.
func (b *blobReader) close() error {
	var err error
	if b.db != 0 {
		if rc := sqlite3.Xsqlite3_close_v2(b.tls, b.db); rc != sqlite3.SQLITE_OK {
			err = b.errorf("close the connection for blob reads", rc)
		}
		b.db = 0
	}
	for _, p := range []*uintptr{&b.out, &b.buf, &b.zMain, &b.zMessages, &b.zData} {
		if *p != 0 {
			libc.Xfree(b.tls, *p)
			*p = 0
		}
	}
	if b.tls != nil {
		b.tls.Close()
		b.tls = nil
	}
	return err
}
