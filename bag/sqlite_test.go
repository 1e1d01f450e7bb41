package bag_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/bag/bagtest"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
)

// sqliteTopics are the topics of the test's sqlite3 bags, created in this
// order (ids 1, 2, 3).
var sqliteTopics = []bagtest.Topic{
	{Name: topicKV, Type: msgs.TypeVideoKVCache, QoS: []bag.QoS{bag.DefaultQoS()}},
	{Name: topicText, Type: msgs.TypeTextContext, QoS: []bag.QoS{bag.DefaultQoS(), bag.LatchedQoS()}},
	{Name: topicDiag, Type: msgs.TypeDiagnosticArray},
}

// sqliteMessages are n messages per topic, inserted out of log-time order
// and with ties (two topics share each log time), as a recorder writing
// from several callbacks may store them.
func sqliteMessages(t *testing.T, n int) []bagtest.Message {
	t.Helper()
	base := time.Unix(1700000000, 0)
	var out []bagtest.Message
	for i := n - 1; i >= 0; i-- {
		at := base.Add(time.Duration(i) * 100 * time.Millisecond)
		out = append(out,
			bagtest.Message{Topic: topicText, LogTime: at, Data: mustCDR(t, textMsg(uint64(i)))},
			bagtest.Message{Topic: topicKV, LogTime: at, Data: mustCDR(t, kvMsg(uint64(i), 3))},
			bagtest.Message{Topic: topicDiag, LogTime: at.Add(time.Millisecond), Data: mustCDR(t, diagMsg(uint64(i)))})
	}
	return out
}

// wantOrder is msgs in rosbag2's read order: by timestamp, then by row id
// (insertion order).
func wantOrder(ms []bagtest.Message) []bagtest.Message {
	out := append([]bagtest.Message(nil), ms...)
	// A stable sort keeps insertion (row id) order among equal times.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].LogTime.Before(out[j-1].LogTime); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func writeSQLiteBag(t *testing.T, n int) (string, []bagtest.Message) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rec")
	ms := sqliteMessages(t, n)
	if err := bagtest.Write(dir, sqliteTopics, ms); err != nil {
		t.Fatal(err)
	}
	return dir, ms
}

func TestSQLiteBagRead(t *testing.T) {
	// 300 messages: more than one batch of the reader's walk.
	dir, ms := writeSQLiteBag(t, 100)
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if md := r.Metadata(); md == nil || md.StorageIdentifier != bag.StorageSQLite3 || md.MessageCount != 300 {
		t.Fatalf("metadata %+v", md)
	}
	topics := r.Topics()
	if len(topics) != 3 {
		t.Fatalf("topics %+v", topics)
	}
	for i, want := range sqliteTopics {
		got := topics[i]
		if got.Name != want.Name || got.Type != want.Type || got.MessageEncoding != "cdr" || got.MessageCount != 100 ||
			(len(want.QoS) > 0 || len(got.OfferedQoSProfiles) > 0) && !reflect.DeepEqual(got.OfferedQoSProfiles, want.QoS) {
			t.Errorf("topic %d: %+v, want %+v with 100 cdr messages", i, got, want)
		}
	}
	got := readAll(t, r)
	want := wantOrder(ms)
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	types := map[string]string{topicKV: msgs.TypeVideoKVCache, topicText: msgs.TypeTextContext, topicDiag: msgs.TypeDiagnosticArray}
	for i := range got {
		g, w := got[i], want[i]
		if g.Topic != w.Topic || !g.LogTime.Equal(w.LogTime) || !g.PublishTime.Equal(w.LogTime) || g.Type != types[w.Topic] || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("message %d: %s %s %v (%d bytes), want %s %v (%d bytes)", i, g.Topic, g.Type, g.LogTime, len(g.Data), w.Topic, w.LogTime, len(w.Data))
		}
	}
	// Ties come in row id order: the text context was inserted before
	// the KV cache of the same time.
	if got[0].Topic != topicText || got[1].Topic != topicKV {
		t.Errorf("tie order %s, %s; want %s, %s", got[0].Topic, got[1].Topic, topicText, topicKV)
	}
	// The data decodes as the message it was.
	var kv msgs.VideoKVCache
	if err := kv.UnmarshalCDR(got[1].Data); err != nil || kv.Seq != 0 {
		t.Errorf("first KV cache: seq %d, %v", kv.Seq, err)
	}
}

func TestSQLiteTopicFilterAndSingleFile(t *testing.T) {
	dir, ms := writeSQLiteBag(t, 5)
	file := filepath.Join(dir, "rec_0.db3")
	for _, path := range []string{dir, file} {
		r, err := bag.OpenWith(context.Background(), path, bag.ReaderOptions{Topics: []string{topicKV}})
		if err != nil {
			t.Fatal(err)
		}
		got := readAll(t, r)
		r.Close()
		if len(got) != 5 {
			t.Fatalf("%s: %d messages, want 5", path, len(got))
		}
		for i, m := range got {
			if m.Topic != topicKV || !m.LogTime.Equal(time.Unix(1700000000, int64(i)*1e8)) {
				t.Errorf("%s: message %d on %s at %v", path, i, m.Topic, m.LogTime)
			}
		}
		if len(r.Topics()) != 3 {
			t.Errorf("%s: Topics lists %d topics, want all 3 whatever the filter", path, len(r.Topics()))
		}
	}
	// A folder without metadata.yaml (a recording that was killed) reads
	// its .db3 files.
	if err := os.Remove(filepath.Join(dir, bag.MetadataFile)); err != nil {
		t.Fatal(err)
	}
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := readAll(t, r); len(got) != len(ms) {
		t.Fatalf("folder without metadata: %d messages, want %d", len(got), len(ms))
	}
}

// TestSQLiteCopyOfRegressionBag converts the regression bag (MCAP) to the
// sqlite3 storage and reads both: the same topics and the same messages in
// the same order.
func TestSQLiteCopyOfRegressionBag(t *testing.T) {
	src, err := golden.ExtractRegressionBag(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "regression_sqlite")
	if err := bagtest.Convert(context.Background(), src, dst); err != nil {
		t.Fatal(err)
	}
	a, err := bag.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := bag.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ta, tb := a.Topics(), b.Topics()
	if len(ta) != len(tb) || len(ta) < 3 {
		t.Fatalf("topics %d and %d", len(ta), len(tb))
	}
	for i := range ta {
		if ta[i].Name != tb[i].Name || ta[i].Type != tb[i].Type || ta[i].MessageCount != tb[i].MessageCount ||
			!reflect.DeepEqual(ta[i].OfferedQoSProfiles, tb[i].OfferedQoSProfiles) {
			t.Errorf("topic %d: %+v and %+v", i, ta[i], tb[i])
		}
	}
	ma, mb := readAll(t, a), readAll(t, b)
	if len(ma) != len(mb) {
		t.Fatalf("%d and %d messages", len(ma), len(mb))
	}
	for i := range ma {
		if ma[i].Topic != mb[i].Topic || !ma[i].LogTime.Equal(mb[i].LogTime) || !bytes.Equal(ma[i].Data, mb[i].Data) {
			t.Fatalf("message %d differs: %s %v and %s %v", i, ma[i].Topic, ma[i].LogTime, mb[i].Topic, mb[i].LogTime)
		}
	}
}

// damaged writes a one-file sqlite3 bag and applies edit (SQL run on the
// database) to it; it returns the bag folder.
func damaged(t *testing.T, edit ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bad")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := bagtest.CreateDB(filepath.Join(dir, "bad_0.db3"), sqliteTopics, sqliteMessages(t, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range edit {
		if _, err := db.Exec(s); err != nil {
			db.Close()
			t.Fatalf("%s: %v", s, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openRead opens path and reads every message, returning the first error.
func openRead(path string, opts bag.ReaderOptions) (int, error) {
	r, err := bag.OpenWith(context.Background(), path, opts)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for _, err := range r.Messages(context.Background()) {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func TestSQLiteHostile(t *testing.T) {
	writeFile := func(t *testing.T, data []byte) string {
		p := filepath.Join(t.TempDir(), "x.db3")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := filepath.Join(damaged(t), "bad_0.db3")
	goodBytes, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	// The last page holds the last rows of the messages table.
	corrupt := bytes.Clone(goodBytes)
	for i := len(corrupt) - 4096; i < len(corrupt); i += 7 {
		corrupt[i] = 0xa5
	}
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
		opts bag.ReaderOptions
		want string
	}{
		{"not a database", func(t *testing.T) string { return writeFile(t, bytes.Repeat([]byte("not a bag "), 20)) },
			bag.ReaderOptions{}, "not an MCAP file (bad magic 6e 6f 74 20 61 20 62 61) nor an SQLite 3 database: want a rosbag2 .mcap or .db3 file"},
		{"sqlite header then garbage", func(t *testing.T) string {
			return writeFile(t, append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xff}, 5000)...))
		}, bag.ReaderOptions{}, "not a readable rosbag2 sqlite3 database"},
		{"truncated to half", func(t *testing.T) string { return writeFile(t, goodBytes[:len(goodBytes)/2]) },
			bag.ReaderOptions{}, "not a readable rosbag2 sqlite3 database"},
		{"overwritten last page", func(t *testing.T) string { return writeFile(t, corrupt) },
			bag.ReaderOptions{}, "not a readable rosbag2 sqlite3 database"},
		{"no messages table", func(t *testing.T) string { return damaged(t, "DROP TABLE messages") },
			bag.ReaderOptions{}, "has no messages table: a rosbag2 sqlite3 database has tables topics and messages"},
		{"messages is a view", func(t *testing.T) string {
			return damaged(t, "ALTER TABLE messages RENAME TO m2", "CREATE VIEW messages AS SELECT * FROM m2")
		}, bag.ReaderOptions{}, "messages is a view, want a table"},
		{"no data column", func(t *testing.T) string { return damaged(t, "ALTER TABLE messages DROP COLUMN data") },
			bag.ReaderOptions{}, "table messages has no column data"},
		{"generated data column", func(t *testing.T) string {
			return damaged(t, "DROP TABLE messages",
				"CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB GENERATED ALWAYS AS (zeroblob(1000000000)))",
				"INSERT INTO messages(topic_id, timestamp) VALUES (1, 5)")
		}, bag.ReaderOptions{}, "column messages.data is a generated or hidden column"},
		{"id not the primary key", func(t *testing.T) string {
			return damaged(t, "DROP TABLE messages", "CREATE TABLE messages(id INTEGER, topic_id INTEGER, timestamp INTEGER, data BLOB)")
		}, bag.ReaderOptions{}, "column messages.id is not the table's primary key"},
		{"a column named rowid", func(t *testing.T) string {
			return damaged(t, "DROP TABLE messages",
				"CREATE TABLE messages(id INT PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB, RowID INTEGER)",
				"INSERT INTO messages VALUES (1, 1, 5, x'00010000', 7)")
		}, bag.ReaderOptions{}, "table messages has a column named RowID, which hides SQLite's row id"},
		{"messages without rowid", func(t *testing.T) string {
			return damaged(t, "DROP TABLE messages",
				"CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB) WITHOUT ROWID",
				"INSERT INTO messages VALUES (1, 1, 5, x'00010000')")
		}, bag.ReaderOptions{}, "messages is a WITHOUT ROWID table, want a table with row ids (as rosbag2 writes it)"},
		{"data is text", func(t *testing.T) string { return damaged(t, "UPDATE messages SET data = 'hello' WHERE id = 2") },
			bag.ReaderOptions{}, "message 2 has data of type text, want a blob of CDR bytes"},
		{"data is NULL", func(t *testing.T) string {
			return damaged(t, "DROP TABLE messages", "CREATE TABLE messages(id INTEGER PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB)",
				"INSERT INTO messages VALUES (1, 1, 5, NULL)")
		}, bag.ReaderOptions{}, "message 1 has data of type null"},
		{"timestamp is text", func(t *testing.T) string { return damaged(t, "UPDATE messages SET timestamp = 'soon' WHERE id = 4") },
			bag.ReaderOptions{}, "message 4 has a timestamp of type text, want integer nanoseconds"},
		{"negative timestamp", func(t *testing.T) string { return damaged(t, "UPDATE messages SET timestamp = -1 WHERE id = 4") },
			bag.ReaderOptions{}, "message 4 has timestamp -1, want nanoseconds since the epoch"},
		{"blob over the limit", func(t *testing.T) string {
			return damaged(t, "UPDATE messages SET data = zeroblob(2000000) WHERE id = 5")
		}, bag.ReaderOptions{MaxChunkBytes: 1 << 20}, "message 5 (topic /fastwam/video_kv_cache) has 2000000 bytes, more than the 1048576-byte limit"},
		{"message of an unknown topic", func(t *testing.T) string { return damaged(t, "UPDATE messages SET topic_id = 9 WHERE id = 1") },
			bag.ReaderOptions{}, "1 messages have topic_id 9 (integer), which the topics table does not list"},
		{"wanted topic not cdr", func(t *testing.T) string {
			return damaged(t, fmt.Sprintf("UPDATE topics SET serialization_format = 'json' WHERE name = '%s'", topicKV))
		}, bag.ReaderOptions{}, `topic ` + topicKV + ` (id 1) has serialization format "json", want "cdr"`},
		{"topic name too long", func(t *testing.T) string {
			return damaged(t, "UPDATE topics SET name = hex(zeroblob(600000)) WHERE id = 2")
		},
			bag.ReaderOptions{}, "topics row with id 2 (integer) has a field that is not text or is longer than 1048576 bytes"},
		{"topic type a blob", func(t *testing.T) string { return damaged(t, "UPDATE topics SET type = x'00ff' WHERE id = 3") },
			bag.ReaderOptions{}, "topics row with id 3 (integer) has a field that is not text"},
		{"bad QoS text", func(t *testing.T) string {
			return damaged(t, "UPDATE topics SET offered_qos_profiles = '- history: [' WHERE id = 1")
		},
			bag.ReaderOptions{}, "offered_qos_profiles is not a YAML list of profiles"},
		{"metadata says sqlite3, file is MCAP", func(t *testing.T) string {
			dir := damaged(t)
			meta := bag.Metadata{Version: 5, StorageIdentifier: bag.StorageSQLite3, RelativeFilePaths: []string{"x_0.mcap"}}
			if err := os.WriteFile(filepath.Join(dir, bag.MetadataFile), meta.Encode(), 0o644); err != nil {
				t.Fatal(err)
			}
			writeBag(t, filepath.Join(dir, "m"), bag.WriterOptions{}, 2)
			if err := os.Rename(filepath.Join(dir, "m", "m_0.mcap"), filepath.Join(dir, "x_0.mcap")); err != nil {
				t.Fatal(err)
			}
			return dir
		}, bag.ReaderOptions{}, "is not an SQLite 3 database"},
		{"metadata says mcap, file is SQLite", func(t *testing.T) string {
			dir := damaged(t)
			meta := bag.Metadata{Version: 5, StorageIdentifier: bag.StorageIdentifier, RelativeFilePaths: []string{"bad_0.db3"}}
			if err := os.WriteFile(filepath.Join(dir, bag.MetadataFile), meta.Encode(), 0o644); err != nil {
				t.Fatal(err)
			}
			return dir
		}, bag.ReaderOptions{}, `is an SQLite database, but metadata.yaml says storage "mcap"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openRead(tc.path(t), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			t.Log(err)
		})
	}
	// An unwanted topic may be anything: a non-CDR topic left out is not
	// an error, and an over-limit message of an unwanted topic is never
	// read.
	dir := damaged(t, fmt.Sprintf("UPDATE topics SET serialization_format = 'json' WHERE name = '%s'", topicDiag))
	if n, err := openRead(dir, bag.ReaderOptions{Topics: []string{topicKV, topicText}}); err != nil || n != 6 {
		t.Errorf("non-CDR topic left out: %d messages, %v; want 6, nil", n, err)
	}
	dir = damaged(t, "UPDATE messages SET data = zeroblob(2000000) WHERE id = 3") // a /diagnostics message
	if n, err := openRead(dir, bag.ReaderOptions{Topics: []string{topicKV, topicText}, MaxChunkBytes: 1 << 20}); err != nil || n != 6 {
		t.Errorf("over-limit message of a topic left out: %d messages, %v; want 6, nil", n, err)
	}
	// A bag of schema version 1 (before Foxy: no offered_qos_profiles
	// column) reads, without QoS profiles.
	dir = damaged(t, "ALTER TABLE topics DROP COLUMN offered_qos_profiles", "DROP TABLE schema")
	if r, err := bag.Open(dir); err != nil {
		t.Errorf("schema 1 bag: %v", err)
	} else {
		if ts := r.Topics(); len(ts) != 3 || ts[0].OfferedQoSProfiles != nil || ts[0].MessageCount != 3 {
			t.Errorf("schema 1 bag: topics %+v", ts)
		}
		if got := readAll(t, r); len(got) != 9 {
			t.Errorf("schema 1 bag: %d messages, want 9", len(got))
		}
		r.Close()
	}
	// A row whose data is not CDR is returned as it is (the decoders
	// refuse it, naming the message).
	dir = damaged(t, "UPDATE messages SET data = x'deadbeef' WHERE id = 2")
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for m, err := range r.Messages(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(m.Data, []byte{0xde, 0xad, 0xbe, 0xef}) {
			var kv msgs.VideoKVCache
			if err := kv.UnmarshalCDR(m.Data); err == nil {
				t.Error("0xdeadbeef decoded as a VideoKVCache")
			}
			return
		}
	}
	t.Error("the non-CDR row was not returned")
}

// TestSQLiteWALBag reads a bag recorded with rosbag2's "resilient" preset
// (journal_mode=WAL) whose last messages are still in the -wal file: the
// reader must not declare such a file immutable.
func TestSQLiteWALBag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wal")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "wal_0.db3")
	db, err := bagtest.CreateDB(path, sqliteTopics, sqliteMessages(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range []string{"PRAGMA journal_mode=WAL", "PRAGMA wal_autocheckpoint=0",
		fmt.Sprintf("INSERT INTO messages (timestamp, topic_id, data) VALUES (%d, 1, x'00010000')", time.Unix(1700000001, 0).UnixNano())} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(path + "-wal"); err != nil {
		t.Fatalf("no -wal file: %v", err)
	}
	n, err := openRead(path, bag.ReaderOptions{})
	if err != nil || n != 7 {
		t.Fatalf("%d messages, %v; want 7 (6 in the database, 1 in the WAL)", n, err)
	}
}

func TestSQLiteCancellation(t *testing.T) {
	dir, _ := writeSQLiteBag(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := bag.OpenWith(ctx, dir, bag.ReaderOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("open under a cancelled context: %v", err)
	} else {
		t.Log(err)
	}
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next under a cancelled context: %v", err)
	}
	// The reader stays usable after a Next refused for ctx.
	n := 0
	for {
		_, err := r.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 9 {
		t.Fatalf("%d messages after the cancelled Next, want 9", n)
	}
}

// TestSQLiteWalkUsesTheIndex checks that the reader's walk over a bag as
// Humble writes it goes through the timestamp index, without sorting the
// table.
func TestSQLiteWalkUsesTheIndex(t *testing.T) {
	dir, _ := writeSQLiteBag(t, 2)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "rec_0.db3")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`EXPLAIN QUERY PLAN `+bag.SQLiteWalkQuery, 0, 0, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	text := strings.Join(plan, "; ")
	if !strings.Contains(text, "timestamp_idx") || strings.Contains(text, "TEMP B-TREE") {
		t.Fatalf("query plan %q: want a walk of timestamp_idx without a temporary sort", text)
	}
}

// TestSQLiteRandomMutations opens 500 copies of a small Humble bag with 1
// to 8 random bytes overwritten (the fuzzing engine manages few executions
// a second on the instrumented, transpiled SQLite): each one reads, or
// fails with an error, quickly and without a panic.
func TestSQLiteRandomMutations(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "seed")
	if err := bagtest.Write(dir, sqliteTopics, sqliteMessages(t, 3)); err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(filepath.Join(dir, "seed_0.db3"))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	failed := 0
	for i := range 500 {
		data := bytes.Clone(seed)
		for range 1 + r.IntN(8) {
			data[r.IntN(len(data))] = byte(r.IntN(256))
		}
		p := filepath.Join(t.TempDir(), "m.db3")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := openRead(p, bag.ReaderOptions{MaxChunkBytes: 1 << 16}); err != nil {
			failed++
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("mutation %d took %v", i, d)
		}
	}
	t.Logf("%d of 500 mutated databases refused with an error, the others read", failed)
}

// fuzzSQLiteSeed returns the seed database of FuzzSQLiteBag: a sqlite3
// bag of two messages as bagtest writes it, rewritten with SQLite's
// smallest page size (512 bytes) so that the seed is a few KB. The fuzzing
// engine minimises the first inputs it finds interesting, at a cost in
// proportion to their size: with the 16 KB seed of 4 KB pages a cold run
// spent its minute minimising.
func fuzzSQLiteSeed(tb testing.TB) []byte {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "seed")
	ms := []bagtest.Message{
		{Topic: topicKV, LogTime: time.Unix(1700000000, 0), Data: []byte{0, 1, 0, 0, 1, 2, 3, 4}},
		{Topic: topicText, LogTime: time.Unix(1700000000, 5), Data: []byte{0, 1, 0, 0, 9}},
	}
	if err := bagtest.Write(dir, sqliteTopics, ms); err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, "seed_0.db3")
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(p)+"?mode=rw")
	if err != nil {
		tb.Fatal(err)
	}
	for _, q := range []string{"PRAGMA page_size = 512", "VACUUM"} {
		if _, err := db.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		tb.Fatal(err)
	}
	seed, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return seed
}

// TestWriteSQLiteFuzzCorpus writes the seed corpus of FuzzSQLiteBag to
// testdata/fuzz/FuzzSQLiteBag when BAG_WRITE_FUZZ_CORPUS is set; the
// corpus is committed. TestSQLiteFuzzSeedReads checks it reads.
func TestWriteSQLiteFuzzCorpus(t *testing.T) {
	if os.Getenv("BAG_WRITE_FUZZ_CORPUS") == "" {
		t.Skip("set BAG_WRITE_FUZZ_CORPUS=1 to rewrite testdata/fuzz/FuzzSQLiteBag")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSQLiteBag")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", fuzzSQLiteSeed(t))
	if err := os.WriteFile(filepath.Join(dir, "two_messages"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteFuzzSeedReads: the small seed is a valid bag whose two
// messages read, so the fuzzer starts from an accepted input.
func TestSQLiteFuzzSeedReads(t *testing.T) {
	seed := fuzzSQLiteSeed(t)
	if len(seed) > 8<<10 {
		t.Fatalf("seed is %d bytes, want a few KB", len(seed))
	}
	p := filepath.Join(t.TempDir(), "s.db3")
	if err := os.WriteFile(p, seed, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := bag.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for _, err := range r.Messages(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d messages, want 2", n)
	}
}

// FuzzSQLiteBag opens arbitrary bytes as a rosbag2 sqlite3 database and
// reads every message: an error or messages within the limit, never a
// panic or a hang. The input goes to one file per worker, rewritten for
// each input (a fresh temporary folder per input cost more than the read).
func FuzzSQLiteBag(f *testing.F) {
	f.Add(fuzzSQLiteSeed(f))
	p := filepath.Join(f.TempDir(), "f.db3")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := bag.OpenWith(context.Background(), p, bag.ReaderOptions{MaxChunkBytes: 1 << 16})
		if err != nil {
			return
		}
		defer r.Close()
		for m, err := range r.Messages(context.Background()) {
			if err != nil {
				return
			}
			if len(m.Data) > 1<<16 {
				t.Fatalf("a message of %d bytes passed the 65536-byte limit", len(m.Data))
			}
		}
	})
}

// TestSQLiteBlobCopiedOnce checks that reading a message copies its data
// once, into the buffer returned, and that SQLite does not materialize it
// in its own heap first: the reader reads it in pieces with incremental
// blob I/O. Through a query, SQLite's heap held the whole value, the
// driver copied it into a Go slice and database/sql's Scan copied that
// again (932 MB peak for a 300 MB message). The read runs in a fresh
// process (this test binary, run again): SQLite's allocator keeps the
// memory it frees, so in this one, where other tests wrote large blobs,
// its copy would not show in the resident memory.
func TestSQLiteBlobCopiedOnce(t *testing.T) {
	const size = 32 << 20
	pattern := func(i int) byte { return byte(i * 7) }
	if dir := os.Getenv("BAG_TEST_BLOB_READ"); dir != "" {
		r, err := bag.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var before, after runtime.MemStats
		// Give the heap's free pages back, so that the Go copy cannot
		// hide in memory already resident.
		debug.FreeOSMemory()
		rss0 := resetPeakRSS(t)
		runtime.ReadMemStats(&before)
		m, err := r.Next(t.Context())
		runtime.ReadMemStats(&after)
		rss := peakRSS(t)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Data) != size {
			t.Fatalf("read %d bytes, not the %d written", len(m.Data), size)
		}
		for i, b := range m.Data {
			if b != pattern(i) {
				t.Fatalf("byte %d is %d, want %d", i, b, pattern(i))
			}
		}
		fmt.Printf("BLOBREAD %d %d\n", after.TotalAlloc-before.TotalAlloc, rss-rss0)
		return
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = pattern(i)
	}
	dir := filepath.Join(t.TempDir(), "big")
	topics := []bagtest.Topic{{Name: topicKV, Type: msgs.TypeVideoKVCache}}
	at := time.Unix(1700000000, 0)
	if err := bagtest.Write(dir, topics, []bagtest.Message{{Topic: topicKV, LogTime: at, Data: data}}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSQLiteBlobCopiedOnce$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "BAG_TEST_BLOB_READ="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the reading process: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("the reading process skipped:\n%s", out)
	}
	var alloc, grew int64
	i := strings.Index(string(out), "BLOBREAD ")
	if i < 0 {
		t.Fatalf("the reading process printed no figures:\n%s", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "BLOBREAD %d %d", &alloc, &grew); err != nil {
		t.Fatalf("figures of the reading process: %v\n%s", err, out)
	}
	t.Logf("reading one %d-byte message: %d bytes allocated on the Go heap, peak resident memory up %d bytes", size, alloc, grew)
	// One copy is size bytes; a second would be 2*size. The rest of a
	// read allocates a few kilobytes.
	if alloc > size*3/2 {
		t.Errorf("reading one %d-byte message allocated %d bytes on the Go heap, want about one copy (at most %d)", size, alloc, size*3/2)
	}
	// The peak resident memory grows by the Go copy, SQLite's page cache
	// (2 MB at most by default) and a 1 MiB piece; SQLite's own copy of
	// the value (C memory, which the Go heap does not count) would add
	// size more.
	// Under the race detector every byte touched also has shadow memory
	// (the README's test command runs with -race: 103 MB for a 32 MiB
	// read), so only the Go heap's count above holds there.
	if !raceEnabled && grew > size*3/2 {
		t.Errorf("the peak resident memory grew by %d bytes while reading one %d-byte message, want about one copy (at most %d)", grew, size, size*3/2)
	}
}

// resetPeakRSS resets the process's peak resident set size to its current
// one (Linux's clear_refs) and returns it, in bytes.
func resetPeakRSS(t *testing.T) int64 {
	t.Helper()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak resident memory: %v", err)
	}
	return peakRSS(t)
}

// peakRSS returns the process's peak resident set size (VmHWM), in bytes.
func peakRSS(t *testing.T) int64 {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("cannot read the peak resident memory: %v", err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmHWM in /proc/self/status")
	return 0
}

// TestSQLiteDataByRowID: the data is read by SQLite's row id, which an id
// declared INT PRIMARY KEY (not INTEGER) is not an alias of; each message
// still gets its own row's data.
func TestSQLiteDataByRowID(t *testing.T) {
	dir := damaged(t, "DROP TABLE messages",
		"CREATE TABLE messages(id INT PRIMARY KEY, topic_id INTEGER, timestamp INTEGER, data BLOB)",
		"INSERT INTO messages(rowid, id, topic_id, timestamp, data) VALUES (30, 1, 3, 5, x'000100000a'), (20, 2, 3, 6, x'000100000b0b'), (10, 3, 3, 7, x'000100000c0c0c')")
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := readAll(t, r)
	want := [][]byte{{0, 1, 0, 0, 10}, {0, 1, 0, 0, 11, 11}, {0, 1, 0, 0, 12, 12, 12}}
	if len(got) != len(want) {
		t.Fatalf("%d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		if !bytes.Equal(m.Data, want[i]) {
			t.Errorf("message %d: data % x, want % x", i+1, m.Data, want[i])
		}
	}
}
