package replicated

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"switchyard/sched"
	"switchyard/sched/durable"
)

func rec(fn, unique, payload string) []byte {
	return durable.EncodeRecord(&sched.Record{Func: fn, Unique: unique, Payload: []byte(payload)})
}

func entry(ops ...op) []byte {
	n, e := build(0, ops)
	if n != len(ops) {
		panic("one entry expected")
	}
	return e
}

func loaded(t *testing.T, f *FSM) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	var last uint64
	if err := f.Load(func(r *sched.Record) error {
		if r.ID <= last {
			t.Errorf("Load: id %d after %d", r.ID, last)
		}
		last = r.ID
		out[r.ID] = r.Func + "/" + r.Unique + "=" + string(r.Payload)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFSMApply(t *testing.T) {
	f := NewFSM()
	logs := []*raft.Log{
		{Index: 1, Type: raft.LogConfiguration, Data: []byte("not ours")},
		{Index: 2, Type: raft.LogCommand, Data: entry(
			op{kind: opPut, id: 30, val: rec("f", "u3", "three")},
			op{kind: opPut, id: 10, val: rec("f", "u1", "one")},
			op{kind: opPut, id: 20, val: rec("g", "", "two")})},
		{Index: 3, Type: raft.LogCommand, Data: entry(
			op{kind: opDelete, id: 20},
			op{kind: opDelete, id: 99}, // never stored: nothing
			op{kind: opPut, id: 10, val: rec("f", "u1", "one again")},
			op{kind: opMeta, val: []byte("leader\x00n1")})},
	}
	for i, r := range f.ApplyBatch(logs) {
		if r != nil {
			t.Errorf("entry %d: %v", logs[i].Index, r)
		}
	}
	if r := f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: []byte{7}}); r == nil {
		t.Error("an entry that does not decode applied without error")
	}
	want := map[uint64]string{10: "f/u1=one again", 30: "f/u3=three"}
	got := loaded(t, f)
	if len(got) != len(want) || got[10] != want[10] || got[30] != want[30] {
		t.Errorf("jobs %v, want %v", got, want)
	}
	if f.Applied() != 4 || f.Len() != 2 || string(f.Meta("leader")) != "n1" {
		t.Errorf("applied %d, len %d, meta %q", f.Applied(), f.Len(), f.Meta("leader"))
	}
	if want := len(rec("f", "u1", "one again")) + len(rec("f", "u3", "three")); f.Bytes() != want {
		t.Errorf("bytes %d, want %d", f.Bytes(), want)
	}
	select {
	case <-f.MetaChanged():
	default:
		t.Error("no signal of the metadata change")
	}
}

// An entry proposed in one term and appended in another is refused whole,
// its metadata too; one without a term (version 1, an earlier version's
// log) is applied in any.
func TestFSMFencesTerm(t *testing.T) {
	f := NewFSM()
	put := func(term uint64, id uint64, payload string) []byte {
		_, e := build(term, []op{{kind: opPut, id: id, val: rec("f", "", payload)}, {kind: opMeta, val: []byte("k\x00" + payload)}})
		return e
	}
	v1 := append([]byte{entryVersionNoTerm}, appendPut(nil, 3, rec("f", "", "old log"))...)
	cases := []struct {
		log     raft.Log
		refused bool
	}{
		{raft.Log{Index: 1, Term: 4, Type: raft.LogCommand, Data: put(4, 1, "term 4")}, false},
		{raft.Log{Index: 2, Term: 6, Type: raft.LogCommand, Data: put(4, 1, "stale")}, true},
		{raft.Log{Index: 3, Term: 6, Type: raft.LogCommand, Data: put(7, 1, "ahead")}, true},
		{raft.Log{Index: 4, Term: 6, Type: raft.LogCommand, Data: v1}, false},
		{raft.Log{Index: 5, Term: 6, Type: raft.LogCommand, Data: MetaEntry(5, "k", []byte("meta of term 5"))}, true},
	}
	for _, c := range cases {
		r := f.Apply(&c.log)
		err, _ := r.(error)
		if refused := errors.Is(err, ErrStaleTerm); refused != c.refused {
			t.Errorf("entry %d (term %d): %v, want refused %v", c.log.Index, c.log.Term, r, c.refused)
		}
	}
	if got := loaded(t, f); len(got) != 2 || got[1] != "f/=term 4" || got[3] != "f/=old log" {
		t.Errorf("jobs %v", got)
	}
	if m := string(f.Meta("k")); m != "term 4" || f.Applied() != 5 {
		t.Errorf("meta %q, applied %d", m, f.Applied())
	}
}

// sink is a raft.SnapshotSink into a buffer.
type sink struct {
	bytes.Buffer
	cancelled bool
}

func (s *sink) ID() string    { return "test" }
func (s *sink) Close() error  { return nil }
func (s *sink) Cancel() error { s.cancelled = true; return nil }

func TestFSMSnapshotRestore(t *testing.T) {
	f := NewFSM()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: entry(
		op{kind: opPut, id: 1, val: rec("f", "a", "x")}, op{kind: opPut, id: 2, val: rec("f", "b", "")},
		op{kind: opMeta, val: []byte("leader\x00n2")})})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Applies after the snapshot are not in it.
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: entry(op{kind: opPut, id: 3, val: rec("f", "c", "y")})})
	var s sink
	if err := snap.Persist(&s); err != nil || s.cancelled {
		t.Fatal(err, s.cancelled)
	}
	snap.Release()

	g := NewFSM()
	g.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: entry(op{kind: opPut, id: 9, val: rec("old", "", "")})})
	if err := g.Restore(io.NopCloser(bytes.NewReader(s.Bytes()))); err != nil {
		t.Fatal(err)
	}
	got := loaded(t, g)
	if len(got) != 2 || got[1] != "f/a=x" || got[2] != "f/b=" || string(g.Meta("leader")) != "n2" {
		t.Errorf("restored %v, meta %q", got, g.Meta("leader"))
	}
	if g.Bytes() != len(rec("f", "a", "x"))+len(rec("f", "b", "")) {
		t.Errorf("restored bytes %d", g.Bytes())
	}
	// A damaged snapshot is refused, whole.
	for _, cut := range []int{0, 3, len(s.Bytes()) - 1} {
		h := NewFSM()
		if err := h.Restore(io.NopCloser(bytes.NewReader(s.Bytes()[:cut]))); err == nil {
			t.Errorf("a snapshot cut at %d restored", cut)
		}
	}
}

// persisted is f's snapshot file.
func persisted(t testing.TB, f *FSM) []byte {
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var s sink
	if err := snap.Persist(&s); err != nil || s.cancelled {
		t.Fatal(err, s.cancelled)
	}
	return s.Bytes()
}

// FuzzRestore: a snapshot file either is refused or restores a state
// whose own snapshot is the same bytes and restores the same again.
func FuzzRestore(f *testing.F) {
	g := NewFSM()
	g.Apply(&raft.Log{Index: 7, Type: raft.LogCommand, Data: entry(
		op{kind: opPut, id: 1, val: rec("f", "a", "x")}, op{kind: opPut, id: 1 << 33, val: rec("g", "", "")},
		op{kind: opMeta, val: []byte("leader\x00n2")})})
	good := persisted(f, g)
	f.Add(good)
	f.Add(persisted(f, NewFSM()))
	f.Add(good[:len(good)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		h := NewFSM()
		if err := h.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
			return
		}
		again := persisted(t, h)
		k := NewFSM()
		if err := k.Restore(io.NopCloser(bytes.NewReader(again))); err != nil {
			t.Fatalf("a restored state's snapshot is refused: %v", err)
		}
		if k.Len() != h.Len() || k.Bytes() != h.Bytes() || k.Applied() != h.Applied() || !bytes.Equal(persisted(t, k), again) {
			t.Fatal("a restored state's snapshot restores another state")
		}
	})
}

// TestFSMSnapshotWhileApplying: a snapshot persists what the state was
// when it was taken while entries go on being applied (run with -race:
// the records it reads share chunks with those being written).
func TestFSMSnapshotWhileApplying(t *testing.T) {
	f := NewFSM()
	apply := func(index, from, to uint64) any {
		var ops []op
		for id := from; id < to; id++ {
			ops = append(ops, op{kind: opPut, id: id, val: rec("f", fmt.Sprint(id), "payload")})
			if id >= 50 {
				ops = append(ops, op{kind: opDelete, id: id - 50})
			}
		}
		return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: entry(ops...)})
	}
	if r := apply(1, 0, 100); r != nil {
		t.Fatal(r)
	}
	want := persisted(t, f)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(1); i < 200; i++ {
			if r := apply(1+i, 100*i, 100*(i+1)); r != nil {
				t.Error(r)
				return
			}
		}
	}()
	var s sink
	if err := snap.Persist(&s); err != nil {
		t.Fatal(err)
	}
	<-done
	if !bytes.Equal(s.Bytes(), want) {
		t.Error("the snapshot changed while entries were applied")
	}
	if f.Len() != 50 {
		t.Errorf("%d jobs, want the last 50", f.Len())
	}
}
