package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"

	"switchyard/sched/replicated"
)

// LeaderInfo is what a new leader publishes of itself in the replicated
// state, once its frontends listen: where the followers relay each
// protocol's connections.
type LeaderInfo struct {
	ID string `json:"id"`
	// Term is the Raft term it leads in: a leader's earlier publication
	// names addresses it may no longer listen on.
	Term uint64 `json:"term"`
	// Addrs are each protocol's TCP addresses (host:port), in the order
	// the protocol lists its listeners.
	Addrs map[string][]string `json:"addrs"`
}

const leaderKey = "leader"

// publishTimeout bounds a publication's commit.
const publishTimeout = replicated.DefaultCommitTimeout

// Publish writes info as the leader's of term, through Raft: refused if
// this node no longer leads in term (a publication of a term that ended
// is refused by every node's FSM alike). It waits for the commit for at
// most publishTimeout, and while ctx lasts.
func (n *Node) Publish(ctx context.Context, term uint64, info LeaderInfo) error {
	info.ID, info.Term = n.cfg.ID, term
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	f := n.raft.Apply(replicated.MetaEntry(term, leaderKey, b), publishTimeout)
	if err := waitFuture(ctx, f, publishTimeout, "publish the leader's addresses"); err != nil {
		return err
	}
	if err, ok := f.Response().(error); ok {
		return fmt.Errorf("cluster: publish the leader's addresses: %w", err)
	}
	return nil
}

// CurrentLeader is the current leader's published information: ok only
// when a leader is known and has published since it took over.
func (n *Node) CurrentLeader() (LeaderInfo, bool) {
	id, _ := n.Leader()
	if id == "" {
		return LeaderInfo{}, false
	}
	var info LeaderInfo
	if json.Unmarshal(n.fsm.Meta(leaderKey), &info) != nil || info.ID != id || info.Term != n.raft.CurrentTerm() {
		return LeaderInfo{}, false
	}
	return info, true
}

// Reachable turns an address a server bound ("[::]:4730") into one the
// other nodes can dial: an unspecified host becomes the host of this
// node's Raft address.
func (n *Node) Reachable(bound string) string {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		rhost, _, err := net.SplitHostPort(n.cfg.Listen)
		if err == nil {
			return net.JoinHostPort(rhost, port)
		}
	}
	return bound
}
