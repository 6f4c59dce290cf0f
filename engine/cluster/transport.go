package cluster

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// raftTransport is what a node's Raft speaks over: hashicorp/raft's TCP
// transport, or in tests its in-memory one.
type raftTransport interface {
	raft.Transport
	raft.WithPreVote
	raft.WithClose
}

// transport is Raft's transport, watched and fenced:
//
//   - the leader learns from each follower's answers to AppendEntries how
//     far its log matches the leader's (its match index), which
//     hashicorp/raft keeps to itself, and the metrics report as each
//     follower's lag;
//   - a node whose log has failed (fenced) asks for no vote: it can win
//     no election, so it never leads on a log that acknowledges nothing;
//   - over the network, every RPC's target goes to the stream layer with
//     the id of the node it is for (dialAddr), so that the node's
//     certificate can be checked against it (stream.go);
//   - the leader's lease (lease.go) is kept from the followers' answers.
type transport struct {
	raftTransport
	// target is the address an RPC for the node id is sent to: dialAddr
	// over our stream layer, the address itself in memory.
	target func(id raft.ServerID, addr raft.ServerAddress) raft.ServerAddress
	lease  *lease
	// fenced says why this node stands for no election, nil while it
	// may.
	fenced func() error
	mu     sync.Mutex
	match  map[string]peerMatch
	close  chan struct{}
}

// peerMatch is the last entry a follower is known to hold, as the leader
// of term learnt it.
type peerMatch struct {
	term, index uint64
}

func newTransport(rt raftTransport, fenced func() error, l *lease) *transport {
	return &transport{raftTransport: rt, fenced: fenced, target: sameAddr, lease: l, match: make(map[string]peerMatch), close: make(chan struct{})}
}

// sameAddr is a transport's target where addresses need no node id.
func sameAddr(_ raft.ServerID, addr raft.ServerAddress) raft.ServerAddress {
	return addr
}

// note records a follower's answer to an AppendEntries sent at sent: a
// success says it holds every entry up to the last one sent (or the one
// before them, for a heartbeat, which carries none and says nothing
// here), and that it knows this node as the leader of the request's term
// (the lease).
func (t *transport) note(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, sent time.Time) {
	if req == nil || resp == nil || !resp.Success {
		return
	}
	if resp.Term == req.Term {
		t.lease.accepted(string(id), req.Term, sent)
	}
	index := req.PrevLogEntry + uint64(len(req.Entries))
	t.mu.Lock()
	if m := t.match[string(id)]; req.Term > m.term || req.Term == m.term && index > m.index {
		t.match[string(id)] = peerMatch{term: req.Term, index: index}
	}
	t.mu.Unlock()
}

// matchIndex is the last entry the follower id is known to hold, as this
// node learnt it while leading in term.
func (t *transport) matchIndex(id string, term uint64) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.match[id]
	return m.index, ok && m.term == term
}

// forget drops what is known of a node removed from the cluster.
func (t *transport) forget(id string) {
	t.mu.Lock()
	delete(t.match, id)
	t.mu.Unlock()
}

// errFenced is what a fenced node's requests for votes fail with.
var errFenced = errors.New("cluster: this node's raft log failed: it stands for no election")

// RequestVote is raft.Transport's, unless the node is fenced.
func (t *transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.fenced() != nil {
		return errFenced
	}
	return t.raftTransport.RequestVote(id, t.target(id, target), args, resp)
}

// RequestPreVote is raft.WithPreVote's, unless the node is fenced: a
// fenced node's candidacy ends at its pre-vote, with no term raised.
func (t *transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.fenced() != nil {
		return errFenced
	}
	return t.raftTransport.RequestPreVote(id, t.target(id, target), args, resp)
}

// AppendEntries is raft.Transport's, noted.
func (t *transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	sent := time.Now()
	err := t.raftTransport.AppendEntries(id, t.target(id, target), args, resp)
	if err == nil {
		t.note(id, args, resp, sent)
	}
	return err
}

// AppendEntriesPipeline is raft.Transport's, its answers noted as they
// come.
func (t *transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.raftTransport.AppendEntriesPipeline(id, t.target(id, target))
	if err != nil {
		return nil, err
	}
	w := &pipeline{AppendPipeline: p, out: make(chan raft.AppendFuture, 128), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case f := <-p.Consumer():
				if f.Error() == nil {
					t.note(id, f.Request(), f.Response(), f.Start())
				}
				select {
				case w.out <- f:
				case <-w.stop:
					return
				case <-t.close:
					return
				}
			case <-w.stop:
				return
			case <-t.close:
				return
			}
		}
	}()
	return w, nil
}

// InstallSnapshot is raft.Transport's, to the node id.
func (t *transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.raftTransport.InstallSnapshot(id, t.target(id, target), args, resp, data)
}

// TimeoutNow is raft.Transport's, to the node id.
func (t *transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.raftTransport.TimeoutNow(id, t.target(id, target), args, resp)
}

// Close closes the transport and stops the pipelines' watchers.
func (t *transport) Close() error {
	select {
	case <-t.close:
	default:
		close(t.close)
	}
	return t.raftTransport.Close()
}

type pipeline struct {
	raft.AppendPipeline
	out      chan raft.AppendFuture
	stop     chan struct{}
	stopOnce sync.Once
}

func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *pipeline) Close() error {
	p.stopOnce.Do(func() { close(p.stop) })
	return p.AppendPipeline.Close()
}
