package gearman

import (
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	codec "switchyard/codec/gearman"
	"switchyard/engine/internal/gnetloop"
	"switchyard/engine/internal/tlsgate"
	"switchyard/sched"
)

// gearLoop is Gearman's part of what a gnet event loop's connections
// share (gnetloop.Loop.Data), touched only by that loop's goroutine.
type gearLoop struct {
	// body is the large packet an update this loop's goroutine is
	// reporting lies in, while the scheduler hands it to listeners:
	// connections of other loops keep a reference to it instead of a copy.
	body *sharedBody
	// scratch takes the bytes of refused packets, thrown away.
	scratch []byte
	// large counts the loop's connections reading a large packet, which
	// share one event's reads (readMax).
	large int
}

// readMax is what one event reads of a large packet straight from the
// socket, beyond the gnetRead bytes gnet read before the event, so
// that peers streaming bodies as fast as loopback allows do not hold
// their event loop, and the other connections on it, for long: the rest
// is read on the next turn (gnet's poller is level triggered, so the
// socket's unread bytes bring it back). A turn of the loop reads loopRead
// of large packets in all, gnet's reads counted, shared equally by the
// connections reading them and at most 1 MiB each beyond gnet's; with
// more than loopRead/gnetRead of them, gnet's reads alone are the turn.
// Every byte lands on a page of its packet's buffer touched for the
// first time, and a page fault costs up to 16 µs on a VM, so a turn's
// length, which another connection's ECHO waits out, follows its bytes.
// Forty connections each sending 8 MiB (TestFaultPartialPackets) held
// that ECHO for 90-120 ms at 256 KiB each; at 64 KiB each on top of
// gnet's, the floor that was here before, for 42-68 ms, once 120 ms; with
// gnet's reads counted, for 18-60 ms (median 22 ms against 46, eight
// alternating pairs).
func (gl *gearLoop) readMax() int {
	return min(max(loopRead/max(gl.large, 1)-gnetRead, 0), 1<<20)
}

// gnetRead is what gnet reads from a readable socket before each event.
const gnetRead = gnetloop.ReadBuffer

// loopRead lets a lone large packet of 1 MiB and its header in at one
// event, as before gnet's read was counted (payload-1m).
const loopRead = 1<<20 + gnetRead

// scratchOf is the loop's scratch buffer, up to n bytes of it.
func (gl *gearLoop) scratchOf(n int) []byte {
	if gl.scratch == nil {
		gl.scratch = make([]byte, largeBody)
	}
	return gl.scratch[:min(n, len(gl.scratch))]
}

// loopOf is a loop's Gearman state.
func loopOf(lp *gnetloop.Loop) *gearLoop {
	gl, _ := lp.Data.(*gearLoop)
	if gl == nil {
		gl = &gearLoop{}
		lp.Data = gl
	}
	return gl
}

// conn is one Gearman connection: a client, a worker, an admin, or all
// three, as gearmand allows, on the connection core (gnetloop.Conn: Out,
// Held, Paused, the hand-offs, the same-loop fast path: an update or
// wake-up whose Origin is the target's own loop is written straight into
// its Out). Fields without a comment belong to the connection's event
// loop.
type conn struct {
	*gnetloop.Conn
	srv *Server
	gl  *gearLoop
	ip  string
	tls *tlsgate.Peer // the TLS side of a connection from a TLS listener

	client   *sched.Client // created on the first submit
	worker   *sched.Worker // created on the first worker packet
	ps       codec.Parser  // resumes the frame that gnet's buffer ends inside
	pkt      codec.Packet
	upd      sched.Update
	iovs     [][]byte  // writeTails' scratch
	spare    []outTail // the other half of tails, see takeHandOffs
	body     []byte    // a large packet being read whole, see readBody
	bodyLen  int       // the length of that packet; 0: none is being read
	reserved int64     // the budget body's buffer took
	refused  bool      // the budget refused it: its bytes are thrown away
	got      int       // ... got of them so far
	own      []byte    // the buffer cn.pkt lies in, when a submit may keep it

	onStore     func(uint64, error) // cn.stored, made once
	take, apply func()              // takeHandOffs, applyHandOffs, made once
	gotTails    []outTail           // this event's share of tails
	gotAcks     []error             // ... and of acks
	base        int                 // where the Outbox lands in Out this event

	exceptions atomic.Bool // forward WORK_EXCEPTION (read by Notify)

	// Under Lock: what other goroutines hand to this connection, beside
	// the core's Outbox: listener updates, gathered so a burst costs one
	// gnet wake.
	tails    []outTail // large payloads that follow parts of Outbox
	acks     []error   // the store's answers to held JOB_CREATEDs, in order
	ackSpare []error
	clientID []byte // SET_CLIENT_ID, read by "workers" on other loops
}

// outTail is a large payload handed to a connection by reference: it
// follows Outbox[:at], and body is held until it is written.
type outTail struct {
	at   int
	data []byte
	body *sharedBody
}

// Traffic runs on the connection's loop for new bytes and for hand-offs
// (gnetloop.Session).
func (cn *conn) Traffic() gnet.Action {
	cn.Receive(cn.take, cn.apply)
	action := gnet.None
	direct := 0 // bytes of large packets read straight from the socket this event
	for {
		if cn.bodyLen > 0 {
			done, ok := cn.readBody(&direct)
			if !ok {
				// The peer left mid-packet. Replies this event made for
				// other connections must still go out (Finish).
				action = gnet.Close
				break
			}
			if !done {
				break
			}
			if !cn.bodyPacket() {
				action = gnet.Close
				break
			}
		}
		if action = cn.parse(); action != gnet.None || cn.bodyLen == 0 {
			break
		}
	}
	return cn.Finish(action)
}

// takeHandOffs runs under Lock at the start of an event: the tails and
// the store's answers become this event's, Notify appending to the other
// arrays meanwhile.
func (cn *conn) takeHandOffs() {
	cn.base = len(cn.Out) // where the Outbox lands
	cn.gotTails = cn.tails
	if len(cn.gotTails) > 0 {
		cn.tails, cn.spare = cn.spare, nil
	}
	cn.gotAcks = cn.acks
	cn.acks = cn.ackSpare[:0]
	cn.ackSpare = cn.gotAcks
}

// applyHandOffs writes the large payloads in their places and lets the
// JOB_CREATEDs the store answered go, before an off-loop listing.
func (cn *conn) applyHandOffs() {
	if tails := cn.gotTails; len(tails) > 0 {
		cn.writeTails(cn.base, tails)
		clear(tails)
		cn.spare = tails[:0]
		cn.gotTails = nil
	}
	cn.Out = cn.Held.Release(cn.Out, cn.gotAcks, queueError)
	cn.gotAcks = nil
}

// parse handles every whole frame gnet holds. A packet larger than
// largeBody whose header has arrived is moved into cn.body and finished by
// readBody.
//
// A frame that arrives over many events is resumed, never parsed again from
// its start, and gnet's buffer is not peeked (which, across its ring's
// seam, copies) whole at every event: a packet waits in gnet's buffer,
// untouched, until its header's length is there; a text line, whose length
// nothing says, is taken out of gnet's buffer into the parser's as it comes,
// so that each event peeks only new bytes.
func (cn *conn) parse() gnet.Action {
	n := cn.C.InboundBuffered()
	if n == 0 || n < cn.ps.Need() || cn.Paused {
		return gnet.None
	}
	action := gnet.None
	buf, _ := cn.C.Peek(n)
	used := 0
	for used < len(buf) {
		consumed, frame, err := cn.ps.Parse(buf[used:], &cn.pkt)
		if err != nil && !frame {
			// The stream cannot be resynchronised: say why and hang up.
			cn.Out = appendStreamError(cn.Out, err)
			action = gnet.Close
			break
		}
		used += consumed
		if !frame {
			// The frame is not whole: a line's start went to the parser, a
			// packet waits for its bytes, in gnet's buffer or, if large, in
			// its own.
			if consumed == 0 && cn.ps.Need() > largeBody {
				cn.bodyLen = cn.ps.Need()
				cn.gl.large++
				cn.startBody(buf[used:])
				cn.ps.Reset()
				used = len(buf)
			}
			break
		}
		if err != nil {
			cn.missingArgs(&cn.pkt)
			action = gnet.Close
			break
		}
		if cn.pkt.Text {
			cn.admin(&cn.pkt)
			if cn.Paused {
				break // the rest waits in gnet's buffer for the listing
			}
		} else {
			cn.packet(&cn.pkt)
		}
	}
	if used > 0 { // gnet's Discard(0) would drop everything
		cn.C.Discard(used)
	}
	return action
}

// largeBody is the packet size above which the rest of a packet is read
// from the socket straight into its own buffer (cn.body), as gearmand does,
// instead of through gnet's 64 KiB reads and ring buffer and then a copy
// into the job: payload-1m does three fewer copies of every megabyte.
const largeBody = 64 << 10

// startBody begins assembling a large packet (cn.bodyLen bytes) from its
// first bytes, prefix, in a pooled buffer that holds it all if there is
// one, else in one sized for what has arrived (bodyCap). The buffer is
// taken from the memory budget; if the budget cannot give it, the packet
// is refused (refuseBody).
func (cn *conn) startBody(prefix []byte) {
	b := bodies.take(cn.bodyLen)
	if b == nil {
		b = newBody(bodyCap(cn.bodyLen, len(prefix)))
	}
	if !cn.Hold().Take(int64(cap(b))) {
		bodies.put(b)
		cn.refuseBody(len(prefix))
		return
	}
	cn.reserved = int64(cap(b))
	cn.body = append(b, prefix...)
}

// growBody makes room in cn.body for at least n more bytes, or refuses the
// packet if the memory budget cannot give them. The buffer grows without
// a copy (see newBody).
func (cn *conn) growBody(n int) {
	c := cap(cn.body)
	for c-len(cn.body) < n {
		c = bodyCap(cn.bodyLen, c)
	}
	if c == cap(cn.body) {
		return
	}
	if !cn.Hold().Take(int64(c - cap(cn.body))) {
		cn.refuseBody(len(cn.body))
		return
	}
	cn.reserved += int64(c - cap(cn.body))
	cn.body = growBody(cn.body, c)
}

// refuseBody gives up the large packet being read, got bytes of it read,
// because the memory budget is spent: the rest is read and thrown away,
// and the peer is answered with an error once it has all been sent, so
// that the connection goes on (refused says which).
func (cn *conn) refuseBody(got int) {
	cn.dropBody()
	cn.refused, cn.got = true, got
}

// dropBody lets the packet's buffer go, back to the budget.
func (cn *conn) dropBody() {
	if cn.body != nil {
		bodies.put(cn.body)
	}
	cn.body = nil
	cn.Hold().Give(cn.reserved)
	cn.reserved = 0
}

// have is how much of the large packet has arrived.
func (cn *conn) have() int {
	if cn.refused {
		return cn.got
	}
	return len(cn.body)
}

// readBody moves the large packet's bytes into cn.body (or, refused, into
// the loop's scratch): first what gnet has buffered, then straight from
// the socket until it would block or this event has read the loop's
// readMax that way (counted in direct). done says the packet is whole;
// !ok that the connection failed or hit EOF.
func (cn *conn) readBody(direct *int) (done, ok bool) {
	for cn.have() < cn.bodyLen {
		var room []byte
		if !cn.refused {
			if len(cn.body) == cap(cn.body) {
				cn.growBody(min(max(cn.C.InboundBuffered(), 1), cn.bodyLen-len(cn.body)))
			}
		}
		if cn.refused {
			room = cn.gl.scratchOf(cn.bodyLen - cn.got)
		} else {
			// Never past the packet: its successors belong to gnet's reads.
			room = cn.body[len(cn.body):min(cap(cn.body), cn.bodyLen)]
		}
		var n int
		var err error
		if b := cn.C.InboundBuffered(); b > 0 {
			n, _ = cn.C.Read(room[:min(b, len(room))])
		} else {
			most := cn.gl.readMax()
			if *direct >= most {
				return false, true // the others' turn; the socket still has bytes
			}
			n, err = unix.Read(cn.Fd(), room[:min(len(room), most-*direct)])
			*direct += max(n, 0)
		}
		switch {
		case n > 0 && cn.refused:
			cn.got += n
		case n > 0:
			cn.body = cn.body[:len(cn.body)+n]
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			return false, true
		default: // EOF or a socket error
			return false, false
		}
	}
	return true, true
}

// bodyPacket handles the large packet assembled in cn.body. The buffer is
// the packet's alone, so a submit hands it to the job instead of copying;
// any other packet is done with it when its handler returns. A refused
// one is answered with the memory budget's error. !ok: the packet is
// missing arguments and the connection must close.
func (cn *conn) bodyPacket() (ok bool) {
	if cn.refused {
		cn.refused, cn.got, cn.bodyLen = false, 0, 0
		cn.gl.large--
		cn.Out = codec.AppendError(cn.Out, "MEMORY_ALLOCATION_FAILURE", "The server's memory budget is spent: packet refused")
		return true
	}
	body := cn.body
	// The packet is whole: it is no longer the peer's to hold. A job that
	// keeps the buffer counts it as queued memory.
	cn.Hold().Give(cn.reserved)
	cn.body, cn.bodyLen, cn.reserved = nil, 0, 0
	cn.gl.large--
	if n, err := codec.Parse(body, cn.srv.cfg.MaxPacket, &cn.pkt); err != nil || n != len(body) {
		cn.missingArgs(&cn.pkt)
		bodies.put(body)
		cn.pkt = codec.Packet{}
		return false
	}
	cn.own = body
	cn.packet(&cn.pkt)
	if cn.own != nil { // not given away
		bodies.put(body)
	}
	cn.own = nil
	cn.pkt = codec.Packet{} // no reference into a buffer now reused
	return true
}

// missingArgs notes a whole packet with fewer arguments than its type
// takes; the caller closes the connection, without a reply. gearmand 1.1.20
// reads the missing arguments on into the bytes that follow the packet:
// once more bytes come it closes without a reply (a type with a data part:
// the length left for the data goes below zero and cannot be allocated) or
// never answers again (the others), and a lone packet waits. A peer that
// sent one, such as a Perl worker's WORK_COMPLETE with a handle and no
// result, sees its connection drop and reconnects; an ERROR reply would
// make it give up instead.
func (cn *conn) missingArgs(p *codec.Packet) {
	cn.srv.log.Sugar().Infof("closing %s fd %d: %v packet is missing arguments", cn.ip, cn.Fd(), p.Type)
}

// largeTail is the payload size above which a reply is written with
// writev straight from where the payload lies, instead of being copied
// into the reply buffer first.
const largeTail = 64 << 10

// maxIov bounds the slices of one writev: the kernel takes at most
// IOV_MAX (1024), and gnet closes the connection on EINVAL.
const maxIov = 256

// writeTails writes the replies in cn.Out together with the large payloads
// another loop handed over by reference (tails, at offsets from base in
// cn.Out), straight from their buffers with writev, and lets the buffers
// go. gnet copies what the socket does not take, so a buffer may be reused
// as soon as Writev returns. What follows the last payload stays in cn.Out.
// Replies that wait for the store take copies, to wait with the rest.
func (cn *conn) writeTails(base int, tails []outTail) {
	if cn.Held.Holding() {
		n := len(cn.Out)
		for _, t := range tails {
			n += len(t.data)
		}
		out := make([]byte, 0, n)
		prev := 0
		for _, t := range tails {
			out = append(out, cn.Out[prev:base+t.at]...)
			out = append(out, t.data...)
			prev = base + t.at
			t.body.drop()
		}
		cn.Out = append(out, cn.Out[prev:]...)
		return
	}
	iov := cn.iovs[:0]
	prev := 0
	for _, t := range tails {
		iov = append(iov, cn.Out[prev:base+t.at], t.data)
		prev = base + t.at
		if len(iov) >= maxIov {
			cn.C.Writev(iov)
			clear(iov)
			iov = iov[:0]
		}
	}
	if len(iov) > 0 {
		cn.C.Writev(iov)
		clear(iov)
	}
	cn.iovs = iov[:0]
	cn.Out = cn.Out[:copy(cn.Out, cn.Out[prev:])]
	for _, t := range tails {
		t.body.drop()
	}
}

func appendStreamError(dst []byte, err error) []byte {
	switch err {
	case codec.ErrBadMagic:
		return codec.AppendError(dst, "INVALID_MAGIC", "Request magic expected")
	case codec.ErrTooLarge:
		return codec.AppendError(dst, "ARGUMENT_TOO_LARGE", "Packet exceeds the maximum packet size")
	case codec.ErrLineTooLong:
		return append(dst, "ERR LINE_TOO_LONG Line+too+long\r\n"...)
	}
	return codec.AppendError(dst, "UNKNOWN_STATE", err.Error())
}

// Wake implements sched.Waker: a sleeping worker gets a NOOP, unless a
// drain hands out no more work.
func (cn *conn) Wake(origin any) {
	if cn.srv.loop.Draining() {
		return
	}
	if cn.Local(origin) {
		cn.Out = appendNoop(cn.Out)
		return
	}
	if cn.Open() {
		cn.Outbox = appendNoop(cn.Outbox)
		cn.Send()
	}
}

func appendNoop(dst []byte) []byte { return codec.AppendHeader(dst, codec.Res, codec.Noop, 0) }

// Notify implements sched.Listener: forward a worker's report to this client.
func (cn *conn) Notify(id uint64, u *sched.Update) {
	if cn.Local(u.Origin) {
		var tail []byte
		if cn.Out, tail = cn.appendUpdate(cn.Out, id, u, true); tail != nil {
			cn.WriteTail(tail)
		}
		return
	}
	if cn.Open() {
		// A large payload read into a buffer of its own is not copied:
		// the outbox keeps a reference, written from by cn's loop.
		body := reporting(u)
		var tail []byte
		cn.Outbox, tail = cn.appendUpdate(cn.Outbox, id, u, body != nil)
		if tail != nil {
			body.hold()
			cn.tails = append(cn.tails, outTail{at: len(cn.Outbox), data: tail, body: body})
		}
		cn.Send()
	}
}

// reporting returns the shared buffer u's payload lies in, if u comes
// from one of this engine's loops and carries a large packet's payload.
// The loop's field is read by its own goroutine: the scheduler calls
// Notify on the goroutine that reported u, which Origin names.
func reporting(u *sched.Update) *sharedBody {
	if lp, ok := u.Origin.(*gnetloop.Loop); ok {
		return loopOf(lp).body
	}
	return nil
}

// appendUpdate appends the packet for u. With split, a large payload is left
// out of dst and returned as tail, for the caller to write with writev.
func (cn *conn) appendUpdate(dst []byte, id uint64, u *sched.Update, split bool) (_, tail []byte) {
	var t codec.Type
	switch u.Kind {
	case sched.Data:
		t = codec.WorkData
	case sched.Warning:
		t = codec.WorkWarning
	case sched.Status:
		t = codec.WorkStatus
	case sched.Complete:
		t = codec.WorkComplete
	case sched.Fail:
		t = codec.WorkFail
	case sched.Exception:
		t = codec.WorkException
		if !cn.exceptions.Load() {
			t = codec.WorkFail
		}
	}
	dst, start := codec.Begin(dst, codec.Res, t)
	dst = cn.srv.handles.Append(dst, id)
	switch {
	case u.Kind == sched.Exception && t == codec.WorkFail:
		dst = append(dst, 0) // gearmand keeps the exception's separator
	case t == codec.WorkFail:
	case t == codec.WorkStatus:
		dst = append(dst, 0)
		dst = append(dst, u.Data...)
		dst = append(dst, 0)
		dst = append(dst, u.Den...)
	case split && len(u.Data) > largeTail:
		dst = append(dst, 0)
		return codec.EndTail(dst, start, len(u.Data)), u.Data
	default:
		dst = append(dst, 0)
		dst = append(dst, u.Data...)
	}
	return codec.End(dst, start), nil
}

// Closed implements gnetloop.Session: the connection is gone.
func (cn *conn) Closed() {
	cn.Lock()
	for _, t := range cn.tails {
		t.body.drop()
	}
	cn.tails = nil
	cn.Unlock()
	if cn.bodyLen > 0 { // a large packet cut short; the budget forgets the connection whole
		if cn.body != nil {
			bodies.put(cn.body)
			cn.body = nil
		}
		cn.bodyLen = 0
		cn.gl.large--
	}
	if cn.client != nil {
		cn.client.Close()
	}
	if cn.worker != nil {
		cn.worker.Close()
	}
	if cn.tls != nil {
		cn.tls.EngineClosed()
	}
}

func (cn *conn) id() []byte {
	cn.Lock()
	defer cn.Unlock()
	return cn.clientID
}

// workerRef returns the connection's worker for another goroutine's listing.
func (cn *conn) workerRef() *sched.Worker {
	cn.Lock()
	defer cn.Unlock()
	return cn.worker
}
