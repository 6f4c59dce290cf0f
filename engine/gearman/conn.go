package gearman

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	codec "switchyard/codec/gearman"
	"switchyard/engine/held"
	"switchyard/engine/tlsgate"
	"switchyard/sched"
)

// loop is what a gnet event loop's connections share. It is only touched
// by that loop's goroutine, and a *loop is the Origin token this engine
// gives the scheduler: an update or wake-up carrying the target's own loop
// comes from that loop's goroutine, so it is written straight into the
// target's reply buffer and flushed at the end of the current event, with
// no cross-goroutine hand-off and no eventfd wake.
type loop struct {
	dirty []*conn // connections with replies from another connection's event
	// body is the large packet an update this loop's goroutine is
	// reporting lies in, while the scheduler hands it to listeners:
	// connections of other loops keep a reference to it instead of a copy.
	body *sharedBody
}

// conn is one Gearman connection: a client, a worker, an admin, or all
// three, as gearmand allows. Fields without a comment belong to the
// connection's event loop.
type conn struct {
	srv *Server
	c   gnet.Conn
	lp  *loop
	fd  int
	ip  string
	tls *tlsgate.Peer // the TLS side of a connection from a TLS listener

	client  *sched.Client // created on the first submit
	worker  *sched.Worker // created on the first worker packet
	ps      codec.Parser  // resumes the frame that gnet's buffer ends inside
	pkt     codec.Packet
	upd     sched.Update
	out     []byte // replies built during one event, written at its end
	iov     [2][]byte
	iovs    [][]byte  // writeTails' scratch
	spare   []outTail // the other half of tails, see traffic
	body    []byte    // a large packet being read whole, see readBody
	bodyLen int       // the length of that packet
	own     []byte    // the buffer cn.pkt lies in, when a submit may keep it
	dirty   bool      // queued on lp.dirty
	gone    bool      // closed (loop's view)
	paused  bool      // an admin listing is being built: read no more commands

	held    held.Queue          // replies waiting for a durable store's answers, see stored.go
	onStore func(uint64, error) // cn.stored, made once

	exceptions atomic.Bool // forward WORK_EXCEPTION (read by Notify)

	// mu guards what other goroutines hand to this connection: listener
	// updates and wake-ups, gathered so a burst costs one gnet wake.
	mu       sync.Mutex
	outbox   []byte
	tails    []outTail // large payloads that follow parts of outbox
	acks     []error   // the store's answers to held JOB_CREATEDs, in order
	ackSpare []error
	wakeSent bool
	closed   bool
	clientID []byte   // SET_CLIENT_ID, read by "workers" on other loops
	listed   []byte   // an admin listing built off the loop, see list
	late     *os.File // where a listing goes once the connection is closed, see orphan
}

// orphan keeps the socket of a connection that closes while its admin
// listing is being built, so the listing still reaches the peer: clients
// such as nc -N send a command and half-close, and gnet closes at EOF
// where gearmand answers first. Not when replies gnet could not write yet
// are pending, since they would come after the listing.
func (cn *conn) orphan() *os.File {
	if !cn.paused || cn.c.OutboundBuffered() > 0 {
		return nil
	}
	fd, err := unix.Dup(cn.fd)
	if err != nil {
		return nil
	}
	unix.CloseOnExec(fd)
	// Non-blocking like gnet's, so os.File writes through Go's poller and
	// the write deadline below holds.
	return os.NewFile(uintptr(fd), "gearman-admin")
}

// orphanTimeout bounds how long a closed connection's listing may take to
// write: a peer that never reads does not keep the goroutine.
const orphanTimeout = 30 * time.Second

func writeOrphan(f *os.File, b []byte) {
	f.SetWriteDeadline(time.Now().Add(orphanTimeout))
	f.Write(b)
	f.Close()
}

// outTail is a large payload handed to a connection by reference: it
// follows outbox[:at], and body is held until it is written.
type outTail struct {
	at   int
	data []byte
	body *sharedBody
}

// traffic runs on the connection's loop for new bytes and for wakes.
func (cn *conn) traffic() gnet.Action {
	cn.mu.Lock()
	cn.wakeSent = false
	base := len(cn.out) // where the outbox lands in cn.out
	tails := cn.tails
	if len(tails) > 0 {
		// Notify appends to the other array while these are written.
		cn.tails, cn.spare = cn.spare, nil
	}
	if len(cn.outbox) > 0 {
		if len(cn.out) == 0 {
			cn.out, cn.outbox = cn.outbox, cn.out[:0] // swap, no copy
		} else {
			cn.out = append(cn.out, cn.outbox...)
			cn.outbox = cn.outbox[:0]
		}
	}
	listed := cn.listed
	cn.listed = nil
	acks := cn.acks
	cn.acks = cn.ackSpare[:0]
	cn.ackSpare = acks
	cn.mu.Unlock()
	if len(tails) > 0 {
		cn.writeTails(base, tails)
		clear(tails)
		cn.spare = tails[:0]
	}
	cn.out = cn.held.Release(cn.out, acks, queueError)
	if listed != nil {
		// After what the outbox brought meanwhile, straight to gnet, which
		// copies what the socket does not take: the connection keeps no
		// buffer the size of the listing. Then parse below answers the
		// commands that waited for it.
		cn.writeTail(listed)
		cn.paused = false
	}

	action := gnet.None
	for {
		if cn.body != nil {
			done, ok := cn.readBody()
			if !ok {
				// The peer left mid-packet. Replies this event made for
				// other connections must still go out below.
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
		if action = cn.parse(); action != gnet.None || cn.body == nil {
			break
		}
	}
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
	n := cn.c.InboundBuffered()
	if n == 0 || n < cn.ps.Need() || cn.paused {
		return gnet.None
	}
	action := gnet.None
	buf, _ := cn.c.Peek(n)
	used := 0
	for used < len(buf) {
		consumed, frame, err := cn.ps.Parse(buf[used:], &cn.pkt)
		if err != nil && !frame {
			// The stream cannot be resynchronised: say why and hang up.
			cn.out = appendStreamError(cn.out, err)
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
			if cn.paused {
				break // the rest waits in gnet's buffer for the listing
			}
		} else {
			cn.packet(&cn.pkt)
		}
	}
	if used > 0 { // gnet's Discard(0) would drop everything
		cn.c.Discard(used)
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
// one, else in one sized for what has arrived (bodyCap).
func (cn *conn) startBody(prefix []byte) {
	b := bodies.take(cn.bodyLen)
	if b == nil {
		b = make([]byte, 0, bodyCap(cn.bodyLen, len(prefix)))
	}
	cn.body = append(b, prefix...)
}

// growBody makes room in cn.body for at least n more bytes. The old buffer
// is left to the garbage collector: the pool wants whole packets' buffers.
func (cn *conn) growBody(n int) {
	c := cap(cn.body)
	for c-len(cn.body) < n {
		c = bodyCap(cn.bodyLen, c)
	}
	if c == cap(cn.body) {
		return
	}
	cn.body = append(make([]byte, 0, c), cn.body...)
}

// readBody moves the large packet's bytes into cn.body: first what gnet has
// buffered, then straight from the socket until it would block. done says
// the packet is whole; !ok that the connection failed or hit EOF.
func (cn *conn) readBody() (done, ok bool) {
	if n := cn.c.InboundBuffered(); n > 0 {
		take := min(n, cn.bodyLen-len(cn.body))
		cn.growBody(take)
		m, _ := cn.c.Read(cn.body[len(cn.body) : len(cn.body)+take])
		cn.body = cn.body[:len(cn.body)+m]
	}
	for len(cn.body) < cn.bodyLen {
		if len(cn.body) == cap(cn.body) {
			cn.growBody(1)
		}
		// Never past the packet: its successors belong to gnet's reads.
		room := cn.body[len(cn.body):min(cap(cn.body), cn.bodyLen)]
		n, err := unix.Read(cn.fd, room)
		switch {
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
// any other packet is done with it when its handler returns. !ok: the
// packet is missing arguments and the connection must close.
func (cn *conn) bodyPacket() (ok bool) {
	body := cn.body
	cn.body, cn.bodyLen = nil, 0
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
	cn.srv.log.Sugar().Infof("closing %s fd %d: %v packet is missing arguments", cn.ip, cn.fd, p.Type)
}

// largeTail is the payload size above which a reply is written with
// writev straight from where the payload lies, instead of being copied
// into the reply buffer first.
const largeTail = 64 << 10

// writeTail writes the pending replies followed by tail, in one writev.
// Only the connection's own loop may call it.
func (cn *conn) writeTail(tail []byte) {
	if cn.held.Holding() {
		cn.out = append(cn.out, tail...) // it waits with the rest
		return
	}
	cn.iov[0], cn.iov[1] = cn.out, tail
	cn.c.Writev(cn.iov[:])
	cn.iov = [2][]byte{}
	cn.out = cn.out[:0]
}

// maxIov bounds the slices of one writev: the kernel takes at most
// IOV_MAX (1024), and gnet closes the connection on EINVAL.
const maxIov = 256

// writeTails writes the replies in cn.out together with the large payloads
// another loop handed over by reference (tails, at offsets from base in
// cn.out), straight from their buffers with writev, and lets the buffers
// go. gnet copies what the socket does not take, so a buffer may be reused
// as soon as Writev returns. What follows the last payload stays in cn.out.
// Replies that wait for the store take copies, to wait with the rest.
func (cn *conn) writeTails(base int, tails []outTail) {
	if cn.held.Holding() {
		n := len(cn.out)
		for _, t := range tails {
			n += len(t.data)
		}
		out := make([]byte, 0, n)
		prev := 0
		for _, t := range tails {
			out = append(out, cn.out[prev:base+t.at]...)
			out = append(out, t.data...)
			prev = base + t.at
			t.body.drop()
		}
		cn.out = append(out, cn.out[prev:]...)
		return
	}
	iov := cn.iovs[:0]
	prev := 0
	for _, t := range tails {
		iov = append(iov, cn.out[prev:base+t.at], t.data)
		prev = base + t.at
		if len(iov) >= maxIov {
			cn.c.Writev(iov)
			clear(iov)
			iov = iov[:0]
		}
	}
	if len(iov) > 0 {
		cn.c.Writev(iov)
		clear(iov)
	}
	cn.iovs = iov[:0]
	cn.out = cn.out[:copy(cn.out, cn.out[prev:])]
	for _, t := range tails {
		t.body.drop()
	}
}

// flush writes the pending replies; false means the peer is too far behind
// and the connection should go.
func (cn *conn) flush() bool {
	cn.out = cn.held.HoldBack(cn.out)
	if n := len(cn.out); n > 0 {
		cn.c.Write(cn.out)
		cn.out = cn.out[:0]
		// Keep the buffer for the next event, unless a burst grew it far
		// past what this one needed: idle connections must not pin megabytes.
		if cap(cn.out) > 64<<10 && n < cap(cn.out)/4 {
			cn.out = nil
		}
	}
	if ob := cn.c.OutboundBuffered() + cn.held.Len(); ob > cn.srv.cfg.MaxOutbound {
		cn.srv.log.Sugar().Warnf("closing %s fd %d: %d bytes of replies unread", cn.ip, cn.fd, ob)
		return false
	}
	return true
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

// local reports whether origin is this connection's own loop, i.e. the
// caller runs on the goroutine that owns cn.out. If so it also queues cn
// to be flushed at the end of the current event.
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

// openOutbox locks the outbox for a hand-off from another goroutine; false
// (and no lock held) means the connection is gone. sendOutbox unlocks it and
// wakes the loop once per burst.
func (cn *conn) openOutbox() bool {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return false
	}
	return true
}

func (cn *conn) sendOutbox() {
	wake := !cn.wakeSent
	cn.wakeSent = true
	cn.mu.Unlock()
	if wake {
		cn.srv.wakes.Add(1)
		cn.c.Wake(nil)
	}
}

// Wake implements sched.Waker: a sleeping worker gets a NOOP, unless a
// drain hands out no more work.
func (cn *conn) Wake(origin any) {
	if cn.srv.draining.Load() {
		return
	}
	if cn.local(origin) {
		cn.out = appendNoop(cn.out)
		return
	}
	if cn.openOutbox() {
		cn.outbox = appendNoop(cn.outbox)
		cn.sendOutbox()
	}
}

func appendNoop(dst []byte) []byte { return codec.AppendHeader(dst, codec.Res, codec.Noop, 0) }

// Notify implements sched.Listener: forward a worker's report to this client.
func (cn *conn) Notify(id uint64, u *sched.Update) {
	if cn.local(u.Origin) {
		var tail []byte
		if cn.out, tail = cn.appendUpdate(cn.out, id, u, true); tail != nil {
			cn.writeTail(tail)
		}
		return
	}
	if cn.openOutbox() {
		// A large payload read into a buffer of its own is not copied:
		// the outbox keeps a reference, written from by cn's loop.
		body := reporting(u)
		var tail []byte
		cn.outbox, tail = cn.appendUpdate(cn.outbox, id, u, body != nil)
		if tail != nil {
			body.hold()
			cn.tails = append(cn.tails, outTail{at: len(cn.outbox), data: tail, body: body})
		}
		cn.sendOutbox()
	}
}

// reporting returns the shared buffer u's payload lies in, if u comes
// from one of this engine's loops and carries a large packet's payload.
// The loop's field is read by its own goroutine: the scheduler calls
// Notify on the goroutine that reported u, which Origin names.
func reporting(u *sched.Update) *sharedBody {
	if lp, ok := u.Origin.(*loop); ok {
		return lp.body
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

func (cn *conn) close() {
	cn.gone = true
	orphan := cn.orphan()
	cn.mu.Lock()
	cn.closed = true
	cn.outbox = nil
	for _, t := range cn.tails {
		t.body.drop()
	}
	cn.tails = nil
	listed := cn.listed
	cn.listed = nil
	if listed == nil {
		cn.late = orphan // the listing's goroutine writes it there
	}
	cn.mu.Unlock()
	if listed != nil && orphan != nil {
		go writeOrphan(orphan, listed)
	}
	if cn.client != nil {
		cn.client.Close()
	}
	if cn.worker != nil {
		cn.worker.Close()
	}
}

func (cn *conn) id() []byte {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.clientID
}

// workerRef returns the connection's worker for another goroutine's listing.
func (cn *conn) workerRef() *sched.Worker {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.worker
}
