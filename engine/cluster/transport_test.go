package cluster

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A follower's lag is counted from its match index: the last entry a
// successful AppendEntries sent it, in the leader's term. Its own last
// index (which may hold entries of an old term that the leader overrules)
// and a heartbeat (no entries) say nothing; a new term starts over; a
// removed node is forgotten.
func TestTransportMatchIndex(t *testing.T) {
	tr := newTransport(nil, func() error { return nil }, newLease(time.Second))
	entries := func(n int) []*raft.Log { return make([]*raft.Log, n) }
	steps := []struct {
		req     raft.AppendEntriesRequest
		resp    raft.AppendEntriesResponse
		term    uint64
		want    uint64
		wantOK  bool
		comment string
	}{
		{raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 10, Entries: entries(5)}, raft.AppendEntriesResponse{Success: true, LastLog: 40}, 2, 15, true,
			"the entries sent, not the follower's longer log"},
		{raft.AppendEntriesRequest{Term: 2}, raft.AppendEntriesResponse{Success: true, LastLog: 40}, 2, 15, true, "a heartbeat"},
		{raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 15, Entries: entries(3)}, raft.AppendEntriesResponse{Success: false, LastLog: 40}, 2, 15, true, "a refusal"},
		{raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 15, Entries: entries(3)}, raft.AppendEntriesResponse{Success: true}, 2, 18, true, "more"},
		{raft.AppendEntriesRequest{Term: 2, PrevLogEntry: 15, Entries: entries(1)}, raft.AppendEntriesResponse{Success: true}, 2, 18, true, "an older answer, late"},
		{raft.AppendEntriesRequest{Term: 2}, raft.AppendEntriesResponse{Success: true}, 3, 0, false, "asked in a later term"},
		{raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 7, Entries: entries(1)}, raft.AppendEntriesResponse{Success: true}, 3, 8, true, "a new term"},
	}
	for _, s := range steps {
		tr.note("n2", &s.req, &s.resp, time.Now())
		if got, ok := tr.matchIndex("n2", s.term); got != s.want && s.wantOK || ok != s.wantOK {
			t.Errorf("%s: match %d, %v; want %d, %v", s.comment, got, ok, s.want, s.wantOK)
		}
	}
	tr.forget("n2")
	if _, ok := tr.matchIndex("n2", 3); ok {
		t.Error("a removed node's match index is still known")
	}
}

// A node whose log has failed asks for no vote, nor pre-vote: it wins no
// election.
func TestTransportFenced(t *testing.T) {
	_, inner := raft.NewInmemTransport("")
	var fenced error
	tr := newTransport(inner, func() error { return fenced }, newLease(time.Second))
	if err := tr.RequestVote("n2", "nowhere", &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{}); errors.Is(err, errFenced) {
		t.Fatalf("a node not fenced: %v", err)
	}
	fenced = errors.New("sync failed")
	if err := tr.RequestVote("n2", "nowhere", &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{}); !errors.Is(err, errFenced) {
		t.Errorf("RequestVote of a fenced node: %v", err)
	}
	if err := tr.RequestPreVote("n2", "nowhere", &raft.RequestPreVoteRequest{}, &raft.RequestPreVoteResponse{}); !errors.Is(err, errFenced) {
		t.Errorf("RequestPreVote of a fenced node: %v", err)
	}
}

// waitFor polls cond until it holds, for at most waitLimit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in %v", what, waitLimit)
		}
		time.Sleep(10 * time.Millisecond) // polling the cluster
	}
}
