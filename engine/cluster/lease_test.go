package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func voters(ids ...string) raft.Configuration {
	var c raft.Configuration
	for _, id := range ids {
		c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id), Suffrage: raft.Voter})
	}
	return c
}

// A leader holds its lease while a majority, itself included, has
// accepted AppendEntries sent within the hold (less a tenth): counted from
// when they were sent, in its term, from voters only.
func TestLease(t *testing.T) {
	const hold = time.Second // 900 ms of lease
	type accept struct {
		id   string
		term uint64
		ago  time.Duration
	}
	tests := []struct {
		name    string
		self    string
		voters  []string
		accepts []accept
		term    uint64
		void    uint64
		want    bool
	}{
		{"no answer", "n1", []string{"n1", "n2", "n3"}, nil, 2, 0, false},
		{"one follower, just now", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 2, 0}}, 2, 0, true},
		{"one follower, sent within the hold", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 2, 800 * time.Millisecond}}, 2, 0, true},
		{"one follower, sent longer ago than the lease", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 2, 950 * time.Millisecond}}, 2, 0, false},
		{"the most recent of two", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 2, 2 * time.Second}, {"n3", 2, 0}}, 2, 0, true},
		{"an earlier term's answers", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 1, 0}, {"n3", 1, 0}}, 2, 0, false},
		{"asked for an earlier term", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 3, 0}}, 2, 0, false},
		{"a node not in the configuration", "n1", []string{"n1", "n2", "n3"}, []accept{{"n9", 2, 0}}, 2, 0, false},
		{"five voters need two followers", "n1", []string{"n1", "n2", "n3", "n4", "n5"}, []accept{{"n2", 2, 0}}, 2, 0, false},
		{"five voters, two followers", "n1", []string{"n1", "n2", "n3", "n4", "n5"}, []accept{{"n2", 2, 0}, {"n5", 2, 500 * time.Millisecond}}, 2, 0, true},
		{"five voters, the second is too old", "n1", []string{"n1", "n2", "n3", "n4", "n5"}, []accept{{"n2", 2, 0}, {"n5", 2, 950 * time.Millisecond}}, 2, 0, false},
		{"given up for a transfer", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 2, 0}}, 2, 2, false},
		{"given up in an earlier term", "n1", []string{"n1", "n2", "n3"}, []accept{{"n2", 2, 0}}, 2, 1, true},
		{"alone", "n1", []string{"n1"}, nil, 7, 0, true},
		{"not a voter", "n4", []string{"n1", "n2", "n3"}, []accept{{"n2", 2, 0}, {"n3", 2, 0}}, 2, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLease(hold)
			l.setVoters(tt.self, voters(tt.voters...))
			now := time.Now()
			for _, a := range tt.accepts {
				l.accepted(a.id, a.term, now.Add(-a.ago))
			}
			if tt.void != 0 {
				l.giveUp(tt.void)
			}
			if got := l.holds(tt.term); got != tt.want {
				t.Errorf("holds(%d) = %v, want %v", tt.term, got, tt.want)
			}
		})
	}
}

// An answer comes late, after a newer one: the newer counts. A node
// removed from the configuration no longer counts.
func TestLeaseOrder(t *testing.T) {
	l := newLease(time.Second)
	l.setVoters("n1", voters("n1", "n2", "n3"))
	now := time.Now()
	l.accepted("n2", 2, now)
	l.accepted("n2", 2, now.Add(-5*time.Second))
	if !l.holds(2) {
		t.Error("an old answer that came late ended the lease")
	}
	l.setVoters("n1", voters("n1", "n3"))
	if l.holds(2) {
		t.Error("a removed node's answer still counts")
	}
}

// In a cluster on the in-memory transport, the leader holds its lease and
// the followers do not; a leader cut off has lost it by the time another
// is elected, and the new leader holds its own.
func TestLeaseInCluster(t *testing.T) {
	c := startInmem(t)
	l := c.leader()
	term := l.raft.CurrentTerm()
	waitFor(t, "the leader's lease", l.Lease(term))
	for _, f := range c.others(l) {
		if f.Lease(term)() {
			t.Errorf("follower %s holds a lease", f.ID())
		}
	}
	c.isolate(l)
	next := c.leader(c.others(l)...)
	if l.Lease(term)() {
		t.Errorf("%s is elected while the old leader, %s, holds its lease", next.ID(), l.ID())
	}
	nterm := next.raft.CurrentTerm()
	waitFor(t, fmt.Sprintf("%s's lease in term %d", next.ID(), nterm), next.Lease(nterm))
}
