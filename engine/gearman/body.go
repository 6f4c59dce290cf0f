package gearman

import "sync"

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

// ReleasePayload is the sched.Config.Release hook for schedulers that
// Gearman servers submit to.
func ReleasePayload(payload []byte) { bodies.put(payload) }

// bodyScan bounds how many free buffers get looks at.
const bodyScan = 8

// get returns an empty buffer with room for at least n bytes.
func (p *bodyPool) get(n int) []byte {
	p.mu.Lock()
	for i := len(p.free) - 1; i >= max(0, len(p.free)-bodyScan); i-- {
		// A buffer far larger than asked for would sit idle in a small packet.
		if b := p.free[i]; cap(b) >= n && cap(b) <= 2*n {
			last := len(p.free) - 1
			p.free[i] = p.free[last]
			p.free[last] = nil
			p.free = p.free[:last]
			p.bytes -= cap(b)
			p.mu.Unlock()
			return b
		}
	}
	p.mu.Unlock()
	return make([]byte, 0, n+n/16)
}

// put offers b for reuse; small buffers, and any beyond the limit, are
// left to the garbage collector.
func (p *bodyPool) put(b []byte) {
	if cap(b) <= largeBody {
		return
	}
	p.mu.Lock()
	if p.bytes+cap(b) <= p.limit {
		p.free = append(p.free, b[:0])
		p.bytes += cap(b)
	}
	p.mu.Unlock()
}
