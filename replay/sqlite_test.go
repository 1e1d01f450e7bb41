package replay_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/bag/bagtest"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/replay"
)

// madeBags makes a regression bag as `fastwam bag make` does (MCAP; not
// the committed one, so that these tests follow the current messages) and
// converts it to rosbag2's sqlite3 storage, as Humble's `ros2 bag record`
// (without -s mcap) would have recorded the same messages.
func madeBags(t *testing.T) (mcapBag, sqliteBag string) {
	t.Helper()
	mcapBag = filepath.Join(t.TempDir(), "regression")
	if _, err := replay.MakeBag(context.Background(), replay.MakeOptions{
		Dir: mcapBag, Chunks: regressionChunks, Cases: tinyCases(t), Backend: tinyBackend(t), Params: cpuParams(t),
	}); err != nil {
		t.Fatal(err)
	}
	sqliteBag = filepath.Join(t.TempDir(), "regression_sqlite3")
	if err := bagtest.Convert(context.Background(), mcapBag, sqliteBag); err != nil {
		t.Fatal(err)
	}
	return mcapBag, sqliteBag
}

// TestReplaySQLiteBag replays the regression bag in sqlite3 storage: the
// report is the one of the MCAP bag, row by row.
func TestReplaySQLiteBag(t *testing.T) {
	be := tinyBackend(t)
	mcapBag, sqliteBag := madeBags(t)
	want, err := run(t, context.Background(), mcapBag, be)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, context.Background(), sqliteBag, be)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != regressionChunks || got.Compared() != regressionChunks || got.Inputs != regressionChunks {
		t.Fatalf("%d rows, %d compared, %d inputs; want %d of each", len(got.Rows), got.Compared(), got.Inputs, regressionChunks)
	}
	if len(got.Rows) != len(want.Rows) {
		t.Fatalf("%d rows, MCAP %d", len(got.Rows), len(want.Rows))
	}
	for i := range got.Rows {
		g, w := got.Rows[i], want.Rows[i]
		if g.KVSeq != w.KVSeq || g.Status != w.Status || g.Note != w.Note || g.Cosine != w.Cosine || g.MaxAbsErr != w.MaxAbsErr || !g.Stamp.Equal(w.Stamp) {
			t.Errorf("row %d: kv_seq %d %s (%s) cos %v err %v; MCAP: kv_seq %d %s (%s) cos %v err %v",
				i, g.KVSeq, g.Status, g.Note, g.Cosine, g.MaxAbsErr, w.KVSeq, w.Status, w.Note, w.Cosine, w.MaxAbsErr)
		}
	}
	if err := got.Err(); err != nil {
		t.Errorf("gate: %v", err)
	}
}

// TestReplaySQLiteRowNotCDR: a row of the sqlite3 bag whose data is not
// CDR is an input the node rejects, by reason, and the replay goes on.
func TestReplaySQLiteRowNotCDR(t *testing.T) {
	_, dir := madeBags(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, filepath.Base(dir)+"_0.db3"))
	if err != nil {
		t.Fatal(err)
	}
	// The second VideoKVCache (kv_seq 1) becomes four bytes of garbage.
	res, err := db.Exec(fmt.Sprintf(`UPDATE messages SET data = x'deadbeef' WHERE id = (SELECT m.id FROM messages m JOIN topics t ON m.topic_id = t.id WHERE t.name = '%s' ORDER BY m.timestamp, m.id LIMIT 1 OFFSET 1)`,
		cpuParams(t).Topics.KVCache))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d rows changed", n)
	}
	db.Close()
	rep, err := run(t, context.Background(), dir, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Failures()
	if len(f) != 1 || f[0].KVSeq != 1 || f[0].Status != replay.StatusMissing {
		t.Fatalf("failures %+v", f)
	}
	if rep.Stats.Rejected[node.RejectDecode] != 1 {
		t.Errorf("rejected %v, want one %s", rep.Stats.Rejected, node.RejectDecode)
	}
	if !strings.Contains(rep.Err().Error(), "kv_seq 1") {
		t.Errorf("gate: %v", rep.Err())
	}
}
