package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/pprof"
	"sync"
)

// engine is one way of running a node's groups: it proposes entries of
// the groups this node leads and calls node.apply with every committed
// entry of every group, in each group's order.
type engine interface {
	leads(g int) bool
	// propose hands over an entry of group g; it must not block for
	// long, and never on the entry's commit.
	propose(g int, data []byte)
	close()
}

// node is what every engine shares: the clients' connections, one
// batcher per group gathering submits into entries (one entry in flight
// per group at a time, as sched/replicated's writer), and each group's
// state.
type node struct {
	id       byte // 1..n; 0 never proposes
	groups   int
	size     int // nodes in the cluster
	replicas int // nodes holding each group
	inflight int // entries in flight per group
	funcs    []string
	fsms     []*fsm
	batch    []*batcher
	eng      engine
	syncs    func() uint64 // the log syncs the node made, where known
	profile  string        // where the 'P' request's CPU profile goes
	counters
}

func newNode(id byte, groups, inflight, size, replicas int) *node {
	if replicas <= 0 || replicas > size {
		replicas = size
	}
	n := &node{id: id, groups: groups, inflight: max(inflight, 1), size: size, replicas: replicas}
	for g := range groups {
		n.funcs = append(n.funcs, fmt.Sprintf("bench-%02d", g))
		n.fsms = append(n.fsms, newFSM())
		n.batch = append(n.batch, &batcher{n: n, g: g, waiting: make(map[uint64][]ack)})
	}
	return n
}

// preferred is the node (1..size) that should lead group g: leaders
// spread evenly.
func preferred(g, size int) uint64 { return uint64(g%size) + 1 }

// members are the nodes (1..size) holding group g: its preferred leader
// and the replicas-1 nodes after it, so that each node holds as many
// groups as any other.
func (n *node) members(g int) []uint64 {
	var m []uint64
	for k := range n.replicas {
		m = append(m, uint64((g+k)%n.size)+1)
	}
	return m
}

// member says whether this node holds group g.
func (n *node) member(g int) bool {
	for _, id := range n.members(g) {
		if id == uint64(n.id) {
			return true
		}
	}
	return false
}

// apply is every engine's apply of a committed entry of group g. The
// node that proposed it answers its submitters.
func (n *node) apply(g int, data []byte) {
	jobs, err := n.fsms[g].apply(data)
	if err != nil {
		panic(fmt.Sprintf("group %d: %v", g, err))
	}
	n.entries.Add(1)
	n.jobs.Add(uint64(jobs))
	if who, seq, ok := entryOwner(data); ok && who == n.id {
		n.batch[g].applied(seq)
	}
}

type ack struct {
	c  *conn
	id uint64
}

// batcher gathers a group's submits into the entry being built while
// the group has as many entries in flight as allowed.
type batcher struct {
	n        *node
	g        int
	mu       sync.Mutex
	buf      []byte
	acks     []ack
	seq      uint64
	next     uint64 // the last job id given
	inflight int
	waiting  map[uint64][]ack
	spare    [][]ack
}

func (b *batcher) submit(c *conn, id uint64, payload []byte) {
	b.mu.Lock()
	if len(b.buf) == 0 {
		b.seq++
		b.buf = startEntry(b.buf, b.n.id, b.seq)
	}
	// The job's id is the group's next, as the scheduler numbers a
	// shard's jobs; the client's id is for its answer.
	b.next++
	b.buf = appendJob(b.buf, uint64(b.n.id)<<56|b.next, b.n.funcs[b.g], payload)
	b.acks = append(b.acks, ack{c, id})
	var out []byte
	if b.inflight < b.n.inflight {
		out = b.cut()
	}
	b.mu.Unlock()
	if out != nil {
		b.n.eng.propose(b.g, out)
	}
}

// cut takes the entry built so far; the engine owns its bytes.
func (b *batcher) cut() []byte {
	out := b.buf
	b.buf = make([]byte, 0, min(max(4096, 2*len(out)), maxEntry))
	b.waiting[b.seq] = b.acks
	b.acks = nil
	if n := len(b.spare); n > 0 {
		b.acks, b.spare = b.spare[n-1], b.spare[:n-1]
	}
	b.inflight++
	return out
}

func (b *batcher) applied(seq uint64) {
	b.mu.Lock()
	acks, ok := b.waiting[seq]
	if !ok {
		b.mu.Unlock()
		return
	}
	delete(b.waiting, seq)
	b.inflight--
	var out []byte
	if len(b.buf) > 0 {
		out = b.cut()
	}
	b.mu.Unlock()
	if out != nil {
		b.n.eng.propose(b.g, out)
	}
	for i := 0; i < len(acks); {
		j := i + 1
		for j < len(acks) && acks[j].c == acks[i].c {
			j++
		}
		acks[i].c.ack(acks[i:j])
		i = j
	}
	b.mu.Lock()
	b.spare = append(b.spare, acks[:0])
	b.mu.Unlock()
}

// The clients' protocol, deliberately the least a frontend could do:
//
//	submit:  'S', group (1), job id (8), payload length (2), payload
//	leaders: 'L'   -> 'L', bitmap of the groups this node leads (8)
//	stats:   'T'   -> 'T', entries applied, jobs applied, log syncs (8 each)
//	profile: 'P' starts a CPU profile to -cpuprofile's file, 'Q' stops it
//	         -> the request's byte once done
//	ack:     'A', job id (8), once the job's entry is applied here
const (
	reqSubmit   = 'S'
	reqLeaders  = 'L'
	reqStats    = 'T'
	reqProfile  = 'P'
	reqStopProf = 'Q'
	respAck     = 'A'
	submitHdr   = 1 + 1 + 8 + 2
)

type conn struct {
	nc   net.Conn
	mu   sync.Mutex
	out  []byte
	kick chan struct{}
}

func (c *conn) ack(acks []ack) {
	c.mu.Lock()
	for _, a := range acks {
		c.out = append(c.out, respAck)
		c.out = binary.BigEndian.AppendUint64(c.out, a.id)
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *conn) send(b []byte) {
	c.mu.Lock()
	c.out = append(c.out, b...)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// write sends what is queued, all of it in one write, outside the lock.
func (c *conn) write(stop <-chan struct{}) {
	var buf []byte
	for {
		select {
		case <-c.kick:
		case <-stop:
			return
		}
		c.mu.Lock()
		buf, c.out = c.out, buf[:0]
		c.mu.Unlock()
		if _, err := c.nc.Write(buf); err != nil {
			return
		}
	}
}

// serve reads a client's requests.
func (n *node) serve(nc net.Conn) {
	c := &conn{nc: nc, kick: make(chan struct{}, 1)}
	stop := make(chan struct{})
	defer close(stop)
	defer nc.Close()
	go c.write(stop)
	r := bufio.NewReaderSize(nc, 64<<10)
	for {
		t, err := r.Peek(1)
		if err != nil {
			return
		}
		switch t[0] {
		case reqLeaders:
			r.Discard(1)
			var bits uint64
			for g := range n.groups {
				if n.eng.leads(g) {
					bits |= 1 << g
				}
			}
			c.send(binary.BigEndian.AppendUint64([]byte{reqLeaders}, bits))
		case reqStats:
			r.Discard(1)
			b := binary.BigEndian.AppendUint64([]byte{reqStats}, n.entries.Load())
			b = binary.BigEndian.AppendUint64(b, n.jobs.Load())
			var syncs uint64
			if n.syncs != nil {
				syncs = n.syncs()
			}
			c.send(binary.BigEndian.AppendUint64(b, syncs))
		case reqProfile, reqStopProf:
			r.Discard(1)
			if t[0] == reqProfile && n.profile != "" {
				if f, err := os.Create(n.profile); err == nil {
					pprof.StartCPUProfile(f)
				}
			} else {
				pprof.StopCPUProfile()
			}
			c.send([]byte{t[0]})
		case reqSubmit:
			h, err := r.Peek(submitHdr)
			if err != nil {
				return
			}
			g := int(h[1])
			id := binary.BigEndian.Uint64(h[2:10])
			plen := int(binary.BigEndian.Uint16(h[10:12]))
			m, err := r.Peek(submitHdr + plen)
			if err != nil || g >= n.groups {
				return
			}
			n.batch[g].submit(c, id, m[submitHdr:])
			r.Discard(submitHdr + plen)
		default:
			return
		}
	}
}

// listen serves clients on l until it is closed.
func (n *node) listen(l net.Listener) {
	for {
		nc, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				fmt.Println("accept:", err)
			}
			return
		}
		go n.serve(nc)
	}
}
