package durable

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"switchyard/sched"
)

// Stats counts each fsync of the write-ahead log that made records
// durable (walFS's sync of a new, empty log is none; SyncNever's log
// syncs nothing), and the space the files take.
func TestStats(t *testing.T) {
	for _, tc := range []struct {
		mode  Sync
		saves int
	}{{SyncAlways, 20}, {SyncBatch, 20}, {SyncNever, 20}} {
		t.Run(fmt.Sprint(tc.mode), func(t *testing.T) {
			s, fs := openSyncs(t, t.TempDir(), tc.mode)
			defer s.Close()
			before := s.Stats()
			for i := range tc.saves {
				if err := s.Save(&sched.Record{ID: uint64(i + 1), Func: "f", Payload: make([]byte, 1000)}); err != nil {
					t.Fatal(err)
				}
			}
			// Pebble times a sync after it has answered the batches the
			// sync covered: the count may lag the answer by a moment.
			st := s.Stats()
			for deadline := time.Now().Add(10 * time.Second); st.Syncs != uint64(fs.ended.Load()) && time.Now().Before(deadline); {
				runtime.Gosched()
				st = s.Stats()
			}
			if want := uint64(fs.ended.Load()); st.Syncs != want {
				t.Errorf("Stats counts %d syncs, the log made %d", st.Syncs, want)
			}
			if tc.mode == SyncAlways && st.Syncs < uint64(tc.saves) {
				t.Errorf("%d syncs for %d saves, each its own", st.Syncs, tc.saves)
			}
			var top uint64
			for _, n := range st.SyncBuckets {
				top = max(top, n)
			}
			if top != st.Syncs || (st.Syncs > 0) != (st.SyncSeconds > 0) {
				t.Errorf("buckets reach %d, sum %gs, for %d syncs", top, st.SyncSeconds, st.Syncs)
			}
			if st.DiskBytes <= before.DiskBytes {
				t.Errorf("the store takes %d bytes after %d saves, %d before", st.DiskBytes, tc.saves, before.DiskBytes)
			}
		})
	}
}
