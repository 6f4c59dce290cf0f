package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/lni/dragonboat/v3"
	"github.com/lni/dragonboat/v3/client"
	"github.com/lni/dragonboat/v3/config"
	"github.com/lni/dragonboat/v3/logger"
	sm "github.com/lni/dragonboat/v3/statemachine"
)

// dragonboatEngine runs the node's groups in one dragonboat NodeHost: a
// multi-group engine of its own, with its transport (messages to a peer
// batched across groups), its log (Pebble, here one shard: one fsync a
// round for every group) and its execution workers.
type dragonboatEngine struct {
	n        *node
	nh       *dragonboat.NodeHost
	peers    int
	sessions []*client.Session
	stop     chan struct{}
	done     sync.WaitGroup
}

// dragonboatRTT is dragonboat's tick; elections after 10, heartbeats
// every one (500 ms and 50 ms, as the etcd engine's).
var dragonboatRTT uint64 = 50

func newDragonboatEngine(n *node, raftAddr string, peers []string, dir string) (*dragonboatEngine, error) {
	if v, err := strconv.Atoi(os.Getenv("SYMR_DRAGONBOAT_RTT")); err == nil && v > 0 {
		dragonboatRTT = uint64(v)
	}
	for _, p := range []string{"dragonboat", "raft", "rsm", "transport", "logdb", "raftpb", "config", "settings"} {
		logger.GetLogger(p).SetLevel(logger.ERROR)
	}
	ldb := config.GetTinyMemLogDBConfig()
	ldb.Shards = 1
	eng := config.EngineConfig{ExecShards: 2, CommitShards: 2, ApplyShards: 2, SnapshotShards: 1, CloseShards: 1}
	if os.Getenv("SYMR_DRAGONBOAT_DEFAULTS") != "" {
		ldb, eng = config.GetDefaultLogDBConfig(), config.GetDefaultEngineConfig()
	}
	nhc := config.NodeHostConfig{
		NodeHostDir:    filepath.Join(dir, "nh"),
		WALDir:         filepath.Join(dir, "wal"),
		RTTMillisecond: dragonboatRTT,
		RaftAddress:    raftAddr,
		Expert: config.ExpertConfig{
			LogDB:  ldb,
			Engine: eng,
		},
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, err
	}
	e := &dragonboatEngine{n: n, nh: nh, peers: len(peers), stop: make(chan struct{})}
	for g := range n.groups {
		cid := uint64(g + 1)
		if !n.member(g) {
			e.sessions = append(e.sessions, nil)
			continue
		}
		members := make(map[uint64]string)
		for _, id := range n.members(g) {
			members[id] = peers[id-1]
		}
		cfg := config.Config{NodeID: uint64(n.id), ClusterID: cid, ElectionRTT: 500 / dragonboatRTT, HeartbeatRTT: 50 / dragonboatRTT, CheckQuorum: true,
			// No snapshots, in any engine of the prototype.
			SnapshotEntries: 0}
		create := func(uint64, uint64) sm.IStateMachine { return &dragonboatSM{n: n, g: g} }
		if err := nh.StartCluster(members, false, create, cfg); err != nil {
			nh.Stop()
			return nil, err
		}
		e.sessions = append(e.sessions, nh.GetNoOPSession(cid))
	}
	e.done.Add(1)
	go e.place()
	return e, nil
}

func (e *dragonboatEngine) leads(g int) bool {
	if e.sessions[g] == nil {
		return false
	}
	id, ok, err := e.nh.GetLeaderID(uint64(g + 1))
	return err == nil && ok && id == uint64(e.n.id)
}

// propose hands the entry over; the answer is the apply, on this node.
func (e *dragonboatEngine) propose(g int, data []byte) {
	// Its RequestState is left to the collector: its result channel
	// holds the one result without a reader.
	e.nh.Propose(e.sessions[g], data, 10*time.Second)
}

func (e *dragonboatEngine) place() {
	defer e.done.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		for g := range e.n.groups {
			if want := preferred(g, e.peers); want != uint64(e.n.id) && e.leads(g) {
				e.nh.RequestLeaderTransfer(uint64(g+1), want)
			}
		}
	}
}

func (e *dragonboatEngine) close() {
	close(e.stop)
	e.done.Wait()
	e.nh.Stop()
}

type dragonboatSM struct {
	n *node
	g int
}

func (s *dragonboatSM) Update(data []byte) (sm.Result, error) {
	s.n.apply(s.g, data)
	return sm.Result{}, nil
}

func (s *dragonboatSM) Lookup(any) (any, error) { return nil, nil }

var errNoSnapshot = errors.New("the prototype takes no snapshots")

func (s *dragonboatSM) SaveSnapshot(io.Writer, sm.ISnapshotFileCollection, <-chan struct{}) error {
	return errNoSnapshot
}

func (s *dragonboatSM) RecoverFromSnapshot(io.Reader, []sm.SnapshotFile, <-chan struct{}) error {
	return errNoSnapshot
}

func (s *dragonboatSM) Close() error { return nil }
