package replicated

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openLogs(t *testing.T, dir string) *LogStore {
	t.Helper()
	s, err := OpenLogStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func edges(t *testing.T, s *LogStore) (uint64, uint64) {
	t.Helper()
	first, err1 := s.FirstIndex()
	last, err2 := s.LastIndex()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return first, last
}

func TestLogStore(t *testing.T) {
	dir := t.TempDir()
	s := openLogs(t, dir)
	if f, l := edges(t, s); f != 0 || l != 0 {
		t.Fatalf("empty log: %d..%d", f, l)
	}
	at := time.Unix(1700000000, 123)
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1 + i/5, Type: raft.LogCommand, Data: []byte{byte(i)}, AppendedAt: at})
	}
	logs[3].Extensions = []byte("ext")
	logs[4].Type, logs[4].Data = raft.LogConfiguration, nil
	if err := s.StoreLogs(logs[:9]); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(logs[9]); err != nil {
		t.Fatal(err)
	}
	if f, l := edges(t, s); f != 1 || l != 10 {
		t.Fatalf("log %d..%d, want 1..10", f, l)
	}
	for _, want := range logs {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type || string(got.Data) != string(want.Data) ||
			string(got.Extensions) != string(want.Extensions) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Errorf("entry %d: %+v, want %+v", want.Index, got, want)
		}
	}
	var l raft.Log
	if err := s.GetLog(11, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("a missing entry: %v", err)
	}

	// A prefix (compaction), then a suffix (a new leader's overrule).
	if err := s.DeleteRange(1, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(9, 10); err != nil {
		t.Fatal(err)
	}
	if f, l := edges(t, s); f != 4 || l != 8 {
		t.Fatalf("after deletes: %d..%d, want 4..8", f, l)
	}
	// 2 was read from disk, 9 from the entries kept in memory.
	for _, i := range []uint64{2, 9} {
		if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("deleted entry %d: %v", i, err)
		}
	}
	// An overruled entry written again reads as written.
	if err := s.StoreLog(&raft.Log{Index: 9, Term: 7, Type: raft.LogCommand, Data: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(9, &l); err != nil || l.Term != 7 || string(l.Data) != "new" {
		t.Errorf("entry 9 rewritten: %+v, %v", l, err)
	}
	if err := s.DeleteRange(9, 9); err != nil {
		t.Fatal(err)
	}

	// Stable values.
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("a missing stable value: %v, want raft's \"not found\"", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// All of it survives a reopen. The prefix deleted from a segment it
	// covered in part comes back: committed entries, which Raft reads
	// past (segments.deleteRange).
	s = openLogs(t, dir)
	defer s.Close()
	if f, l := edges(t, s); f != 1 || l != 8 {
		t.Fatalf("reopened: %d..%d, want 1..8", f, l)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
		t.Errorf("term %d, %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Errorf("vote %q, %v", v, err)
	}
	if err := s.GetLog(6, &l); err != nil || l.Data[0] != 6 {
		t.Errorf("entry 6 reopened: %+v, %v", l, err)
	}
	// Everything deleted: empty.
	if err := s.DeleteRange(1, 8); err != nil {
		t.Fatal(err)
	}
	if f, l := edges(t, s); f != 0 || l != 0 {
		t.Errorf("all deleted: %d..%d", f, l)
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(encodeLog(nil, &raft.Log{Term: 3, Type: raft.LogCommand, Data: []byte("x"), Extensions: []byte("e"), AppendedAt: time.Unix(1, 2)}))
	f.Add(encodeLog(nil, &raft.Log{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if decodeLog(b, &l) != nil {
			return
		}
		var again raft.Log
		if err := decodeLog(encodeLog(nil, &l), &again); err != nil {
			t.Fatal(err)
		}
		if again.Term != l.Term || again.Type != l.Type || string(again.Data) != string(l.Data) ||
			string(again.Extensions) != string(l.Extensions) || !again.AppendedAt.Equal(l.AppendedAt) {
			t.Errorf("%+v, then %+v", l, again)
		}
	})
}
