package bag

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	// The pure-Go SQLite driver (no cgo), registered as "sqlite".
	_ "modernc.org/sqlite"
)

// This file reads one database of rosbag2's sqlite3 storage, the default
// storage of ROS 2 Humble's `ros2 bag record`. The facts it relies on come
// from rosbag2's Humble sources (rosbag2_storage_default_plugins, sqlite/
// sqlite_storage.cpp): the tables
//
//	topics(id INTEGER PRIMARY KEY, name TEXT NOT NULL, type TEXT NOT NULL,
//	       serialization_format TEXT NOT NULL, offered_qos_profiles TEXT NOT NULL)
//	messages(id INTEGER PRIMARY KEY, topic_id INTEGER NOT NULL,
//	         timestamp INTEGER NOT NULL, data BLOB NOT NULL)
//
// with an index on messages(timestamp), a schema(schema_version, ros_distro)
// table holding version 3 and an unused metadata table; messages are read
// in (timestamp, id) order, the timestamp being the receive time in
// nanoseconds since the epoch; data is the CDR message with its
// encapsulation header. Bags of schema version 1 have no
// offered_qos_profiles column; later versions add tables and columns this
// reader does not need.
//
// The database is a hostile file like any other: it is opened read-only
// with query_only, trusted_schema off and cell_size_check on; topics and
// messages must be plain tables with plain columns (no views, no generated
// columns, whose values SQLite would compute while reading); every value's
// type and size is checked in SQL (typeof, length) before the value itself
// is read, so no blob larger than ReaderOptions.MaxChunkBytes and no topic
// text larger than maxTopicText is ever loaded; messages are walked in
// batches of small rows (ids, times, sizes) with each message's data read
// alone, by row id, with SQLite's incremental blob I/O (sqliteblob.go), so
// it is held once; and every query runs under the caller's context.

// StorageSQLite3 is the storage_identifier of rosbag2's sqlite3 storage in
// metadata.yaml.
const StorageSQLite3 = "sqlite3"

// sqliteMagic is the first 16 bytes of every SQLite 3 database file.
const sqliteMagic = "SQLite format 3\x00"

// maxTopicText bounds each text field of a topics row (a name, a type, a
// serialization format, the QoS profiles' YAML).
const maxTopicText = 1 << 20

// sqliteBatch is the number of message rows (ids, times and sizes, not
// data) fetched by one query of the walk.
const sqliteBatch = 256

// isSQLite reports whether a file starting with head is an SQLite 3
// database.
func isSQLite(head []byte) bool { return string(head) == sqliteMagic }

// sqliteTopic is one row of the topics table.
type sqliteTopic struct {
	Topic
	wanted bool
}

// sqliteRow is one message row of the walk, without its data.
type sqliteRow struct {
	id, rowid, topicID, timestamp int64
	size                          int64
}

// sqliteFile yields the messages of one rosbag2 sqlite3 database in
// (timestamp, id) order.
type sqliteFile struct {
	name  string
	dsn   string
	file  os.FileInfo // the file as the bag was opened: every connection must open it
	db    *sql.DB
	blobs *blobReader // the connection that reads messages' data, opened by the first read
	limit int64
	want  map[string]bool

	topics map[int64]*sqliteTopic
	ids    []int64 // topic ids, ascending

	start    int64 // the first timestamp of the walk (0 if not an integer)
	anyStart bool  // whether the table holds any row

	batch   []sqliteRow // rows fetched and not yet returned
	last    *sqliteRow  // the last row fetched, where the next batch starts
	walkEnd bool        // the walk has fetched every row
}

// sqliteDSN is the connection string that opens path read-only. The file
// is declared immutable (SQLite then takes no locks and looks for no
// journal) unless a -wal or -journal file lies beside it: a bag recorded
// with rosbag2's "resilient" preset (WAL mode) may hold messages there.
func sqliteDSN(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	q := url.Values{}
	q.Set("mode", "ro")
	immutable := true
	for _, side := range []string{"-wal", "-journal"} {
		if _, err := os.Lstat(abs + side); err == nil {
			immutable = false
		}
	}
	if immutable {
		q.Set("immutable", "1")
	}
	q["_pragma"] = []string{"query_only(1)", "trusted_schema(0)", "cell_size_check(1)"}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String(), nil
}

// openSQLite opens the rosbag2 sqlite3 database at path, which must be
// the file checked (see the identity check below): it checks its tables
// and reads its topics and message counts. limit bounds every message's
// data; want, if not empty, restricts the messages returned to those
// topics.
//
// SQLite opens a database by name, not through a descriptor the reader
// could hand it (a /proc/self/fd/N name of the checked file fails with
// "unable to open database file" once another was renamed over it). So the
// reader makes it open the file twice only, the walk's connection here
// (database/sql held to that one connection, never reopened) and the blob
// reads' at the first message, and checks after each open that the name
// still leads to the file checked: a file renamed over the bag after Open
// is refused, whether the bag has one file or many.
func openSQLite(ctx context.Context, path string, checked os.FileInfo, limit int64, want map[string]bool) (src *sqliteFile, err error) {
	dsn, err := sqliteDSN(path)
	if err != nil {
		return nil, fmt.Errorf("bag: %s: %w", path, err)
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("bag: %s: open SQLite database: %w", path, err)
	}
	// One connection, kept: database/sql would otherwise open another by
	// name whenever the first is busy or idle too long.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	f := &sqliteFile{name: path, dsn: dsn, file: checked, db: db, limit: limit, want: want, topics: map[int64]*sqliteTopic{}}
	defer func() {
		if err != nil {
			f.close()
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = fmt.Errorf("%w (opening stopped: %w)", err, ctx.Err())
			}
		}
	}()
	if err := f.checkTables(ctx); err != nil {
		return nil, err
	}
	// The walk's connection is open now (checkTables ran on it).
	if err := f.checkIdentity("SQLite opened it by name to read its tables"); err != nil {
		return nil, err
	}
	if err := f.readTopics(ctx); err != nil {
		return nil, err
	}
	if err := f.countMessages(ctx); err != nil {
		return nil, err
	}
	if err := f.firstTimestamp(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// checkIdentity checks, after SQLite opened a connection to f by name,
// that the name still leads to the file the bag was opened with.
func (f *sqliteFile) checkIdentity(when string) error {
	st, err := os.Stat(f.name)
	if err != nil {
		return fmt.Errorf("bag: %s changed since the bag was opened: %w (%s)", f.name, err, when)
	}
	return sameFile(f.name, f.file, st, when)
}

// firstTimestamp reads the timestamp the walk starts at. SQLite orders
// NULL before numbers and numbers before text and blobs, so when the first
// row's timestamp is an integer no row has an earlier one; when it is not,
// the walk refuses that row, and the start is taken as 0.
func (f *sqliteFile) firstTimestamp(ctx context.Context) error {
	var ts sql.NullInt64
	err := f.db.QueryRowContext(ctx, `SELECT CASE WHEN typeof(timestamp) = 'integer' AND timestamp >= 0 THEN timestamp END FROM messages ORDER BY timestamp, id LIMIT 1`).Scan(&ts)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return f.queryErr(ctx, "read the first timestamp", err)
	}
	f.start, f.anyStart = ts.Int64, true
	return nil
}

func (f *sqliteFile) errorf(format string, args ...any) error {
	return fmt.Errorf("bag: %s: %s", f.name, fmt.Sprintf(format, args...))
}

// queryErr wraps an error of SQLite (a corrupt file, an interrupted query)
// with what was being read.
func (f *sqliteFile) queryErr(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("bag: %s: %s stopped: %w", f.name, what, cerr)
	}
	return fmt.Errorf("bag: %s: %s: %w (the file is not a readable rosbag2 sqlite3 database)", f.name, what, err)
}

// sqliteColumn is what the reader needs of a column: that it exists, is
// not generated and, for the ids, is the table's primary key.
type sqliteColumn struct {
	name string
	pk   bool
}

// checkTables checks that topics and messages are plain tables with the
// columns rosbag2 writes. A topics table without offered_qos_profiles
// (schema version 1) is accepted.
func (f *sqliteFile) checkTables(ctx context.Context) error {
	rows, err := f.db.QueryContext(ctx, `SELECT name, type FROM sqlite_schema WHERE name IN ('topics', 'messages')`)
	if err != nil {
		return f.queryErr(ctx, "read the schema", err)
	}
	kinds := map[string]string{}
	for rows.Next() {
		var name, kind string
		if err := rows.Scan(&name, &kind); err != nil {
			rows.Close()
			return f.queryErr(ctx, "read the schema", err)
		}
		kinds[name] = kind
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return f.queryErr(ctx, "read the schema", err)
	}
	for _, t := range []string{"topics", "messages"} {
		switch kinds[t] {
		case "table":
		case "":
			return f.errorf("has no %s table: a rosbag2 sqlite3 database has tables topics and messages", t)
		default:
			return f.errorf("%s is a %s, want a table (as rosbag2 writes it)", t, kinds[t])
		}
	}
	// The data is read by row id (see blobReader).
	var withoutRowID int64
	err = f.db.QueryRowContext(ctx, `SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = 'messages'`).Scan(&withoutRowID)
	if err != nil {
		return f.queryErr(ctx, "read the schema", err)
	}
	if withoutRowID != 0 {
		return f.errorf("messages is a WITHOUT ROWID table, want a table with row ids (as rosbag2 writes it)")
	}
	want := map[string][]sqliteColumn{
		"topics":   {{"id", true}, {"name", false}, {"type", false}, {"serialization_format", false}},
		"messages": {{"id", true}, {"topic_id", false}, {"timestamp", false}, {"data", false}},
	}
	for _, table := range []string{"topics", "messages"} {
		cols, err := f.columns(ctx, table)
		if err != nil {
			return err
		}
		for _, c := range want[table] {
			got, ok := cols[c.name]
			switch {
			case !ok:
				return f.errorf("table %s has no column %s: want columns %s, as rosbag2 writes them", table, c.name, columnList(want[table]))
			case got.hidden != 0:
				return f.errorf("column %s.%s is a generated or hidden column, want a stored one", table, c.name)
			case c.pk && got.pk != 1:
				return f.errorf("column %s.%s is not the table's primary key (as rosbag2 declares it)", table, c.name)
			}
		}
		if table == "messages" {
			// The data is read by row id (see blobReader): no column may
			// take the name by which the walk asks for it.
			for name := range cols {
				if n := strings.ToLower(name); n == "rowid" || n == "oid" || n == "_rowid_" {
					return f.errorf("table messages has a column named %s, which hides SQLite's row id (rosbag2 declares none)", name)
				}
			}
		}
		if table == "topics" {
			if got, ok := cols["offered_qos_profiles"]; ok && got.hidden != 0 {
				return f.errorf("column topics.offered_qos_profiles is a generated or hidden column, want a stored one")
			}
		}
	}
	return nil
}

func columnList(cols []sqliteColumn) string {
	var names []string
	for _, c := range cols {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// columnInfo is one row of pragma table_xinfo.
type columnInfo struct {
	pk, hidden int64
}

// columns lists the columns of table.
func (f *sqliteFile) columns(ctx context.Context, table string) (map[string]columnInfo, error) {
	rows, err := f.db.QueryContext(ctx, `SELECT name, pk, hidden FROM pragma_table_xinfo(?)`, table)
	if err != nil {
		return nil, f.queryErr(ctx, "read the columns of "+table, err)
	}
	defer rows.Close()
	cols := map[string]columnInfo{}
	for rows.Next() {
		var name string
		var c columnInfo
		if err := rows.Scan(&name, &c.pk, &c.hidden); err != nil {
			return nil, f.queryErr(ctx, "read the columns of "+table, err)
		}
		cols[name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, f.queryErr(ctx, "read the columns of "+table, err)
	}
	return cols, nil
}

// readTopics reads the topics table, checking every field's type and size
// before reading it.
func (f *sqliteFile) readTopics(ctx context.Context) error {
	cols, err := f.columns(ctx, "topics")
	if err != nil {
		return err
	}
	qos := "''"
	if _, ok := cols["offered_qos_profiles"]; ok {
		qos = "offered_qos_profiles"
	}
	fields := []string{"name", "type", "serialization_format", qos}
	// Any row with a field that is not text, or longer than the bound?
	var bad []string
	for _, c := range fields {
		bad = append(bad, fmt.Sprintf("typeof(%[1]s) != 'text' OR length(%[1]s) > %d", c, maxTopicText))
	}
	var badID, badName sql.NullString
	err = f.db.QueryRowContext(ctx, `SELECT CAST(id AS TEXT), typeof(id) FROM topics WHERE typeof(id) != 'integer' OR `+strings.Join(bad, " OR ")+` LIMIT 1`).
		Scan(&badID, &badName)
	switch {
	case err == nil:
		return f.errorf("topics row with id %s (%s) has a field that is not text or is longer than %d bytes: want text fields name, type, serialization_format, offered_qos_profiles",
			badID.String, badName.String, maxTopicText)
	case !errors.Is(err, sql.ErrNoRows):
		return f.queryErr(ctx, "read the topics table", err)
	}
	rows, err := f.db.QueryContext(ctx, `SELECT id, name, type, serialization_format, `+qos+` FROM topics ORDER BY id`)
	if err != nil {
		return f.queryErr(ctx, "read the topics table", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var t sqliteTopic
		var q string
		if err := rows.Scan(&id, &t.Name, &t.Type, &t.MessageEncoding, &q); err != nil {
			return f.queryErr(ctx, "read the topics table", err)
		}
		profiles, err := ParseQoSProfiles(q)
		if err != nil {
			return fmt.Errorf("%w (topic %s in %s)", err, t.Name, f.name)
		}
		t.OfferedQoSProfiles = profiles
		t.wanted = len(f.want) == 0 || f.want[t.Name]
		if t.wanted && t.MessageEncoding != MessageEncodingCDR {
			return f.errorf("topic %s (id %d) has serialization format %q, want %q: this reader returns CDR messages only (leave the topic out with ReaderOptions.Topics)",
				t.Name, id, t.MessageEncoding, MessageEncodingCDR)
		}
		f.topics[id] = &t
		f.ids = append(f.ids, id)
	}
	if err := rows.Err(); err != nil {
		return f.queryErr(ctx, "read the topics table", err)
	}
	slices.Sort(f.ids)
	return nil
}

// countMessages counts the messages of each topic; a message of a topic
// id the topics table does not have is an error.
func (f *sqliteFile) countMessages(ctx context.Context) error {
	rows, err := f.db.QueryContext(ctx, `SELECT topic_id, typeof(topic_id), count(*) FROM messages GROUP BY topic_id`)
	if err != nil {
		return f.queryErr(ctx, "count the messages", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id sql.NullInt64
		var kind string
		var n int64
		if err := rows.Scan(&id, &kind, &n); err != nil {
			return f.queryErr(ctx, "count the messages", err)
		}
		t := f.topics[id.Int64]
		if kind != "integer" || t == nil {
			return f.errorf("%d messages have topic_id %v (%s), which the topics table does not list", n, id.Int64, kind)
		}
		t.MessageCount = uint64(n)
	}
	if err := rows.Err(); err != nil {
		return f.queryErr(ctx, "count the messages", err)
	}
	return nil
}

// path names the file in errors.
func (f *sqliteFile) path() string { return f.name }

// startTime returns the first timestamp of the walk (the walk's order
// checks the rest), and whether the table holds any row.
func (f *sqliteFile) startTime() (uint64, bool) { return uint64(f.start), f.anyStart }

// fileTopics lists the topics in id order.
func (f *sqliteFile) fileTopics() ([]Topic, error) {
	out := make([]Topic, 0, len(f.ids))
	for _, id := range f.ids {
		out = append(out, f.topics[id].Topic)
	}
	return out, nil
}

// close closes the database.
func (f *sqliteFile) close() error {
	if f.db == nil {
		return nil
	}
	err := f.db.Close()
	f.db = nil
	if f.blobs != nil {
		err = errors.Join(err, f.blobs.close())
		f.blobs = nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	return nil
}

// The walk over the messages: a batch of rows in (timestamp, id) order,
// the first one, then those after the last row fetched. On a database as
// rosbag2 writes it this walks timestamp_idx (whose entries end with the
// row id), without sorting.
const (
	sqliteWalkColumns = `SELECT CASE WHEN typeof(id) = 'integer' THEN id END, typeof(id), rowid, ` +
		`CASE WHEN typeof(topic_id) = 'integer' THEN topic_id END, ` +
		`CASE WHEN typeof(timestamp) = 'integer' THEN timestamp END, typeof(timestamp), typeof(data), length(data) FROM messages`
	sqliteWalkFirst = sqliteWalkColumns + ` ORDER BY timestamp, id LIMIT ?`
	sqliteWalkNext  = sqliteWalkColumns + ` WHERE (timestamp, id) > (?, ?) ORDER BY timestamp, id LIMIT ?`
)

// fetch reads the next batch of message rows: ids, topic ids, timestamps
// and data sizes, each checked for its type.
func (f *sqliteFile) fetch(ctx context.Context) error {
	var (
		rows *sql.Rows
		err  error
	)
	if f.last == nil {
		rows, err = f.db.QueryContext(ctx, sqliteWalkFirst, sqliteBatch)
	} else {
		rows, err = f.db.QueryContext(ctx, sqliteWalkNext, f.last.timestamp, f.last.id, sqliteBatch)
	}
	if err != nil {
		return f.queryErr(ctx, "read the messages", err)
	}
	defer rows.Close()
	f.batch = f.batch[:0]
	for rows.Next() {
		var r sqliteRow
		var idKind, tsKind, dataKind string
		var id, topicID, ts, size sql.NullInt64
		if err := rows.Scan(&id, &idKind, &r.rowid, &topicID, &ts, &tsKind, &dataKind, &size); err != nil {
			return f.queryErr(ctx, "read the messages", err)
		}
		r.id, r.topicID, r.timestamp, r.size = id.Int64, topicID.Int64, ts.Int64, size.Int64
		switch {
		case idKind != "integer":
			return f.errorf("a message has an id of type %s, want an integer", idKind)
		case tsKind != "integer":
			return f.errorf("message %d has a timestamp of type %s, want integer nanoseconds", r.id, tsKind)
		case r.timestamp < 0:
			return f.errorf("message %d has timestamp %d, want nanoseconds since the epoch (>= 0)", r.id, r.timestamp)
		case dataKind != "blob":
			return f.errorf("message %d has data of type %s, want a blob of CDR bytes", r.id, dataKind)
		}
		f.batch = append(f.batch, r)
	}
	if err := rows.Err(); err != nil {
		return f.queryErr(ctx, "read the messages", err)
	}
	if len(f.batch) < sqliteBatch {
		f.walkEnd = true
	}
	if n := len(f.batch); n > 0 {
		last := f.batch[n-1]
		f.last = &last
	}
	return nil
}

// nextMessage returns the next message of a wanted topic in (timestamp,
// id) order, or io.EOF. Its data is read alone, bounded by the limit.
func (f *sqliteFile) nextMessage(ctx context.Context) (Message, error) {
	if f.db == nil {
		return Message{}, errors.New("bag: reader is closed")
	}
	for {
		if len(f.batch) == 0 {
			if f.walkEnd {
				return Message{}, io.EOF
			}
			if err := f.fetch(ctx); err != nil {
				return Message{}, err
			}
			continue
		}
		r := f.batch[0]
		f.batch = f.batch[1:]
		t := f.topics[r.topicID]
		if t == nil {
			return Message{}, f.errorf("message %d has topic_id %d, which the topics table does not list", r.id, r.topicID)
		}
		if !t.wanted {
			continue
		}
		if r.size > f.limit {
			return Message{}, f.errorf("message %d (topic %s) has %d bytes, more than the %d-byte limit", r.id, t.Name, r.size, f.limit)
		}
		if f.blobs == nil {
			b, err := openBlobReader(f.dsn)
			if err != nil {
				return Message{}, f.queryErr(ctx, fmt.Sprintf("read message %d", r.id), err)
			}
			f.blobs = b
			if err := f.checkIdentity("SQLite opened it again by name to read its messages' data"); err != nil {
				return Message{}, err
			}
		}
		data, err := f.blobs.readBlob(ctx, r.rowid, r.size)
		if err != nil {
			return Message{}, f.queryErr(ctx, fmt.Sprintf("read message %d", r.id), err)
		}
		ns := uint64(r.timestamp)
		m := Message{Topic: t.Name, Type: t.Type, Data: data[:len(data):len(data)], logTime: ns, publishTime: ns}
		m.LogTime = nanoTime(ns)
		m.PublishTime = m.LogTime
		return m, nil
	}
}
