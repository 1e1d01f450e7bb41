// Package bagtest writes rosbag2 bags in sqlite3 storage, the default
// storage of ROS 2 Humble's `ros2 bag record`, for tests of the readers
// (package bag reads them; it writes MCAP only). The database schema is the
// one Humble's rosbag2 creates, taken from its sources
// (rosbag2_storage_default_plugins/src/rosbag2_storage_default_plugins/
// sqlite/sqlite_storage.cpp, SqliteStorage::initialize and create_topic,
// branch humble): schema version 3, tables schema, metadata, topics and
// messages, and the index timestamp_idx; metadata.yaml is written as
// Humble's rosbag2 writes it for such a bag.
package bagtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/fastwam/actionexpert/bag"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// HumbleSchema is the SQL with which Humble's rosbag2 creates a sqlite3
// bag's database (SqliteStorage::initialize), followed by the schema row
// it inserts.
var HumbleSchema = []string{
	`CREATE TABLE schema(schema_version INTEGER PRIMARY KEY,ros_distro TEXT NOT NULL);`,
	`CREATE TABLE metadata(id INTEGER PRIMARY KEY,metadata_version INTEGER NOT NULL,metadata TEXT NOT NULL);`,
	`CREATE TABLE topics(id INTEGER PRIMARY KEY,name TEXT NOT NULL,type TEXT NOT NULL,serialization_format TEXT NOT NULL,offered_qos_profiles TEXT NOT NULL);`,
	`CREATE TABLE messages(id INTEGER PRIMARY KEY,topic_id INTEGER NOT NULL,timestamp INTEGER NOT NULL, data BLOB NOT NULL);`,
	`CREATE INDEX timestamp_idx ON messages (timestamp ASC);`,
	`INSERT INTO schema (schema_version, ros_distro) VALUES (3, 'humble');`,
}

// Topic is a topic to create, in creation order.
type Topic struct {
	Name, Type string
	QoS        []bag.QoS
}

// Message is a message to insert, in insertion order.
type Message struct {
	Topic   string
	LogTime time.Time
	Data    []byte
}

// CreateDB writes a database with Humble's schema, the topics and the
// messages, at path (which must not exist). It returns the open database
// (read-write) so that a test can damage it further; the caller closes it.
func CreateDB(path string, topics []Topic, msgs []Message) (*sql.DB, error) {
	if _, err := os.Stat(path); err == nil {
		return nil, fmt.Errorf("bagtest: %s already exists", path)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.ToSlash(path)+"?mode=rwc")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*sql.DB, error) {
		db.Close()
		return nil, fmt.Errorf("bagtest: %s: %w", path, err)
	}
	// rosbag2's default (no preset profile) write pragmas.
	for _, s := range append([]string{`PRAGMA journal_mode=MEMORY;`, `PRAGMA synchronous=OFF;`}, HumbleSchema...) {
		if _, err := db.Exec(s); err != nil {
			return fail(err)
		}
	}
	ids := map[string]int64{}
	for _, t := range topics {
		res, err := db.Exec(`INSERT INTO topics (name, type, serialization_format, offered_qos_profiles) VALUES (?, ?, ?, ?)`,
			t.Name, t.Type, bag.MessageEncodingCDR, bag.EncodeQoSProfiles(t.QoS))
		if err != nil {
			return fail(err)
		}
		if ids[t.Name], err = res.LastInsertId(); err != nil {
			return fail(err)
		}
	}
	tx, err := db.Begin()
	if err != nil {
		return fail(err)
	}
	for _, m := range msgs {
		id, ok := ids[m.Topic]
		if !ok {
			tx.Rollback()
			return fail(fmt.Errorf("message on topic %s, which was not created", m.Topic))
		}
		if _, err := tx.Exec(`INSERT INTO messages (timestamp, topic_id, data) VALUES (?, ?, ?);`, m.LogTime.UnixNano(), id, m.Data); err != nil {
			tx.Rollback()
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return db, nil
}

// Write writes a sqlite3 bag folder dir (which must not exist) as Humble's
// `ros2 bag record` leaves it: dir/metadata.yaml and dir/<base>_0.db3.
func Write(dir string, topics []Topic, msgs []Message) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("bagtest: %w", err)
	}
	file := filepath.Base(dir) + "_0.db3"
	db, err := CreateDB(filepath.Join(dir, file), topics, msgs)
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("bagtest: %w", err)
	}
	meta := metadata(file, topics, msgs)
	return os.WriteFile(filepath.Join(dir, bag.MetadataFile), meta.Encode(), 0o644)
}

// metadata is what rosbag2 writes to metadata.yaml for the bag.
func metadata(file string, topics []Topic, msgs []Message) *bag.Metadata {
	counts := map[string]uint64{}
	start, end := int64(math.MaxInt64), int64(0)
	for _, m := range msgs {
		counts[m.Topic]++
		start = min(start, m.LogTime.UnixNano())
		end = max(end, m.LogTime.UnixNano())
	}
	if len(msgs) == 0 {
		start, end = 0, 0
	}
	meta := &bag.Metadata{
		Version:           5,
		StorageIdentifier: bag.StorageSQLite3,
		Duration:          time.Duration(end - start),
		StartingTime:      time.Unix(0, start),
		MessageCount:      uint64(len(msgs)),
		RelativeFilePaths: []string{file},
		Files:             []bag.FileMetadata{{Path: file, StartingTime: time.Unix(0, start), Duration: time.Duration(end - start), MessageCount: uint64(len(msgs))}},
	}
	for _, t := range topics {
		meta.Topics = append(meta.Topics, bag.TopicMetadata{Name: t.Name, Type: t.Type, SerializationFormat: bag.MessageEncodingCDR,
			OfferedQoSProfiles: t.QoS, MessageCount: counts[t.Name]})
	}
	return meta
}

// Convert copies every message of the bag at src (any bag package bag
// reads) into a new sqlite3 bag folder dst, as Humble would have recorded
// it: same topics, types, QoS profiles, log times and bytes.
func Convert(ctx context.Context, src, dst string) error {
	r, err := bag.OpenWith(ctx, src, bag.ReaderOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	var topics []Topic
	for _, t := range r.Topics() {
		topics = append(topics, Topic{Name: t.Name, Type: t.Type, QoS: t.OfferedQoSProfiles})
	}
	var msgs []Message
	for m, err := range r.Messages(ctx) {
		if err != nil {
			return err
		}
		msgs = append(msgs, Message{Topic: m.Topic, LogTime: m.LogTime, Data: m.Data})
	}
	if len(topics) == 0 {
		return errors.New("bagtest: the source bag has no topics")
	}
	return Write(dst, topics, msgs)
}
