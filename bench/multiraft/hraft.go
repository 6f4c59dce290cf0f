package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/hashicorp/yamux"
)

// hraftEngine runs a hashicorp/raft instance per group, all of the node's
// instances on one multiplexed transport: one TCP connection per pair of
// nodes (yamux), each group's NetworkTransport opening its streams on it
// with the group's id first. Its log store is either the node's one log
// (shared: every group's StoreLogs that comes while a sync runs waits
// for the next, one fdatasync for all) or a log of its own per group.
type hraftEngine struct {
	n     *node
	rafts []*raft.Raft
	wals  []*wal
	mux   *muxNet
	ids   []raft.ServerID
	addrs []raft.ServerAddress
	stop  chan struct{}
	done  sync.WaitGroup
}

// hraftCommitTimeout: see newHraftEngine; SYMR_HRAFT_COMMIT_TIMEOUT
// overrides it (engine/cluster's 5ms, to compare).
var hraftCommitTimeout = 50 * time.Millisecond

func newHraftEngine(n *node, l net.Listener, peers []string, dir string, shared bool) (*hraftEngine, error) {
	if d, err := time.ParseDuration(os.Getenv("SYMR_HRAFT_COMMIT_TIMEOUT")); err == nil {
		hraftCommitTimeout = d
	}
	e := &hraftEngine{n: n, stop: make(chan struct{})}
	var err error
	if e.mux, err = newMuxNet(int(n.id), l, peers, n.groups); err != nil {
		return nil, err
	}
	for i, a := range peers {
		e.ids = append(e.ids, raft.ServerID(strconv.Itoa(i+1)))
		e.addrs = append(e.addrs, raft.ServerAddress(a))
	}
	var one *wal
	if shared {
		if one, err = openWAL(filepath.Join(dir, "log"), walSegment); err != nil {
			return nil, err
		}
		e.wals = append(e.wals, one)
	}
	hlog := hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Error})
	for g := range n.groups {
		if !n.member(g) {
			e.rafts = append(e.rafts, nil)
			continue
		}
		var conf raft.Configuration
		for _, id := range n.members(g) {
			conf.Servers = append(conf.Servers, raft.Server{ID: e.ids[id-1], Address: e.addrs[id-1]})
		}
		w := one
		if !shared {
			if w, err = openWAL(filepath.Join(dir, fmt.Sprintf("log%02d", g)), walSegment/4); err != nil {
				return nil, err
			}
			e.wals = append(e.wals, w)
		}
		logs := newHraftLog(w, g)
		rc := raft.DefaultConfig()
		rc.LocalID = e.ids[n.id-1]
		rc.Logger = hlog
		// engine/cluster's settings.
		rc.HeartbeatTimeout = 500 * time.Millisecond
		rc.ElectionTimeout = 500 * time.Millisecond
		rc.LeaderLeaseTimeout = 500 * time.Millisecond
		// engine/cluster has 5 ms: with nothing new, a leader still sends
		// each follower an AppendEntries every CommitTimeout, per group.
		// The leader answers its submitters on its own commit, so the
		// followers' later news of it costs no latency here.
		rc.CommitTimeout = hraftCommitTimeout
		rc.MaxAppendEntries = 256
		rc.BatchApplyCh = true
		// No snapshots, in any engine of the prototype.
		rc.SnapshotThreshold = 1 << 62
		rc.SnapshotInterval = 24 * time.Hour
		rc.NoSnapshotRestoreOnStart = true
		snaps := raft.NewDiscardSnapshotStore()
		trans := raft.NewNetworkTransportWithLogger(e.mux.layer(g), 3, 10*time.Second, hlog)
		if err := raft.BootstrapCluster(rc, logs, logs, snaps, trans, conf); err != nil {
			return nil, err
		}
		r, err := raft.NewRaft(rc, &hraftFSM{n: n, g: g}, logs, logs, snaps, trans)
		if err != nil {
			return nil, err
		}
		e.rafts = append(e.rafts, r)
	}
	e.done.Add(1)
	go e.place()
	return e, nil
}

func (e *hraftEngine) leads(g int) bool {
	return e.rafts[g] != nil && e.rafts[g].State() == raft.Leader
}

// propose hands the entry to Raft; the answer is the apply, on this node.
func (e *hraftEngine) propose(g int, data []byte) { e.rafts[g].Apply(data, 0) }

// place hands each group this node leads to the node that should lead it.
func (e *hraftEngine) place() {
	defer e.done.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		for g, r := range e.rafts {
			want := preferred(g, len(e.ids)) - 1
			if r != nil && r.State() == raft.Leader && int(want) != int(e.n.id)-1 {
				r.LeadershipTransferToServer(e.ids[want], e.addrs[want])
			}
		}
	}
}

func (e *hraftEngine) close() {
	close(e.stop)
	e.done.Wait()
	for _, r := range e.rafts {
		if r != nil {
			r.Shutdown().Error()
		}
	}
	e.mux.close()
	for _, w := range e.wals {
		w.close()
	}
}

type hraftFSM struct {
	n *node
	g int
}

func (f *hraftFSM) Apply(l *raft.Log) any {
	if l.Type == raft.LogCommand {
		f.n.apply(f.g, l.Data)
	}
	return nil
}

func (f *hraftFSM) ApplyBatch(logs []*raft.Log) []any {
	for _, l := range logs {
		f.Apply(l)
	}
	return make([]any, len(logs))
}

var errNoSnapshots = errors.New("the prototype takes no snapshots")

func (f *hraftFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errNoSnapshots }
func (f *hraftFSM) Restore(io.ReadCloser) error         { return errNoSnapshots }

// hraftLog is a group's raft.LogStore and raft.StableStore: entries kept
// in memory for Raft to read, and written, synced, to a wal before
// StoreLogs returns.
type hraftLog struct {
	w           *wal
	g           int
	mu          sync.Mutex
	logs        map[uint64]*raft.Log
	first, last uint64
	stable      map[string][]byte
	buf         []byte
}

func newHraftLog(w *wal, g int) *hraftLog {
	return &hraftLog{w: w, g: g, logs: make(map[uint64]*raft.Log), stable: make(map[string][]byte)}
}

func (s *hraftLog) FirstIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first, nil
}

func (s *hraftLog) LastIndex() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, nil
}

func (s *hraftLog) GetLog(index uint64, l *raft.Log) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.logs[index]
	if !ok {
		return raft.ErrLogNotFound
	}
	*l = *got
	return nil
}

func (s *hraftLog) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs is called by one goroutine of the group at a time (the
// leader's, or a follower's handling of AppendEntries).
func (s *hraftLog) StoreLogs(logs []*raft.Log) error {
	b := s.buf[:0]
	for _, l := range logs {
		b = append(b, 'e')
		b = binary.BigEndian.AppendUint16(b, uint16(s.g))
		b = binary.BigEndian.AppendUint64(b, l.Index)
		b = binary.BigEndian.AppendUint64(b, l.Term)
		b = append(b, byte(l.Type))
		b = binary.AppendUvarint(b, uint64(len(l.Data)))
		b = append(b, l.Data...)
	}
	s.buf = b
	if err := s.w.write(b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range logs {
		s.logs[l.Index] = l
		if s.first == 0 {
			s.first = l.Index
		}
		s.last = max(s.last, l.Index)
	}
	return nil
}

func (s *hraftLog) DeleteRange(lo, hi uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := lo; i <= hi; i++ {
		delete(s.logs, i)
	}
	if lo <= s.first {
		s.first = hi + 1
	}
	if hi >= s.last {
		s.last = lo - 1
	}
	if s.first > s.last {
		s.first, s.last = 0, 0
	}
	return nil
}

func (s *hraftLog) Set(key, val []byte) error {
	b := append([]byte{'s'}, key...)
	if err := s.w.write(append(b, val...)); err != nil {
		return err
	}
	s.mu.Lock()
	s.stable[string(key)] = append([]byte(nil), val...)
	s.mu.Unlock()
	return nil
}

func (s *hraftLog) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.stable[string(key)]
	if !ok {
		return nil, errors.New("not found")
	}
	return v, nil
}

func (s *hraftLog) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *hraftLog) GetUint64(key []byte) (uint64, error) {
	v, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}

// muxNet is one yamux session per pair of nodes (the lower id dials);
// each group has a stream layer on it for its NetworkTransport, whose
// streams begin with the group's id.
type muxNet struct {
	self     int
	l        net.Listener
	addrs    []string
	sessions map[string]*yamux.Session // by the peer's address
	layers   []*groupLayer
	wg       sync.WaitGroup
}

func newMuxNet(self int, l net.Listener, addrs []string, groups int) (*muxNet, error) {
	m := &muxNet{self: self, l: l, addrs: addrs, sessions: make(map[string]*yamux.Session)}
	for g := range groups {
		m.layers = append(m.layers, &groupLayer{m: m, g: g, accept: make(chan net.Conn, 16), closed: make(chan struct{})})
	}
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cfg.EnableKeepAlive = false
	for i, a := range addrs {
		if i+1 <= self {
			continue
		}
		nc, err := net.DialTimeout("tcp", a, 10*time.Second)
		if err != nil {
			return nil, err
		}
		if _, err := nc.Write([]byte{byte(self)}); err != nil {
			return nil, err
		}
		if m.sessions[a], err = yamux.Client(nc, cfg); err != nil {
			return nil, err
		}
	}
	for range self - 1 {
		nc, err := l.Accept()
		if err != nil {
			return nil, err
		}
		var id [1]byte
		if _, err := io.ReadFull(nc, id[:]); err != nil || id[0] == 0 || int(id[0]) > len(addrs) {
			return nil, fmt.Errorf("mux: bad hello %v %v", id, err)
		}
		if m.sessions[addrs[id[0]-1]], err = yamux.Server(nc, cfg); err != nil {
			return nil, err
		}
	}
	for _, s := range m.sessions {
		m.wg.Add(1)
		go m.acceptStreams(s)
	}
	return m, nil
}

func (m *muxNet) acceptStreams(s *yamux.Session) {
	defer m.wg.Done()
	for {
		st, err := s.Accept()
		if err != nil {
			return
		}
		var g [2]byte
		if _, err := io.ReadFull(st, g[:]); err != nil || int(binary.BigEndian.Uint16(g[:])) >= len(m.layers) {
			st.Close()
			continue
		}
		l := m.layers[binary.BigEndian.Uint16(g[:])]
		select {
		case l.accept <- st:
		case <-l.closed:
			st.Close()
		}
	}
}

func (m *muxNet) layer(g int) *groupLayer { return m.layers[g] }

func (m *muxNet) close() {
	for _, l := range m.layers {
		l.Close()
	}
	for _, s := range m.sessions {
		s.Close()
	}
	m.l.Close()
	m.wg.Wait()
}

// groupLayer is raft.StreamLayer for one group over the shared sessions.
type groupLayer struct {
	m      *muxNet
	g      int
	accept chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *groupLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *groupLayer) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *groupLayer) Addr() net.Addr { return l.m.l.Addr() }

func (l *groupLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	s, ok := l.m.sessions[string(addr)]
	if !ok {
		return nil, fmt.Errorf("mux: no session to %s", addr)
	}
	st, err := s.Open()
	if err != nil {
		return nil, err
	}
	var g [2]byte
	binary.BigEndian.PutUint16(g[:], uint16(l.g))
	if _, err := st.Write(g[:]); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}
