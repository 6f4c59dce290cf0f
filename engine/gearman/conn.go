package gearman

import (
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// conn is one Gearman connection: a client, a worker, an admin, or all
// three, as gearmand allows. Fields without a comment belong to the
// connection's event loop.
type conn struct {
	srv *Server
	c   gnet.Conn
	fd  int
	ip  string

	client *sched.Client // created on the first submit
	worker *sched.Worker // created on the first worker packet
	pkt    codec.Packet
	upd    sched.Update
	out    []byte // replies built during one OnTraffic, written at its end

	exceptions atomic.Bool // forward WORK_EXCEPTION (read by Notify)

	// mu guards what other goroutines hand to this connection: listener
	// updates and wake-ups, gathered so a burst costs one gnet wake.
	mu       sync.Mutex
	outbox   []byte
	wakeSent bool
	closed   bool
	clientID []byte // SET_CLIENT_ID, read by "workers" on other loops
}

// traffic runs on the connection's loop for new bytes and for wakes.
func (cn *conn) traffic() gnet.Action {
	cn.mu.Lock()
	cn.wakeSent = false
	if len(cn.outbox) > 0 {
		cn.out, cn.outbox = append(cn.out, cn.outbox...), cn.outbox[:0]
	}
	cn.mu.Unlock()

	action := gnet.None
	if n := cn.c.InboundBuffered(); n > 0 {
		buf, _ := cn.c.Peek(n)
		used := 0
		for used < len(buf) {
			consumed, err := codec.Parse(buf[used:], cn.srv.cfg.MaxPacket, &cn.pkt)
			if err != nil && consumed == 0 {
				// The stream cannot be resynchronised: say why and hang up.
				cn.out = appendStreamError(cn.out, err)
				action = gnet.Close
				break
			}
			if consumed == 0 {
				break // wait for the rest of the packet
			}
			used += consumed
			if err != nil {
				cn.out = codec.AppendError(cn.out, "INVALID_PACKET", "Packet is missing arguments")
				continue
			}
			if cn.pkt.Text {
				if cn.admin(&cn.pkt) {
					action = gnet.Close
					break
				}
				continue
			}
			cn.packet(&cn.pkt)
		}
		if used > 0 { // gnet's Discard(0) would drop everything
			cn.c.Discard(used)
		}
	}
	if len(cn.out) > 0 {
		cn.c.Write(cn.out)
		cn.out = cn.out[:0]
		if cn.c.OutboundBuffered() > cn.srv.cfg.MaxOutbound {
			cn.srv.log.Sugar().Warnf("closing %s fd %d: %d bytes of replies unread", cn.ip, cn.fd, cn.c.OutboundBuffered())
			return gnet.Close
		}
	}
	if cap(cn.out) > 1<<20 {
		cn.out = nil // don't pin a large burst's buffer
	}
	return action
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

// deliver queues bytes from another goroutine and wakes the loop once.
func (cn *conn) deliver(appendFn func([]byte) []byte) {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return
	}
	cn.outbox = appendFn(cn.outbox)
	wake := !cn.wakeSent
	cn.wakeSent = true
	cn.mu.Unlock()
	if wake {
		cn.c.Wake(nil)
	}
}

// Wake implements sched.Waker: a sleeping worker gets a NOOP.
func (cn *conn) Wake() {
	cn.deliver(appendNoop)
}

func appendNoop(dst []byte) []byte { return codec.AppendHeader(dst, codec.Res, codec.Noop, 0) }

// Notify implements sched.Listener: forward a worker's report to this client.
func (cn *conn) Notify(id uint64, u *sched.Update) {
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return
	}
	cn.outbox = cn.appendUpdate(cn.outbox, id, u)
	wake := !cn.wakeSent
	cn.wakeSent = true
	cn.mu.Unlock()
	if wake {
		cn.c.Wake(nil)
	}
}

func (cn *conn) appendUpdate(dst []byte, id uint64, u *sched.Update) []byte {
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
	dst = cn.srv.handles.append(dst, id)
	switch {
	case u.Kind == sched.Exception && t == codec.WorkFail:
		dst = append(dst, 0) // gearmand keeps the exception's separator
	case t == codec.WorkFail:
	case t == codec.WorkStatus:
		dst = append(dst, 0)
		dst = append(dst, u.Data...)
		dst = append(dst, 0)
		dst = append(dst, u.Den...)
	default:
		dst = append(dst, 0)
		dst = append(dst, u.Data...)
	}
	return codec.End(dst, start)
}

func (cn *conn) close() {
	cn.mu.Lock()
	cn.closed = true
	cn.outbox = nil
	cn.mu.Unlock()
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
