package jepsen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/netns"
)

// Nemesis makes the faults of a schedule in a cluster whose nodes run in
// network namespaces, as Jepsen's nemesis does, and records each in the
// history (process "nemesis": its invocation, then an info line once the
// fault is in place). Links are cut where packets arrive (bench/netns):
// the sender hears nothing, as across a pulled cable.
type Nemesis struct {
	c    *harness.Cluster
	net  *netns.Net
	rec  *Recorder
	w    *Workload
	ctx  context.Context
	logf func(format string, args ...any)
	// clientNodes are the nodes the workload's clients use: the ones a
	// recovery waits for.
	clientNodes []*harness.ClusterNode
	faults      int
	// lastHeal is the history time of the latest heal.
	lastHeal int64
}

// RecoverLimit bounds a schedule's wait, after a heal, for every node up
// to acknowledge submits again before it makes the next fault (the
// checker holds them to Options.RecoverWithin).
const RecoverLimit = 15 * time.Second

// Faults is how many faults the nemesis has made (heals not counted).
func (n *Nemesis) Faults() int { return n.faults }

// Nodes are the cluster's nodes the clients use.
func (n *Nemesis) Nodes() []*harness.ClusterNode { return n.clientNodes }

// do records the fault f (on nodes, described by what) around fn.
func (n *Nemesis) do(f string, nodes []*harness.ClusterNode, what string, fn func() error) error {
	var ids []string
	for _, x := range nodes {
		ids = append(ids, x.ID)
	}
	call := n.rec.Now()
	err := fn()
	done := Event{}
	if err != nil {
		done.Error = err.Error()
	}
	n.rec.Op(call, Event{Process: nemesis, F: f, Nodes: ids, Value: what}, Info, done)
	if heals[f] {
		n.lastHeal = call
	} else {
		n.faults++
	}
	if n.logf != nil {
		n.logf("nemesis: %s%s%s", f, strings.TrimRight(" "+what, " "), errNote(err))
	}
	if err != nil {
		return fmt.Errorf("nemesis: %s %s: %w", f, what, err)
	}
	return nil
}

func errNote(err error) string {
	if err != nil {
		return ": " + err.Error()
	}
	return ""
}

// Leader is the node that leads now (waiting for one, within the
// cluster's timeout).
func (n *Nemesis) Leader() (*harness.ClusterNode, error) { return n.c.Leader(n.ctx) }

// Others are the client nodes but those given.
func (n *Nemesis) Others(not ...*harness.ClusterNode) []*harness.ClusterNode {
	var out []*harness.ClusterNode
	for _, x := range n.clientNodes {
		if !slices.Contains(not, x) {
			out = append(out, x)
		}
	}
	return out
}

func names(nodes []*harness.ClusterNode) string {
	var s []string
	for _, x := range nodes {
		s = append(s, x.ID)
	}
	return strings.Join(s, " ")
}

func nss(nodes []*harness.ClusterNode) []*netns.NS {
	var out []*netns.NS
	for _, x := range nodes {
		out = append(out, x.NS())
	}
	return out
}

// Partition cuts every group off from the others, both ways. A node in
// no group, and the clients, reach everyone: Partition([a], [c]) leaves b
// a bridge between a and c.
func (n *Nemesis) Partition(groups ...[]*harness.ClusterNode) error {
	var all []*harness.ClusterNode
	var desc []string
	var gs [][]*netns.NS
	for _, g := range groups {
		all = append(all, g...)
		desc = append(desc, names(g))
		gs = append(gs, nss(g))
	}
	return n.do("partition", all, strings.Join(desc, " | "), func() error { return n.net.Partition(gs...) })
}

// OneWay drops what a sends to each of to; what they send a passes.
func (n *Nemesis) OneWay(a *harness.ClusterNode, to ...*harness.ClusterNode) error {
	return n.do("oneway", append([]*harness.ClusterNode{a}, to...), a.ID+" -> "+names(to), func() error {
		var errs []error
		for _, b := range to {
			errs = append(errs, n.net.OneWay(a.NS(), b.NS()))
		}
		return errors.Join(errs...)
	})
}

// LossAll drops each packet on every link, between every two nodes and
// between the clients and every node, with probability p.
func (n *Nemesis) LossAll(p float64) error {
	return n.do("loss", n.clientNodes, fmt.Sprintf("%g on every link", p), func() error {
		members := append(nss(n.clientNodes), n.c.Clients())
		var errs []error
		for i, a := range members {
			for _, b := range members[i+1:] {
				errs = append(errs, n.net.Loss(a, b, p))
			}
		}
		return errors.Join(errs...)
	})
}

// Pause stops a node's process (SIGSTOP).
func (n *Nemesis) Pause(x *harness.ClusterNode) error {
	return n.do("pause", []*harness.ClusterNode{x}, x.ID, func() error { return n.c.Pause(x) })
}

// Heal removes every cut and continues every paused node.
func (n *Nemesis) Heal() error {
	return n.do("heal", nil, "", func() error {
		errs := []error{n.net.Heal()}
		for _, x := range n.c.Nodes {
			errs = append(errs, n.c.Resume(x))
		}
		return errors.Join(errs...)
	})
}

// Kill kills nodes with SIGKILL, all at once.
func (n *Nemesis) Kill(nodes ...*harness.ClusterNode) error {
	return n.do("kill", nodes, names(nodes), func() error {
		for _, x := range nodes {
			n.c.Pause(x) // freeze them all first: they die at one instant
		}
		var errs []error
		for _, x := range nodes {
			errs = append(errs, n.c.Kill(x))
		}
		return errors.Join(errs...)
	})
}

// Wipe removes a node's data directory; it must be down.
func (n *Nemesis) Wipe(x *harness.ClusterNode) error {
	return n.do("wipe", []*harness.ClusterNode{x}, x.ID, func() error { return n.c.Wipe(x) })
}

// Restart starts nodes that are down on their data directories, and
// returns at once: a node cut off cannot serve until healed.
func (n *Nemesis) Restart(nodes ...*harness.ClusterNode) error {
	return n.do("restart", nodes, names(nodes), func() error { return n.c.Launch(nodes...) })
}

// Add starts a node id with no data, and has the leader add it; the
// leader may be changing (a partition just made): the add is asked again
// until it is done, for at most the recovery limit.
func (n *Nemesis) Add(id string) (*harness.ClusterNode, error) {
	var x *harness.ClusterNode
	err := n.do("add", nil, id, func() error {
		return n.retry("cluster add "+id, func() error {
			var err error
			x, err = n.c.AddNode(n.ctx, id)
			if err != nil && x != nil && x.Alive() == nil {
				n.c.Kill(x) // started, not added: try again from scratch
			}
			return err
		})
	})
	return x, err
}

// Remove has the leader remove a node, and stops it.
func (n *Nemesis) Remove(x *harness.ClusterNode) error {
	return n.do("remove", []*harness.ClusterNode{x}, x.ID, func() error {
		return n.retry("cluster remove "+x.ID, func() error { return n.c.RemoveNode(n.ctx, x) })
	})
}

// retry calls fn until it succeeds, for at most RecoverLimit.
func (n *Nemesis) retry(what string, fn func() error) error {
	deadline := time.Now().Add(RecoverLimit)
	for {
		err := fn()
		if err == nil || time.Now().After(deadline) || n.ctx.Err() != nil {
			return err
		}
		if n.logf != nil {
			n.logf("nemesis: %s: %v; again", what, err)
		}
		pause(n.ctx, 200*time.Millisecond)
	}
}

// Hold keeps the faults in place for d while the clients go on.
func (n *Nemesis) Hold(d time.Duration) bool { return pause(n.ctx, d) }

// AwaitRecovery waits, for at most RecoverLimit, until a submit through
// every client node that is up has been acknowledged since the latest
// heal; then, a calm moment before the next fault. A cluster that does not
// recover is the checker's to report: this only keeps faults apart.
func (n *Nemesis) AwaitRecovery() {
	deadline := time.Now().Add(RecoverLimit)
	for n.ctx.Err() == nil && time.Now().Before(deadline) {
		ok := true
		for _, x := range n.clientNodes {
			if x.Alive() == nil && !n.w.AckedSince(x.ID, n.lastHeal) {
				ok = false
			}
		}
		if ok {
			break
		}
		pause(n.ctx, pollInterval)
	}
	pause(n.ctx, calm)
}

// calm is the time between a recovery and the next fault.
const calm = 300 * time.Millisecond
