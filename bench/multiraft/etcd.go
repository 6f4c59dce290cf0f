package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// etcdEngine runs every group of the node as a go.etcd.io/raft RawNode
// driven by one goroutine, as CockroachDB's multi-raft and dragonboat do:
// each round it steps what arrived, proposes what was queued, then takes
// every group's Ready together, so that all groups' new entries and
// states go to the node's one log in one write and one fdatasync, every
// group's messages to a peer leave in one write, and the committed
// entries are applied before the next round.
type etcdEngine struct {
	n     *node
	id    uint64
	peers int
	rns   []*raft.RawNode
	store []*raft.MemoryStorage
	w     *wal
	tr    *etcdTransport

	mu    sync.Mutex
	props []proposal
	in    []inMsg
	kick  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	leader  []atomic.Bool
	dropped atomic.Uint64 // proposals on a group this node no longer led
}

type proposal struct {
	g    int
	data []byte
}

type inMsg struct {
	g int
	m pb.Message
}

// etcdTick is Raft's tick: heartbeats every tick, an election after 10
// silent ones (500 ms, as engine/cluster's hashicorp/raft timeouts).
const etcdTick = 50 * time.Millisecond

func newEtcdEngine(n *node, l net.Listener, peers []string, dir string) (*etcdEngine, error) {
	e := &etcdEngine{n: n, id: uint64(n.id), peers: len(peers), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), leader: make([]atomic.Bool, n.groups)}
	var err error
	if e.w, err = openWAL(dir, walSegment); err != nil {
		return nil, err
	}
	logger := &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}
	for g := range n.groups {
		if !n.member(g) {
			e.rns = append(e.rns, nil)
			e.store = append(e.store, nil)
			continue
		}
		voters := n.members(g)
		st := raft.NewMemoryStorage()
		// Every group starts from the same empty snapshot naming its
		// voters: no configuration entries to replicate.
		if err := st.ApplySnapshot(pb.Snapshot{Metadata: pb.SnapshotMetadata{Index: 1, Term: 1, ConfState: pb.ConfState{Voters: voters}}}); err != nil {
			return nil, err
		}
		rn, err := raft.NewRawNode(&raft.Config{ID: e.id, ElectionTick: 10, HeartbeatTick: 1, Storage: st,
			Applied: 1, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, CheckQuorum: true, PreVote: true, Logger: logger})
		if err != nil {
			return nil, err
		}
		e.rns = append(e.rns, rn)
		e.store = append(e.store, st)
	}
	e.tr = newEtcdTransport(e.id, l, peers, e.received)
	if err := e.tr.connect(); err != nil {
		return nil, err
	}
	// Each group's preferred leader stands first; placement keeps it so.
	for g, rn := range e.rns {
		if rn != nil && preferred(g, e.peers) == e.id {
			rn.Campaign()
		}
	}
	go e.run()
	return e, nil
}

func (e *etcdEngine) leads(g int) bool { return e.leader[g].Load() }

func (e *etcdEngine) propose(g int, data []byte) {
	e.mu.Lock()
	e.props = append(e.props, proposal{g, data})
	e.mu.Unlock()
	e.wake()
}

func (e *etcdEngine) received(batch []inMsg) {
	e.mu.Lock()
	e.in = append(e.in, batch...)
	e.mu.Unlock()
	e.wake()
}

func (e *etcdEngine) wake() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *etcdEngine) close() {
	close(e.stop)
	<-e.done
	e.tr.close()
	e.w.close()
}

type groupReady struct {
	g  int
	rd raft.Ready
}

func (e *etcdEngine) run() {
	defer close(e.done)
	tick := time.NewTicker(etcdTick)
	defer tick.Stop()
	var props []proposal
	var in []inMsg
	var readies []groupReady
	var buf []byte
	ticks := 0
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			for _, rn := range e.rns {
				if rn != nil {
					rn.Tick()
				}
			}
			if ticks++; ticks%10 == 0 {
				e.place()
			}
		case <-e.kick:
		}
		e.mu.Lock()
		props, e.props = e.props, props[:0]
		in, e.in = e.in, in[:0]
		e.mu.Unlock()
		for i := range in {
			if rn := e.rns[in[i].g]; rn != nil {
				rn.Step(in[i].m)
			}
			in[i] = inMsg{}
		}
		for i, p := range props {
			if rn := e.rns[p.g]; rn == nil || rn.Propose(p.data) != nil {
				e.dropped.Add(1)
			}
			props[i] = proposal{}
		}
		for {
			readies = readies[:0]
			for g, rn := range e.rns {
				if rn != nil && rn.HasReady() {
					readies = append(readies, groupReady{g, rn.Ready()})
				}
			}
			if len(readies) == 0 {
				break
			}
			buf = e.handle(readies, buf[:0])
		}
	}
}

// handle persists every group's Ready in one synced write, sends every
// message (one write a peer), applies what is committed, and advances.
func (e *etcdEngine) handle(readies []groupReady, buf []byte) []byte {
	sync := false
	for _, r := range readies {
		st := e.store[r.g]
		if r.rd.SoftState != nil {
			e.leader[r.g].Store(r.rd.SoftState.RaftState == raft.StateLeader)
		}
		if !raft.IsEmptyHardState(r.rd.HardState) {
			st.SetHardState(r.rd.HardState)
			buf = appendHardState(buf, r.g, r.rd.HardState)
		}
		if len(r.rd.Entries) > 0 {
			st.Append(r.rd.Entries)
			for i := range r.rd.Entries {
				buf = appendEtcdEntry(buf, r.g, &r.rd.Entries[i])
			}
		}
		sync = sync || r.rd.MustSync
	}
	// Nothing to sync is a commit index alone, which Raft learns again
	// from the leader after a restart: not written.
	if sync && len(buf) > 0 {
		if err := e.w.write(buf); err != nil {
			panic(err)
		}
	}
	for _, r := range readies {
		for i := range r.rd.Messages {
			e.tr.queue(r.g, &r.rd.Messages[i])
		}
	}
	e.tr.flush()
	for _, r := range readies {
		st := e.store[r.g]
		for i := range r.rd.CommittedEntries {
			ent := &r.rd.CommittedEntries[i]
			if ent.Type == pb.EntryNormal && len(ent.Data) > 0 {
				e.n.apply(r.g, ent.Data)
			}
		}
		if k := len(r.rd.CommittedEntries); k > 0 {
			// Keep a window of entries for followers that lag; the
			// rest is the state's (no snapshots in the prototype).
			applied := r.rd.CommittedEntries[k-1].Index
			if first, _ := st.FirstIndex(); applied > first+2*keepEntries {
				st.Compact(applied - keepEntries)
			}
		}
		e.rns[r.g].Advance(r.rd)
	}
	return buf
}

const keepEntries = 2048

// place hands the leadership of a group this node leads to the node
// that should lead it, once that one is as far as this.
func (e *etcdEngine) place() {
	for g, rn := range e.rns {
		want := preferred(g, e.peers)
		if rn == nil || want == e.id || !e.leader[g].Load() {
			continue
		}
		st := rn.Status()
		if pr, ok := st.Progress[want]; ok && pr.Match == st.Commit {
			rn.TransferLeader(want)
		}
	}
}

// The log's records: kind, group, then an entry's index, term, type and
// data, or a hard state's term, vote and commit.
func appendEtcdEntry(b []byte, g int, ent *pb.Entry) []byte {
	b = append(b, 'e')
	b = binary.BigEndian.AppendUint16(b, uint16(g))
	b = binary.BigEndian.AppendUint64(b, ent.Index)
	b = binary.BigEndian.AppendUint64(b, ent.Term)
	b = append(b, byte(ent.Type))
	b = binary.AppendUvarint(b, uint64(len(ent.Data)))
	return append(b, ent.Data...)
}

func appendHardState(b []byte, g int, hs pb.HardState) []byte {
	b = append(b, 'h')
	b = binary.BigEndian.AppendUint16(b, uint16(g))
	b = binary.BigEndian.AppendUint64(b, hs.Term)
	b = binary.BigEndian.AppendUint64(b, hs.Vote)
	return binary.BigEndian.AppendUint64(b, hs.Commit)
}

// etcdTransport is one TCP connection per pair of nodes (the lower id
// dials), carrying every group's messages: each a frame of length,
// group and the message's protobuf. What a round queues for a peer
// leaves in one write.
type etcdTransport struct {
	self    uint64
	l       net.Listener
	addrs   []string
	peers   []*etcdPeer // by id-1; nil for self
	deliver func([]inMsg)
	wg      sync.WaitGroup
}

type etcdPeer struct {
	mu   sync.Mutex
	out  []byte
	kick chan struct{}
	nc   net.Conn
}

func newEtcdTransport(self uint64, l net.Listener, addrs []string, deliver func([]inMsg)) *etcdTransport {
	t := &etcdTransport{self: self, l: l, addrs: addrs, deliver: deliver, peers: make([]*etcdPeer, len(addrs))}
	for i := range addrs {
		if uint64(i+1) != self {
			t.peers[i] = &etcdPeer{kick: make(chan struct{}, 1)}
		}
	}
	return t
}

// connect dials the peers of higher id and accepts the others.
func (t *etcdTransport) connect() error {
	for i, p := range t.peers {
		if p == nil || uint64(i+1) < t.self {
			continue
		}
		nc, err := net.DialTimeout("tcp", t.addrs[i], 10*time.Second)
		if err != nil {
			return err
		}
		if _, err := nc.Write([]byte{byte(t.self)}); err != nil {
			return err
		}
		p.nc = nc
	}
	for range t.self - 1 {
		nc, err := t.l.Accept()
		if err != nil {
			return err
		}
		var id [1]byte
		if _, err := io.ReadFull(nc, id[:]); err != nil || id[0] == 0 || int(id[0]) > len(t.peers) || t.peers[id[0]-1] == nil {
			return fmt.Errorf("transport: bad hello %v %v", id, err)
		}
		t.peers[id[0]-1].nc = nc
	}
	for _, p := range t.peers {
		if p != nil {
			t.wg.Add(2)
			go t.read(p.nc)
			go p.write(&t.wg)
		}
	}
	return nil
}

func (t *etcdTransport) queue(g int, m *pb.Message) {
	p := t.peers[m.To-1]
	n := m.Size()
	p.mu.Lock()
	at := len(p.out)
	p.out = append(p.out, make([]byte, 6+n)...)
	binary.BigEndian.PutUint32(p.out[at:], uint32(2+n))
	binary.BigEndian.PutUint16(p.out[at+4:], uint16(g))
	m.MarshalToSizedBuffer(p.out[at+6 : at+6+n])
	p.mu.Unlock()
}

func (t *etcdTransport) flush() {
	for _, p := range t.peers {
		if p != nil {
			select {
			case p.kick <- struct{}{}:
			default:
			}
		}
	}
}

func (p *etcdPeer) write(wg *sync.WaitGroup) {
	defer wg.Done()
	var buf []byte
	for range p.kick {
		p.mu.Lock()
		buf, p.out = p.out, buf[:0]
		p.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		if _, err := p.nc.Write(buf); err != nil {
			return
		}
	}
}

// read delivers what a peer sends, a buffer's worth at a time.
func (t *etcdTransport) read(nc net.Conn) {
	defer t.wg.Done()
	r := bufio.NewReaderSize(nc, 256<<10)
	var batch []inMsg
	var body []byte
	for {
		var h [6]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(h[:4])) - 2
		if cap(body) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		var m pb.Message
		if err := m.Unmarshal(body); err != nil {
			return
		}
		batch = append(batch, inMsg{g: int(binary.BigEndian.Uint16(h[4:])), m: m})
		if r.Buffered() == 0 || len(batch) >= 256 {
			t.deliver(batch)
			batch = batch[:0]
		}
	}
}

func (t *etcdTransport) close() {
	for _, p := range t.peers {
		if p != nil {
			p.nc.Close()
			close(p.kick)
		}
	}
	t.l.Close()
}
