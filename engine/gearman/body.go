package gearman

import (
	"slices"
	"sync"
	"sync/atomic"

	"switchyard/engine/internal/pages"
)

// bodyPool keeps the buffers of large packets for reuse. Without it every
// 1 MiB packet costs a fresh zeroed allocation, and the garbage collector
// and the scavenger then hand those pages back and forth with the kernel;
// in payload-1m that was a fifth of the server's time.
//
// A submit's buffer becomes its job's payload; the scheduler gives the
// payload back through Release when the job ends. The payload is the
// buffer's tail, so a buffer comes back a few bytes shorter each time:
// the slack given to a new buffer pays for thousands of round trips.
type bodyPool struct {
	mu    sync.Mutex
	free  [][]byte
	bytes int // total capacity of free
	limit int // bound on bytes
}

// bodies serves every Server in the process: the scheduler's Release hook
// is set before any Server exists.
var bodies = bodyPool{limit: 32 << 20}

// releasePayload takes back a large packet's buffer that a job kept
// (sched.SetRelease), for the pool.
func releasePayload(payload []byte) { bodies.put(payload) }

// bodyScan bounds how many free buffers take looks at.
const bodyScan = 8

// take returns an empty pooled buffer with room for n bytes, or nil.
func (p *bodyPool) take(n int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.free) - 1; i >= max(0, len(p.free)-bodyScan); i-- {
		// A buffer far larger than asked for would sit idle in a small packet.
		if b := p.free[i]; cap(b) >= n && cap(b) <= 2*n {
			p.free = slices.Delete(p.free, i, i+1) // in order: put drops the oldest
			p.bytes -= cap(b)
			return b
		}
	}
	return nil
}

// minBody is the least a large packet's buffer starts with.
const minBody = 128 << 10

// bodyCap is the capacity to allocate for a packet of need bytes when have
// bytes of it have arrived: room for what has come and as much again, so a
// header alone cannot make the server allocate the megabytes it claims;
// the buffer doubles as bytes arrive, until an eighth of the packet has
// come, when it takes all of it at once: each growth copies what came
// before in one event, and a 16 MiB packet doubling to its end copied 8
// MiB of its prefix at its last step alone, with the page faults of a new
// buffer, while its loop's other connections waited. The last step adds a
// sixteenth of slack: a job's payload is its buffer's tail, and the slack
// lets that tail hold a packet of the same size again.
func bodyCap(need, have int) int {
	c := max(2*have, minBody)
	if c >= need || need <= bodyJump*have {
		return need + need/16
	}
	return c
}

// bodyJump: a packet whose buffer has a bodyJump-th of it takes all of it.
const bodyJump = 8

// put offers b for reuse. Small buffers, and any larger than the pool's
// limit, are freed; to make room, the buffers put longest ago are.
func (p *bodyPool) put(b []byte) {
	if cap(b) <= largeBody || cap(b) > p.limit {
		freeBody(b)
		return
	}
	p.mu.Lock()
	drop := 0
	for p.bytes+cap(b) > p.limit {
		p.bytes -= cap(p.free[drop])
		drop++
	}
	dropped := slices.Clone(p.free[:drop])
	clear(p.free[:drop])
	p.free = append(p.free[drop:], b[:0])
	p.bytes += cap(b)
	p.mu.Unlock()
	for _, d := range dropped {
		freeBody(d)
	}
}

// newBody returns an empty buffer for a large packet, with room for n
// bytes, from its own mapping (engine/internal/pages): its pages are
// faulted in by the reads that fill them, a bounded number per event,
// where a buffer from the heap is zeroed whole as it is allocated, and
// on memory the heap had given back to the kernel that faults in every
// page at once (a 16 MiB buffer held its loop for 80 ms). The heap serves
// when the kernel refuses a mapping.
func newBody(n int) []byte {
	if b := pages.Alloc(n); b != nil {
		return b
	}
	return make([]byte, 0, n)
}

// growBody returns b with room for n bytes: the mapping grown, its pages
// moved by the kernel rather than copied, or else a copy on the heap.
func growBody(b []byte, n int) []byte {
	if g, ok := pages.Grow(b, n); ok {
		return g
	}
	g := append(newBody(n), b...)
	freeBody(b)
	return g
}

// freeBody hands a buffer's mapping back to the kernel; a heap buffer is
// the collector's.
func freeBody(b []byte) { pages.Free(b) }

// sharedBody is a large packet's buffer that replies on other connections
// point into: a worker's large result goes to each waiting client on
// another event loop by reference, and the buffer goes back to the pool
// once the last of them has written it.
type sharedBody struct {
	buf  []byte
	refs atomic.Int32
}

var sharedBodies = sync.Pool{New: func() any { return new(sharedBody) }}

// share wraps buf, with one reference held by the caller.
func share(buf []byte) *sharedBody {
	sb := sharedBodies.Get().(*sharedBody)
	sb.buf = buf
	sb.refs.Store(1)
	return sb
}

func (sb *sharedBody) hold() { sb.refs.Add(1) }

// drop gives up one reference; the last one returns the buffer to the pool.
func (sb *sharedBody) drop() {
	switch n := sb.refs.Add(-1); {
	case n == 0:
		bodies.put(sb.buf)
		sb.buf = nil
		sharedBodies.Put(sb)
	case n < 0:
		panic("gearman: shared body dropped once too often")
	}
}
