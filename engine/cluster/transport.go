package cluster

import (
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// transport is Raft's network transport over our stream layer
// (stream.go), watched: the leader learns from each follower's answers to
// AppendEntries how far its log reaches, which hashicorp/raft keeps to
// itself, and the metrics report as each follower's lag. Every RPC's
// target goes to the stream layer with the id of the node it is for
// (dialAddr), so that the node's certificate can be checked against it.
type transport struct {
	*raft.NetworkTransport
	mu    sync.Mutex
	last  map[string]uint64 // a follower's last log index, from its latest answer
	close chan struct{}
}

func newTransport(nt *raft.NetworkTransport) *transport {
	return &transport{NetworkTransport: nt, last: make(map[string]uint64), close: make(chan struct{})}
}

func (t *transport) note(id raft.ServerID, resp *raft.AppendEntriesResponse) {
	if resp == nil {
		return
	}
	t.mu.Lock()
	t.last[string(id)] = resp.LastLog
	t.mu.Unlock()
}

func (t *transport) match(id string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.last[id]
	return v, ok
}

// AppendEntries is raft.Transport's, noted.
func (t *transport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, dialAddr(id, target), args, resp)
	if err == nil {
		t.note(id, resp)
	}
	return err
}

// AppendEntriesPipeline is raft.Transport's, its answers noted as they
// come.
func (t *transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, dialAddr(id, target))
	if err != nil {
		return nil, err
	}
	w := &pipeline{AppendPipeline: p, out: make(chan raft.AppendFuture, 128), stop: make(chan struct{})}
	go func() {
		for {
			select {
			case f := <-p.Consumer():
				if f.Error() == nil {
					t.note(id, f.Response())
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

// RequestVote is raft.Transport's, to the node id.
func (t *transport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.NetworkTransport.RequestVote(id, dialAddr(id, target), args, resp)
}

// RequestPreVote is raft.WithPreVote's, to the node id.
func (t *transport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.NetworkTransport.RequestPreVote(id, dialAddr(id, target), args, resp)
}

// InstallSnapshot is raft.Transport's, to the node id.
func (t *transport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.NetworkTransport.InstallSnapshot(id, dialAddr(id, target), args, resp, data)
}

// TimeoutNow is raft.Transport's, to the node id.
func (t *transport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.NetworkTransport.TimeoutNow(id, dialAddr(id, target), args, resp)
}

// Close closes the transport and stops the pipelines' watchers.
func (t *transport) Close() error {
	select {
	case <-t.close:
	default:
		close(t.close)
	}
	return t.NetworkTransport.Close()
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
