package periodic

import (
	"sync"

	"github.com/panjf2000/gnet/v2"

	codec "switchyard/codec/periodic"
	"switchyard/engine/held"
	"switchyard/sched"
)

// loop is what a gnet event loop's connections share. Only that loop's
// goroutine touches it, and a *loop is the Origin token this engine gives
// the scheduler: a wake-up carrying the target's own loop runs on that
// loop's goroutine, so the worker's grabs are answered at once and flushed
// at the end of the current event, with no cross-goroutine hand-off.
type loop struct {
	dirty []*conn // connections with replies from another connection's event
}

// Connection kinds, from the handshake's first byte.
const (
	kindNone   = 0
	kindClient = codec.TypeClient
	kindWorker = codec.TypeWorker
)

// conn is one Periodic connection, a client or a worker. Fields without a
// comment belong to the connection's event loop.
type conn struct {
	srv    *Server
	c      gnet.Conn
	lp     *loop
	kind   byte
	worker *sched.Worker // made at a worker's handshake; written under mu, for listings
	fd     int           // for listings
	peer   string        // for listings, see workerline.Peer
	msg    codec.Message
	out    []byte // replies built during one event, written at its end
	need   int    // bytes the next frame needs before parsing again
	dirty  bool   // queued on lp.dirty
	gone   bool   // closed (loop's view)
	paused bool   // a STATUS, DUMP or LOAD runs off the loop: read no more commands

	// grabs are the message ids of the GRAB_JOBs waiting for a job, oldest
	// first, packed into one buffer: ids[grabs[i]:grabs[i+1]].
	grabs   []int
	ids     []byte
	held    held.Queue                 // replies waiting for a durable store's answers, see stored.go
	ackIDs  [][]byte                   // the message ids of the SUCCESSes held, in order
	onStore func(uint64, error)        // cn.stored, made once
	onFail  func([]byte, error) []byte // cn.storeError, made once
	failID  []byte                     // the message id storeError answers

	grab     sched.Attempt
	job      codec.Job // decoded requests (its scratch buffer is reused)
	assigned codec.Job // the JOB_ASSIGN being written

	// mu guards what other goroutines hand to this connection.
	mu       sync.Mutex
	woken    bool    // the scheduler woke the worker: grab
	resumed  bool    // an off-loop command finished: read commands again
	failed   bool    // ... and the connection must close
	outbox   []byte  // replies made off the loop
	acks     []error // the store's answers to held SUCCESSes, in order
	wakeSent bool
	closed   bool
}

// traffic runs on the connection's loop for new bytes and for wakes.
func (cn *conn) traffic() gnet.Action {
	cn.mu.Lock()
	cn.wakeSent = false
	woken, resumed, failed := cn.woken, cn.resumed, cn.failed
	cn.woken, cn.resumed = false, false
	if len(cn.outbox) > 0 {
		cn.out = append(cn.out, cn.outbox...)
		cn.outbox = cn.outbox[:0]
	}
	acks := cn.acks
	cn.acks = nil
	cn.mu.Unlock()
	cn.releaseAcks(acks)
	if failed {
		cn.flush()
		return gnet.Close
	}
	if resumed {
		cn.paused = false
	}
	if woken {
		cn.serveGrabs()
	}
	action := cn.parse()
	if !cn.flush() {
		action = gnet.Close
	}
	// Replies this event produced for other connections of the loop.
	for i, d := range cn.lp.dirty {
		d.dirty = false
		if d != cn && !d.gone && !d.flush() {
			d.c.Close()
		}
		cn.lp.dirty[i] = nil
	}
	cn.lp.dirty = cn.lp.dirty[:0]
	return action
}

// parse handles every whole frame gnet holds, then discards them.
func (cn *conn) parse() gnet.Action {
	n := cn.c.InboundBuffered()
	if n == 0 || n < cn.need || cn.paused {
		return gnet.None
	}
	buf, _ := cn.c.Peek(n)
	used := 0
	action := gnet.None
	for used < len(buf) && !cn.paused {
		payload, consumed, need, err := codec.ParseFrame(buf[used:], codec.ReqMagic, cn.srv.cfg.MaxFrame)
		if err != nil {
			cn.srv.log.Sugar().Debugf("periodic: closing %s: %v", cn.c.RemoteAddr(), err)
			action = gnet.Close
			break
		}
		if consumed == 0 {
			cn.need = len(buf) - used + 1
			if need > 0 {
				cn.need = need
			}
			break
		}
		used += consumed
		if action = cn.frame(payload); action != gnet.None {
			break
		}
	}
	if used == len(buf) {
		cn.need = codec.HeaderSize
	}
	if used > 0 { // gnet's Discard(0) would drop everything
		cn.c.Discard(used)
	}
	return action
}

// frame handles one frame's payload: the handshake, then commands.
func (cn *conn) frame(payload []byte) gnet.Action {
	if cn.kind == kindNone {
		if len(payload) == 0 || payload[0] != kindClient && payload[0] != kindWorker {
			return gnet.Close // the real server hangs up on an unknown client type
		}
		cn.kind = payload[0]
		cn.onStore, cn.onFail = cn.stored, cn.storeError
		if cn.kind == kindWorker {
			w := cn.srv.sched.NewWorker(cn)
			cn.mu.Lock()
			cn.worker = w
			cn.mu.Unlock()
		}
		return gnet.None
	}
	if err := codec.ParseMessage(payload, &cn.msg); err != nil {
		return gnet.Close // the real server panics on these and drops the connection
	}
	if cn.kind == kindClient {
		return cn.clientCommand(&cn.msg)
	}
	return cn.workerCommand(&cn.msg)
}

// flush writes the pending replies; false means the peer is too far behind.
func (cn *conn) flush() bool {
	cn.out = cn.held.HoldBack(cn.out)
	if n := len(cn.out); n > 0 {
		cn.c.Write(cn.out)
		cn.out = cn.out[:0]
		if cap(cn.out) > 64<<10 && n < cap(cn.out)/4 {
			cn.out = nil // a burst must not pin its buffer on an idle connection
		}
	}
	if ob := cn.c.OutboundBuffered() + cn.held.Len(); ob > cn.srv.cfg.MaxOutbound {
		cn.srv.log.Sugar().Warnf("periodic: closing %s: %d bytes of replies unread", cn.c.RemoteAddr(), ob)
		return false
	}
	return true
}

// local reports whether origin is this connection's own loop (so the caller
// runs on the goroutine that owns cn.out) and if so queues cn to be flushed
// at the end of the current event.
func (cn *conn) local(origin any) bool {
	if lp, ok := origin.(*loop); !ok || lp != cn.lp || cn.gone {
		return false
	}
	if !cn.dirty {
		cn.dirty = true
		cn.lp.dirty = append(cn.lp.dirty, cn)
	}
	return true
}

// Wake implements sched.Waker: a job may be waiting for this worker's
// GRAB_JOBs. They are answered on the connection's own loop.
func (cn *conn) Wake(origin any) {
	if cn.local(origin) {
		cn.serveGrabs()
		return
	}
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return
	}
	cn.woken = true
	cn.kick()
}

// kick wakes the loop once per burst. Caller holds cn.mu; kick releases it.
func (cn *conn) kick() {
	wake := !cn.wakeSent
	cn.wakeSent = true
	cn.mu.Unlock()
	if wake {
		cn.c.Wake(nil)
	}
}

func (cn *conn) close() {
	cn.gone = true
	cn.mu.Lock()
	cn.closed = true
	cn.outbox = nil
	cn.mu.Unlock()
	if cn.worker != nil {
		cn.worker.Close() // its jobs go back to their queues
	}
}
