package sqlite

import (
	"path/filepath"
	"testing"

	"switchyard/sched"
)

// With Config.EachRecord every save is a transaction of its own, and
// Stats times each commit; the file grows with the rows.
func TestStats(t *testing.T) {
	s := open(t, Config{Path: filepath.Join(t.TempDir(), "q.db"), EachRecord: true})
	defer s.Close()
	before := s.Stats()
	const n = 30
	for i := 1; i <= n; i++ {
		save(t, s, &sched.Record{ID: uint64(i), Func: "f", Payload: make([]byte, 2000)})
	}
	st := s.Stats()
	if got := st.Commits.Count() - before.Commits.Count(); got != n {
		t.Errorf("%d commits timed for %d saves", got, n)
	}
	if st.Commits.Sum <= 0 {
		t.Errorf("commits took %gs in all", st.Commits.Sum)
	}
	if st.DiskBytes < n*2000 {
		t.Errorf("the database takes %d bytes after %d rows of 2000", st.DiskBytes, n)
	}
}
