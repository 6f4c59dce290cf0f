package gnetloop

import (
	"os"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"switchyard/engine/budget"
	"switchyard/engine/internal/held"
)

// Loop is what a gnet event loop's connections share. Only that loop's
// goroutine touches it, and a *Loop is the Origin token a frontend gives
// the scheduler: a callback carrying the target connection's own loop runs
// on that loop's goroutine, so it writes straight into the connection's
// reply buffer, flushed at the end of the current event, with no
// cross-goroutine hand-off and no wake.
type Loop struct {
	dirty []*Conn // connections with replies from another connection's event
	// Data is the protocol's own per-loop state.
	Data any
}

// Conn is a connection's core, which its Session holds. Fields without a
// comment belong to the connection's event loop.
type Conn struct {
	C       gnet.Conn
	srv     *Server
	loop    *Loop
	session Session
	fd      int

	// Out is the replies built during one event, written at its end.
	Out []byte
	// Held keeps replies in order behind acknowledgements that wait for
	// the store (see engine/held).
	Held held.Queue
	// Paused: an answer is being built off the loop (OffLoop), so the
	// session reads no more requests until it resumes.
	Paused bool

	dirty bool // queued on loop.dirty
	gone  bool // closed (loop's view)
	iov   [2][]byte
	hold  *budget.Holder // nil without a budget

	// mu guards what other goroutines hand to the connection: Outbox and
	// whatever else a session keeps under Lock.
	mu sync.Mutex
	// Outbox is replies made off the loop, under Lock (Open).
	Outbox   []byte
	wakeSent bool
	closed   bool
	off      *offLoop // the answer being built off the loop, if any
}

// Fd is the connection's descriptor.
func (c *Conn) Fd() int { return c.fd }

// Loop is the connection's loop, the Origin token of callbacks from it.
func (c *Conn) Loop() *Loop { return c.loop }

// Server is the server the connection belongs to.
func (c *Conn) Server() *Server { return c.srv }

// Hold is the connection's share of the memory budget, for what the
// session reserves as it grows (a request body); nil without a budget
// (its methods then do nothing).
func (c *Conn) Hold() *budget.Holder { return c.hold }

// Gone tells whether the connection is closed (loop's view).
func (c *Conn) Gone() bool { return c.gone }

// Lock and Unlock guard what other goroutines hand to the connection.
func (c *Conn) Lock()   { c.mu.Lock() }
func (c *Conn) Unlock() { c.mu.Unlock() }

// Guarded sets *field to v under c's lock: for a session's field that
// other goroutines read under Lock (a listing reading its worker).
func Guarded[T any](c *Conn, field *T, v T) {
	c.mu.Lock()
	*field = v
	c.mu.Unlock()
}

// Local reports whether origin is this connection's own loop, i.e. the
// caller runs on the goroutine that owns Out. If so it also queues the
// connection to be flushed at the end of the current event.
func (c *Conn) Local(origin any) bool {
	if lp, ok := origin.(*Loop); !ok || lp != c.loop || c.gone {
		return false
	}
	if !c.dirty {
		c.dirty = true
		c.loop.dirty = append(c.loop.dirty, c)
	}
	return true
}

// Open locks the connection for a hand-off from another goroutine; false
// (and no lock held) means it is gone. Send unlocks it and wakes the loop
// once per burst.
func (c *Conn) Open() bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	return true
}

// Send ends a hand-off Open began: it unlocks the connection and wakes
// its loop, unless a wake is already on its way.
func (c *Conn) Send() {
	wake := !c.wakeSent
	c.wakeSent = true
	c.mu.Unlock()
	if wake {
		c.srv.wakes.Add(1)
		c.C.Wake(nil)
	}
}

// Receive begins an event by taking what other goroutines handed over.
// Under the lock, take (if not nil) moves the session's own hand-offs
// aside (Out is still as the last event left it: its length is where the
// Outbox lands), then the Outbox goes onto Out (swapped, not copied, when
// Out is empty). Then apply (if not nil) puts the session's hand-offs in
// place, and a batch an off-loop answer sent is written after them.
func (c *Conn) Receive(take, apply func()) {
	c.mu.Lock()
	c.wakeSent = false
	if take != nil {
		take()
	}
	if len(c.Outbox) > 0 {
		if len(c.Out) == 0 {
			c.Out, c.Outbox = c.Outbox, c.Out[:0]
		} else {
			c.Out = append(c.Out, c.Outbox...)
			c.Outbox = c.Outbox[:0]
		}
	}
	var off *offLoop
	if c.off != nil && (c.off.batch != nil || c.off.ended) {
		off = c.off
	}
	c.mu.Unlock()
	if apply != nil {
		apply()
	}
	if off != nil {
		c.receiveOff(off)
	}
}

// Pending tells whether other goroutines have handed the connection
// something its loop has not taken yet.
func (c *Conn) Pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && (c.wakeSent || len(c.Outbox) > 0)
}

// Finish ends an event: it writes Out, then the replies the event made
// for other connections of the loop. A connection whose peer is too far
// behind is closed.
func (c *Conn) Finish(action gnet.Action) gnet.Action {
	if !c.Flush() {
		action = gnet.Close
	}
	lp := c.loop
	for i, d := range lp.dirty {
		d.dirty = false
		if d != c && !d.gone && !d.Flush() {
			d.C.Close()
		}
		lp.dirty[i] = nil
	}
	lp.dirty = lp.dirty[:0]
	return action
}

// Flush writes the pending replies but what must wait (Held); false means
// the peer is too far behind and the connection should go.
func (c *Conn) Flush() bool {
	c.Out = c.Held.HoldBack(c.Out)
	if n := len(c.Out); n > 0 {
		c.C.Write(c.Out)
		c.Out = c.Out[:0]
		// Keep the buffer for the next event, unless a burst grew it far
		// past what this one needed: idle connections must not pin megabytes.
		if cap(c.Out) > 64<<10 && n < cap(c.Out)/4 {
			c.Out = nil
		}
	}
	ob := c.C.OutboundBuffered() + c.Held.Len()
	if ob > c.srv.cfg.MaxOutbound {
		c.srv.cfg.Log.Sugar().Warnf("%s: closing %s: %d bytes of replies unread", c.srv.cfg.Name, c.C.RemoteAddr(), ob)
		return false
	}
	if c.hold != nil {
		// Unread replies and a partial request are the peer's to hold.
		c.hold.Set(int64(ob + c.C.InboundBuffered()))
	}
	return true
}

// WriteTail writes Out followed by tail in one writev, straight from
// tail's buffer (gnet copies what the socket does not take): for a large
// payload that need not be copied into Out first. While replies wait for
// the store, tail waits with them, copied.
func (c *Conn) WriteTail(tail []byte) {
	if c.Held.Holding() {
		c.Out = append(c.Out, tail...)
		return
	}
	c.iov[0], c.iov[1] = c.Out, tail
	c.C.Writev(c.iov[:])
	c.iov = [2][]byte{}
	c.Out = c.Out[:0]
}

// close is the core's part of the connection's end: no more hand-offs, and
// an off-loop answer under way goes on to the socket if it can (see
// orphan).
func (c *Conn) close() {
	c.gone = true
	c.hold.Release()
	orphan := c.orphan()
	c.mu.Lock()
	c.closed = true
	c.Outbox = nil
	// Only an answer still at work takes the socket (and closes it once
	// written). One that has ended handed its last batch to the loop and
	// is gone: its end would have reached the loop after this close, and
	// the socket kept for it would stay open for good, the peer never
	// seeing the connection end.
	if c.off != nil && !c.off.ended {
		c.off.late = orphan
		c.off.cond.Broadcast()
		orphan = nil
	}
	c.mu.Unlock()
	if orphan != nil {
		orphan.Close()
	}
}

// offLoop is an answer being built on a goroutine of its own.
type offLoop struct {
	cond  sync.Cond // signalled when the loop takes a batch, or the connection closes
	batch []byte    // handed over, not yet taken by the loop
	ended bool      // the work returned
	keep  bool      // ... and the connection stays open
	late  *os.File  // the connection closed: where the rest of the answer goes, if anywhere
}

// OffLoop pauses the session's reading and runs work on a goroutine of its
// own, for an answer that would hold the loop too long (a listing of a
// million functions, a dump of a million jobs). work writes with send,
// one batch at a time: each goes through the loop, after every reply
// before it and behind those waiting for the store, and send returns once
// the loop has taken it, false if the connection is gone. When work
// returns, reading resumes (Paused clears at the next Receive), or the
// connection closes if work said not to keep it. Only the loop may call
// OffLoop.
func (c *Conn) OffLoop(work func(send func([]byte) bool) (keep bool)) {
	c.Paused = true
	off := &offLoop{cond: sync.Cond{L: &c.mu}}
	c.mu.Lock()
	c.off = off
	c.mu.Unlock()
	go func() {
		// lateRest writes to the kept socket, once the connection has
		// closed, the batch the loop never took and then b.
		lateRest := func(b []byte) bool {
			late, pending := off.late, off.batch
			off.batch = nil
			c.mu.Unlock()
			ok := pending == nil || writeLate(late, pending)
			return ok && (b == nil || writeLate(late, b))
		}
		send := func(b []byte) bool {
			c.mu.Lock()
			for off.batch != nil && !c.closed {
				off.cond.Wait()
			}
			if c.closed {
				return lateRest(b)
			}
			off.batch = b
			c.wake()
			return true
		}
		keep := work(send)
		c.mu.Lock()
		for off.batch != nil && !c.closed {
			off.cond.Wait()
		}
		if c.closed {
			late := off.late
			lateRest(nil)
			if late != nil {
				late.Close()
			}
			return
		}
		off.ended, off.keep = true, keep
		c.wake()
	}()
}

// wake hands the loop what the caller, holding the lock, left for it:
// Send without Open.
func (c *Conn) wake() { c.Send() }

// receiveOff takes an off-loop answer's batch, on the loop, and resumes or
// closes the connection once the answer has ended.
func (c *Conn) receiveOff(off *offLoop) {
	c.mu.Lock()
	b, ended, keep := off.batch, off.ended, off.keep
	off.batch = nil
	if ended {
		c.off = nil
	}
	off.cond.Broadcast()
	c.mu.Unlock()
	if b != nil {
		c.WriteTail(b)
	}
	if ended {
		c.Paused = false
		if !keep {
			c.Flush()
			c.C.Close()
		}
	}
}

// orphan keeps the socket of a connection that closes while an answer is
// built off the loop, so that the answer still reaches the peer: clients
// such as nc -N send a request and half-close, and gnet closes at EOF
// where gearmand answers first. Not when replies gnet could not write yet
// are pending, since they would come after.
func (c *Conn) orphan() *os.File {
	if !c.Paused || c.C.OutboundBuffered() > 0 {
		return nil
	}
	fd, err := unix.Dup(c.fd)
	if err != nil {
		return nil
	}
	unix.CloseOnExec(fd)
	// Non-blocking like gnet's, so os.File writes through Go's poller and
	// the write deadline below holds.
	return os.NewFile(uintptr(fd), "orphan")
}

// orphanTimeout bounds how long a closed connection's answer may take to
// write: a peer that never reads does not keep the goroutine.
const orphanTimeout = 30 * time.Second

// writeLate writes a batch of an answer whose connection has closed to
// its kept socket, if any.
func writeLate(f *os.File, b []byte) bool {
	if f == nil {
		return false
	}
	f.SetWriteDeadline(time.Now().Add(orphanTimeout))
	_, err := f.Write(b)
	return err == nil
}
