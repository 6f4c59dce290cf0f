package periodic

import (
	"github.com/panjf2000/gnet/v2"

	codec "switchyard/codec/periodic"
	"switchyard/engine/internal/gnetloop"
	"switchyard/engine/internal/tlsgate"
	"switchyard/sched"
)

// Connection kinds, from the handshake's first byte.
const (
	kindNone   = 0
	kindClient = codec.TypeClient
	kindWorker = codec.TypeWorker
)

// conn is one Periodic connection, a client or a worker, on the
// connection core (gnetloop.Conn: Out, Held, Paused, the hand-offs). Its
// loop (Loop) is the Origin token this engine gives the scheduler: a
// wake-up carrying the target's own loop runs on that loop's goroutine, so
// the worker's grabs are answered at once and flushed at the end of the
// current event. Fields without a comment belong to the connection's loop.
type conn struct {
	*gnetloop.Conn
	srv    *Server
	kind   byte
	worker *sched.Worker // made at a worker's handshake; written under Lock, for listings
	peer   string        // for listings, see workerline.Peer
	tls    *tlsgate.Peer // the TLS side of a connection from a tls:// listener
	msg    codec.Message
	need   int    // bytes the next frame needs before parsing again
	take   func() // takeHandOffs and applyHandOffs, made once
	apply  func()

	// grabs are the message ids of the GRAB_JOBs waiting for a job, oldest
	// first, packed into one buffer: ids[grabs[i]:grabs[i+1]].
	grabs   []int
	ids     []byte
	ackIDs  [][]byte                   // the message ids of the SUCCESSes held, in order
	onStore func(uint64, error)        // cn.stored, made once
	onFail  func([]byte, error) []byte // cn.storeError, made once
	failID  []byte                     // the message id storeError answers

	grab     sched.Attempt
	job      codec.Job // decoded requests (its scratch buffer is reused)
	assigned codec.Job // the JOB_ASSIGN being written

	// Under Lock: what other goroutines hand to this connection.
	woken bool    // the scheduler woke the worker: grab
	acks  []error // the store's answers to held SUCCESSes, in order

	// This event's share of what was handed over (takeHandOffs).
	wake   bool
	gotten []error
}

// Traffic runs on the connection's loop for new bytes and for hand-offs
// (gnetloop.Session).
func (cn *conn) Traffic() gnet.Action {
	cn.Receive(cn.take, cn.apply)
	if cn.wake {
		cn.wake = false
		cn.serveGrabs()
	}
	return cn.Finish(cn.parse())
}

// takeHandOffs runs under Lock at the start of an event: what other
// goroutines left becomes this event's.
func (cn *conn) takeHandOffs() {
	cn.gotten, cn.acks = cn.acks, nil
	cn.wake, cn.woken = cn.woken, false
}

// applyHandOffs puts the store's answers in place, before an off-loop
// answer's batch.
func (cn *conn) applyHandOffs() {
	cn.releaseAcks(cn.gotten)
	cn.gotten = nil
}

// parse handles every whole frame gnet holds, then discards them.
func (cn *conn) parse() gnet.Action {
	c := cn.C
	n := c.InboundBuffered()
	if n == 0 || n < cn.need || cn.Paused {
		return gnet.None
	}
	buf, _ := c.Peek(n)
	used := 0
	action := gnet.None
	for used < len(buf) && !cn.Paused {
		payload, consumed, need, err := codec.ParseFrame(buf[used:], codec.ReqMagic, cn.srv.cfg.MaxFrame)
		if err != nil {
			cn.srv.log.Sugar().Debugf("periodic: closing %s: %v", c.RemoteAddr(), err)
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
		c.Discard(used)
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
			gnetloop.Guarded(cn.Conn, &cn.worker, cn.srv.sched.NewWorker(cn))
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

// Wake implements sched.Waker: a job may be waiting for this worker's
// GRAB_JOBs. They are answered on the connection's own loop.
func (cn *conn) Wake(origin any) {
	if cn.Local(origin) {
		cn.serveGrabs()
		return
	}
	if cn.Open() {
		cn.woken = true
		cn.Send()
	}
}

// Closed implements gnetloop.Session: the worker's jobs go back to their
// queues.
func (cn *conn) Closed() {
	if cn.worker != nil {
		cn.worker.Close()
	}
	if cn.tls != nil {
		cn.tls.EngineClosed()
	}
}
