package cluster

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// lease is a leader's hold on its term: the time until which no other
// node can have been elected in a later one, as the followers' answers to
// its AppendEntries (heartbeats included) show it. A follower that accepts
// an AppendEntries sent at t knows the leader until its heartbeat timeout
// passes with no other one, at t plus HeartbeatTimeout at the earliest,
// and votes for no one else before (hashicorp/raft refuses a vote, and a
// pre-vote, to a candidate while it knows a leader). So once a majority,
// the leader included, has accepted AppendEntries sent at or after t, no
// other leader can be elected before t + HeartbeatTimeout; the lease ends
// a tenth earlier, for clocks that tick at other rates.
//
// A leader acts on its scheduler's state (hands out jobs) only within its
// lease (sched.Config.Lease): a leader frozen and thawed (SIGSTOP, a VM
// paused) would otherwise hand out, at once, jobs that the leader elected
// meanwhile has run and ended.
type lease struct {
	hold time.Duration

	mu     sync.Mutex
	self   string
	voters []string           // the configuration's, this node included
	sent   map[string]contact // by follower: its latest accepted AppendEntries
	cur    atomic.Pointer[leaseState]
	// void is a term whose lease is given up: its leader hands the lead
	// over (a transfer lets the target win an election at once).
	void atomic.Uint64
}

type contact struct {
	term uint64
	at   time.Time // when the AppendEntries was sent
}

type leaseState struct {
	term  uint64
	until time.Time
	alone bool // the only voter: no one else can lead, in any term
}

func newLease(hold time.Duration) *lease {
	return &lease{hold: hold - hold/10, sent: make(map[string]contact)}
}

// setVoters takes the configuration's voters.
func (l *lease) setVoters(self string, c raft.Configuration) {
	var voters []string
	for _, s := range c.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, string(s.ID))
		}
	}
	slices.Sort(voters)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.self == self && slices.Equal(l.voters, voters) {
		return
	}
	l.self, l.voters = self, voters
	for id := range l.sent {
		if !slices.Contains(voters, id) {
			delete(l.sent, id)
		}
	}
	l.update(0)
}

// accepted records that follower id accepted an AppendEntries of term
// sent at at.
func (l *lease) accepted(id string, term uint64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.sent[id]; ok && (c.term > term || c.term == term && !at.After(c.at)) {
		return
	}
	l.sent[id] = contact{term: term, at: at}
	l.update(term)
}

// update works out the lease of term (0: the latest known) from the
// contacts: the majority's oldest. Caller holds l.mu.
func (l *lease) update(term uint64) {
	if term == 0 {
		if cur := l.cur.Load(); cur != nil {
			term = cur.term
		}
	}
	need := len(l.voters)/2 + 1
	if slices.Contains(l.voters, l.self) {
		need-- // the leader's own
	}
	var ats []time.Time
	for _, id := range l.voters {
		if c, ok := l.sent[id]; ok && id != l.self && c.term == term {
			ats = append(ats, c.at)
		}
	}
	st := &leaseState{term: term}
	switch {
	case !slices.Contains(l.voters, l.self):
		// Not a voter: no lease.
	case need <= 0:
		st.alone = true
	case len(ats) >= need:
		slices.SortFunc(ats, func(a, b time.Time) int { return b.Compare(a) })
		st.until = ats[need-1].Add(l.hold)
	}
	if cur := l.cur.Load(); cur == nil || cur.term <= term || st.alone != cur.alone {
		l.cur.Store(st)
	}
}

// holds says whether the leader of term holds its lease now.
func (l *lease) holds(term uint64) bool {
	cur := l.cur.Load()
	if cur == nil || l.void.Load() == term {
		return false
	}
	return cur.alone || cur.term == term && time.Now().Before(cur.until)
}

// giveUp voids the lease of term: its leader hands the lead over.
func (l *lease) giveUp(term uint64) { l.void.Store(term) }
