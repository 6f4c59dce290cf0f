// Command multiraft is a measured prototype of a switchyard cluster of
// many Raft groups with their leaders spread over the nodes: the same
// entries (writer batches of job records, as sched/replicated writes)
// proposed through each engine, every node a process in a CPU cgroup of
// its own, the load generator outside them. See README.md.
//
//	multiraft bench [flags]   runs the comparison and prints the table
//	multiraft node [flags]    one node (the bench starts these)
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
)

// walSegment is the size of a log segment file, filled before use.
const walSegment = 32 << 20

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: multiraft bench|node [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "node":
		err = runNode(os.Args[2:])
	case "bench":
		err = runBench(os.Args[2:])
	default:
		err = fmt.Errorf("no command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "multiraft:", err)
		os.Exit(1)
	}
}

// The engines.
const (
	engSingle     = "single"       // the baseline: one fsync'ed log, no replication
	engHraft      = "hraft"        // hashicorp/raft per group, one mux, a log per group
	engHraftOne   = "hraft-shared" // the same with the node's one log for all groups
	engEtcd       = "etcd"         // go.etcd.io/raft RawNodes, one loop, one log
	engDragonboat = "dragonboat"   // lni/dragonboat v3
)

var engines = []string{engSingle, engHraft, engHraftOne, engEtcd, engDragonboat}

// runNode is one node. It says where it listens on stdout ("ready
// client=ADDR peer=ADDR"), reads its peers' addresses from stdin ("peers
// ADDR,ADDR,..." in id order), starts, says "started", and runs until
// stdin ends.
func runNode(args []string) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	kind := fs.String("engine", engEtcd, strings.Join(engines, ", "))
	id := fs.Int("id", 1, "this node's id, 1..n")
	groups := fs.Int("groups", 12, "Raft groups")
	inflight := fs.Int("inflight", 1, "entries in flight per group")
	replicas := fs.Int("replicas", 3, "nodes holding each group (0: all)")
	dir := fs.String("dir", "", "data directory")
	raftAddr := fs.String("raft-addr", "", "dragonboat: its Raft address (it cannot take port 0)")
	profile := fs.String("cpuprofile", "", "write a CPU profile of the node to this file, from the client request that starts it ('P') to the one that stops it ('Q')")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *groups > 64 || *id < 1 || *id > 255 {
		return fmt.Errorf("at most 64 groups and 255 nodes")
	}
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	peer := *raftAddr
	var pl net.Listener
	if *kind != engDragonboat && *kind != engSingle {
		if pl, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
		peer = pl.Addr().String()
	}
	fmt.Printf("ready client=%s peer=%s\n", cl.Addr(), peer)
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return fmt.Errorf("no peers line")
	}
	list, ok := strings.CutPrefix(in.Text(), "peers ")
	if !ok {
		return fmt.Errorf("want a peers line, got %q", in.Text())
	}
	peers := strings.Split(list, ",")
	n := newNode(byte(*id), *groups, *inflight, len(peers), *replicas)
	n.profile = *profile
	var e engine
	var wals []*wal
	switch *kind {
	case engSingle:
		var s *singleEngine
		if s, err = newSingleEngine(n, *dir); err == nil {
			e, wals = s, []*wal{s.w}
		}
	case engHraft, engHraftOne:
		var h *hraftEngine
		if h, err = newHraftEngine(n, pl, peers, *dir, *kind == engHraftOne); err == nil {
			e, wals = h, h.wals
		}
	case engEtcd:
		var x *etcdEngine
		if x, err = newEtcdEngine(n, pl, peers, *dir); err == nil {
			e, wals = x, []*wal{x.w}
		}
	case engDragonboat:
		e, err = newDragonboatEngine(n, peer, peers, *dir)
	default:
		err = fmt.Errorf("no engine %q", *kind)
	}
	if err != nil {
		return err
	}
	n.eng = e
	if len(wals) > 0 {
		n.syncs = func() (sum uint64) {
			for _, w := range wals {
				sum += w.syncCount()
			}
			return sum
		}
	}
	go n.listen(cl)
	fmt.Println("started")
	for in.Scan() {
	}
	cl.Close()
	e.close()
	return nil
}

// counters every node keeps, for the stats request.
type counters struct {
	entries atomic.Uint64 // entries applied
	jobs    atomic.Uint64 // jobs applied
}
