package bag_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foxglove/mcap/go/mcap"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/msgs"
)

const (
	topicKV      = "/fastwam/video_kv_cache"
	topicText    = "/fastwam/text_context"
	topicActions = "/fastwam/action_chunk"
	topicDiag    = "/diagnostics"
)

// written is a message as the test wrote it.
type written struct {
	topic, typ string
	at         time.Time
	data       []byte
	msg        any // the message data encodes, when known
}

func mustCDR(t *testing.T, m interface{ MarshalCDR() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kvMsg(seq uint64, n int) *msgs.VideoKVCache {
	keys := make([]float32, 2*n)
	for i := range keys {
		keys[i] = float32(seq) + float32(i)/8
	}
	shape := []uint32{2, 1, uint32(n), 1}
	return &msgs.VideoKVCache{
		Header:             msgs.Header{Stamp: msgs.Time{Sec: int32(1700000000 + seq), Nanosec: 5}, FrameID: "cam"},
		Seq:                seq,
		VisibleVideoTokens: uint32(n),
		Keys:               msgs.NewTensorF32(shape, keys),
		Values:             msgs.NewTensorF32(shape, keys[:2*n]),
	}
}

func textMsg(seq uint64) *msgs.TextContext {
	return &msgs.TextContext{
		Header:        msgs.Header{Stamp: msgs.Time{Sec: int32(1700000000 + seq)}, FrameID: "text"},
		Seq:           seq,
		Instruction:   "open the drawer",
		Context:       msgs.NewTensorF32([]uint32{1, 2, 3}, []float32{1, 2, 3, 4, 5, float32(seq)}),
		AttentionMask: []bool{true, seq%2 == 0},
	}
}

func chunkMsg(seq uint64) *msgs.ActionChunk {
	return &msgs.ActionChunk{
		Header:     msgs.Header{Stamp: msgs.Time{Sec: int32(1700000000 + seq)}, FrameID: "base"},
		Seq:        seq,
		KVSeq:      seq,
		ContextSeq: seq,
		Actions: []msgs.ActionRow{
			{Values: []float32{0.5, -0.5, float32(seq), 0, 0, 0, 1}},
			{Values: []float32{0.25, -0.25, float32(seq), 0, 0, 0, -1}},
		},
		Steps: 10, Shift: 5, NoiseSeed: 1<<63 + seq, Backend: "cpu",
		DenoiseMs: 12.5, ReceiveToPublishMs: 14, InputAgeMs: 3,
		DryRun: seq%2 == 1, Clipped: true,
	}
}

func diagMsg(seq uint64) *msgs.DiagnosticArray {
	return &msgs.DiagnosticArray{
		Header: msgs.Header{Stamp: msgs.Time{Sec: int32(1700000000 + seq)}},
		Status: []msgs.DiagnosticStatus{{
			Level: msgs.LevelWarn, Name: "fastwam_action_expert: pipeline", Message: "ok", HardwareID: "cpu",
			Values: []msgs.KeyValue{{Key: "chunks_out", Value: "3"}, {Key: "seq", Value: strings.Repeat("9", int(seq))}},
		}},
	}
}

// writeBag writes a bag of the four topics, messages deliberately not in
// log-time order, and returns what it wrote sorted by log time.
func writeBag(t *testing.T, dir string, opts bag.WriterOptions, kvTokens int) []written {
	t.Helper()
	w, err := bag.Create(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []struct {
		name, typ string
		qos       bag.QoS
	}{
		{topicKV, msgs.TypeVideoKVCache, bag.DefaultQoS()},
		{topicText, msgs.TypeTextContext, bag.DefaultQoS()},
		{topicActions, msgs.TypeActionChunk, bag.LatchedQoS()},
		{topicDiag, msgs.TypeDiagnosticArray, bag.DefaultQoS()},
	} {
		if err := w.AddTopic(tp.name, tp.typ, tp.qos); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Unix(1700000000, 0)
	var out []written
	add := func(topic, typ string, at time.Duration, msg interface{ MarshalCDR() ([]byte, error) }) {
		ts := base.Add(at)
		data := mustCDR(t, msg)
		if err := w.Write(topic, ts, data); err != nil {
			t.Fatal(err)
		}
		out = append(out, written{topic, typ, ts, data, msg})
	}
	for _, seq := range []uint64{2, 0, 1} { // out of order on purpose
		at := time.Duration(seq) * 100 * time.Millisecond
		add(topicKV, msgs.TypeVideoKVCache, at, kvMsg(seq, kvTokens))
		add(topicText, msgs.TypeTextContext, at+time.Millisecond, textMsg(seq))
		add(topicActions, msgs.TypeActionChunk, at+50*time.Millisecond, chunkMsg(seq))
		add(topicDiag, msgs.TypeDiagnosticArray, at+50*time.Millisecond+1, diagMsg(seq))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(out, func(a, b written) int { return a.at.Compare(b.at) })
	return out
}

func readAll(t *testing.T, r *bag.Reader) []bag.Message {
	t.Helper()
	var got []bag.Message
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	return got
}

func checkMessages(t *testing.T, got []bag.Message, want []written) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d messages, wrote %d", len(got), len(want))
	}
	for i, m := range got {
		w := want[i]
		if m.Topic != w.topic || m.Type != w.typ || !m.LogTime.Equal(w.at) || !m.PublishTime.Equal(w.at) || !bytes.Equal(m.Data, w.data) {
			t.Fatalf("message %d: %s %s %v (%d bytes), want %s %s %v (%d bytes)",
				i, m.Topic, m.Type, m.LogTime, len(m.Data), w.topic, w.typ, w.at, len(w.data))
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts bag.WriterOptions
	}{
		{"default", bag.WriterOptions{}},
		{"small_chunks", bag.WriterOptions{ChunkSize: 200}},
		{"zstd", bag.WriterOptions{Compression: bag.CompressionZstd, ChunkSize: 1000}},
		{"lz4", bag.WriterOptions{Compression: bag.CompressionLZ4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run_"+tc.name)
			want := writeBag(t, dir, tc.opts, 40)
			if _, err := os.Stat(filepath.Join(dir, "run_"+tc.name+"_0.mcap")); err != nil {
				t.Fatalf("bag file: %v", err)
			}
			r, err := bag.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			checkMessages(t, readAll(t, r), want)

			topics := r.Topics()
			if len(topics) != 4 {
				t.Fatalf("%d topics", len(topics))
			}
			for _, tp := range topics {
				def, err := msgs.Definition(tp.Type)
				if err != nil {
					t.Fatal(err)
				}
				wantQoS := bag.DefaultQoS()
				if tp.Name == topicActions {
					wantQoS = bag.LatchedQoS()
				}
				if tp.Definition != def || tp.SchemaEncoding != "ros2msg" || tp.MessageEncoding != "cdr" ||
					tp.MessageCount != 3 || !reflect.DeepEqual(tp.OfferedQoSProfiles, []bag.QoS{wantQoS}) {
					t.Errorf("topic %+v", tp)
				}
			}
			m := r.Metadata()
			if m == nil || m.Version != 5 || m.StorageIdentifier != "mcap" || m.MessageCount != 12 ||
				!m.StartingTime.Equal(want[0].at) || m.Duration != want[11].at.Sub(want[0].at) ||
				!slices.Equal(m.RelativeFilePaths, []string{"run_" + tc.name + "_0.mcap"}) || len(m.Topics) != 4 ||
				len(m.Files) != 1 || m.Files[0].MessageCount != 12 {
				t.Fatalf("metadata %+v", m)
			}
		})
	}
}

// TestMCAPLibraryReadsOurBags reads a written bag with the MCAP library's
// own reader, which checks CRCs, indexes and ordering independently.
func TestMCAPLibraryReadsOurBags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lib")
	want := writeBag(t, dir, bag.WriterOptions{Compression: bag.CompressionZstd, ChunkSize: 300}, 20)
	f, err := os.Open(filepath.Join(dir, "lib_0.mcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lexer, err := mcap.NewLexer(f, &mcap.LexerOptions{ValidateChunkCRCs: true})
	if err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := lexer.Next(nil)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("lexer (CRC-checking) pass: %v", err)
		}
	}
	lexer.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	r, err := mcap.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	info, err := r.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Header.Profile != "ros2" || info.Statistics.MessageCount != 12 || len(info.Schemas) != 4 || len(info.Channels) != 4 ||
		info.Statistics.ChunkCount < 4 || len(info.ChunkIndexes) != int(info.Statistics.ChunkCount) {
		t.Fatalf("info: profile %q, %+v", info.Header.Profile, info.Statistics)
	}
	it, err := r.Messages(mcap.UsingIndex(true), mcap.InOrder(mcap.LogTimeOrder))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		_, ch, m, err := it.NextInto(nil)
		if errors.Is(err, io.EOF) {
			if i != len(want) {
				t.Fatalf("library read %d messages, want %d", i, len(want))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ch.Topic != want[i].topic || m.LogTime != uint64(want[i].at.UnixNano()) || !bytes.Equal(m.Data, want[i].data) {
			t.Fatalf("library message %d: %s at %d", i, ch.Topic, m.LogTime)
		}
	}
	var distro string
	for _, idx := range info.MetadataIndexes {
		md, err := r.GetMetadata(idx.Offset)
		if err != nil {
			t.Fatal(err)
		}
		if md.Name == "rosbag2" {
			distro = md.Metadata["ROS_DISTRO"]
		}
	}
	if distro != "humble" {
		t.Fatalf("rosbag2 metadata record ROS_DISTRO = %q, want humble", distro)
	}
}

func TestReadSingleFileAndTopicFilter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "one")
	want := writeBag(t, dir, bag.WriterOptions{ChunkSize: 100}, 8)
	r, err := bag.OpenWith(t.Context(), filepath.Join(dir, "one_0.mcap"), bag.ReaderOptions{Topics: []string{topicActions, topicDiag}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Metadata() != nil {
		t.Fatal("a single .mcap file has no metadata.yaml")
	}
	var filtered []written
	for _, w := range want {
		if w.topic == topicActions || w.topic == topicDiag {
			filtered = append(filtered, w)
		}
	}
	checkMessages(t, readAll(t, r), filtered)

	// A folder without metadata.yaml is read from its .mcap files.
	if err := os.Remove(filepath.Join(dir, bag.MetadataFile)); err != nil {
		t.Fatal(err)
	}
	r2, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	checkMessages(t, readAll(t, r2), want)
}

// TestMultiFileBag reads a bag split in two files, as rosbag2 splits
// recordings, and merges their messages by log time.
func TestMultiFileBag(t *testing.T) {
	tmp := t.TempDir()
	write := func(name string, times ...time.Duration) []written {
		w, err := bag.Create(filepath.Join(tmp, name), bag.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTopic(topicDiag, msgs.TypeDiagnosticArray, bag.DefaultQoS()); err != nil {
			t.Fatal(err)
		}
		var out []written
		for i, d := range times {
			at := time.Unix(100, 0).Add(d)
			data := mustCDR(t, diagMsg(uint64(i)))
			if err := w.Write(topicDiag, at, data); err != nil {
				t.Fatal(err)
			}
			out = append(out, written{topicDiag, msgs.TypeDiagnosticArray, at, data, nil})
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := write("a", 0, 2*time.Second, 4*time.Second)
	b := write("b", time.Second, 3*time.Second)
	split := filepath.Join(tmp, "split")
	if err := os.Mkdir(split, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if err := os.Rename(filepath.Join(tmp, n, n+"_0.mcap"), filepath.Join(split, "split_"+n+".mcap")); err != nil {
			t.Fatal(err)
		}
	}
	meta := &bag.Metadata{Version: 5, StorageIdentifier: "mcap", MessageCount: 5,
		Topics:            []bag.TopicMetadata{{Name: topicDiag, Type: msgs.TypeDiagnosticArray, SerializationFormat: "cdr", MessageCount: 5}},
		RelativeFilePaths: []string{"split_a.mcap", "split_b.mcap"}, StartingTime: time.Unix(100, 0)}
	if err := os.WriteFile(filepath.Join(split, bag.MetadataFile), meta.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := bag.Open(split)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := []written{a[0], b[0], a[1], b[1], a[2]}
	checkMessages(t, readAll(t, r), want)
	if tp := r.Topics(); len(tp) != 1 || tp[0].MessageCount != 5 {
		t.Fatalf("topics %+v", tp)
	}
}

func TestLargeMessages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "large")
	want := writeBag(t, dir, bag.WriterOptions{Compression: bag.CompressionLZ4}, 1<<17) // 2 x 1 MiB tensors per KV message
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := readAll(t, r)
	checkMessages(t, got, want)
	var kv msgs.VideoKVCache
	if err := kv.UnmarshalCDR(got[0].Data); err != nil || kv.Keys.Shape[2] != 1<<17 {
		t.Fatalf("decoded KV: %v %v", err, kv.Keys)
	}
}

func TestWriterErrors(t *testing.T) {
	tmp := t.TempDir()
	if _, err := bag.Create(tmp, bag.WriterOptions{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("existing folder: %v", err)
	}
	if _, err := bag.Create(filepath.Join(tmp, "x"), bag.WriterOptions{Compression: "bz2"}); err == nil {
		t.Fatal("unknown compression accepted")
	}
	if _, err := bag.Create(filepath.Join(tmp, "no", "parent"), bag.WriterOptions{}); err == nil {
		t.Fatal("missing parent accepted")
	}
	w, err := bag.Create(filepath.Join(tmp, "b"), bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, typ, want string
	}{
		{"relative", msgs.TypeActionChunk, "not a fully qualified ROS name"},
		{"/x", "std_msgs/msg/Int8", "no definition of std_msgs/Int8"},
		{"/y", "nonsense", "is not of the form package/msg/Type"},
	} {
		if err := w.AddTopic(tc.name, tc.typ, bag.DefaultQoS()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("AddTopic(%s, %s): %v, want %q", tc.name, tc.typ, err, tc.want)
		}
	}
	if err := w.AddTopic("/a", msgs.TypeActionChunk, bag.DefaultQoS()); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTopic("/a", msgs.TypeActionChunk, bag.DefaultQoS()); err != nil {
		t.Fatalf("adding the same topic again: %v", err)
	}
	if err := w.AddTopic("/a", msgs.TypeTextContext, bag.DefaultQoS()); err == nil {
		t.Fatal("topic re-added with another type")
	}
	good := mustCDR(t, chunkMsg(1))
	for _, tc := range []struct {
		topic string
		at    time.Time
		data  []byte
		want  string
	}{
		{"/nope", time.Unix(1, 0), good, "was not added"},
		{"/a", time.Unix(-1, 0), good, "before 1970"},
		{"/a", time.Unix(1, 0), []byte{0, 0, 0, 0, 1}, "not little-endian CDR"},
		{"/a", time.Unix(1, 0), []byte{0, 1}, "not little-endian CDR"},
	} {
		if err := w.Write(tc.topic, tc.at, tc.data); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Write(%s): %v, want %q", tc.topic, err, tc.want)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := w.Write("/a", time.Unix(1, 0), good); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Write after Close: %v", err)
	}
	// An empty bag is valid, with rosbag2's starting time for no messages.
	r, err := bag.Open(filepath.Join(tmp, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := readAll(t, r); len(got) != 0 {
		t.Fatalf("empty bag yielded %d messages", len(got))
	}
	if m := r.Metadata(); m.StartingTime.UnixNano() != 1<<63-1 || m.Duration != 0 || m.MessageCount != 0 {
		t.Fatalf("empty bag metadata %+v", m)
	}
}

// TestConcurrentWrites writes from several goroutines, as a node recording
// its inputs and outputs does (run with -race).
func TestConcurrentWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conc")
	w, err := bag.Create(dir, bag.WriterOptions{ChunkSize: 512})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddTopic(topicDiag, msgs.TypeDiagnosticArray, bag.DefaultQoS()); err != nil {
		t.Fatal(err)
	}
	data := mustCDR(t, diagMsg(1))
	const writers, each = 4, 25
	errs := make(chan error, writers)
	for g := range writers {
		go func() {
			for i := range each {
				if err := w.Write(topicDiag, time.Unix(0, int64(1+i*writers+g)), data); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := readAll(t, r)
	if len(got) != writers*each {
		t.Fatalf("read %d messages, wrote %d", len(got), writers*each)
	}
	for i, m := range got {
		if m.LogTime.UnixNano() != int64(i+1) {
			t.Fatalf("message %d at %d ns, want %d", i, m.LogTime.UnixNano(), i+1)
		}
	}
}
