package dwork

import (
	"time"

	"go.uber.org/zap"

	"switchyard/sched"
)

// A location is a host that steals tasks: one sched.Worker, named after
// it, serving the dwork function. A host is its name (the location of its
// requests), never a connection: dwork's clients open a ZeroMQ connection
// per command (dquery steal in one process, dquery complete in the next),
// and a REQ socket reconnects on its own, so a closed connection says
// nothing about the host. As with dwork's hub, a host keeps what it
// holds until it completes it or sends Exit.
//
// The table of locations is the handler's alone (the server serializes
// its users), bounded in size and in time:
//
//   - a location not heard from for ttl that holds nothing is forgotten
//     (its worker closed), so the function's worker count in Gearman's
//     "status" is the hosts that are around, not every host ever seen;
//   - when the table is full, the least recently heard from location that
//     holds nothing is forgotten to make room; if every one holds tasks,
//     the newcomer gets none;
//   - with a host timeout (off by default, as in the hub), a location not
//     heard from for that long is taken as exited, as by an Exit: what it
//     holds goes back first in line and it is forgotten.
//
// The table's list is kept in the order each location was last heard
// from, so both sweeps start from its head.

// location is one stealing host.
type location struct {
	name       string
	w          *sched.Worker
	seen       time.Time // last request naming it, by the monotonic clock
	active     bool      // stole or completed since it was made or last exited (the hub's "listed as active")
	prev, next *location // the table's list, least recently seen first
}

// locations is the table.
type locations struct {
	s           *sched.Sched
	fn          []byte
	max         int
	ttl         time.Duration
	hostTimeout time.Duration // 0: a silent host is never taken as exited
	byName      map[string]*location
	head        *location // least recently seen
	tail        *location
	held        []uint64 // scratch
	log         *zap.Logger
}

func newLocations(s *sched.Sched, fn string, max int, ttl time.Duration) *locations {
	return &locations{s: s, fn: []byte(fn), max: max, ttl: ttl,
		byName: make(map[string]*location), log: zap.NewNop()}
}

// sweep is the table's upkeep at now: hosts silent for the host timeout
// are taken as exited, and hosts silent for the TTL that hold nothing are
// forgotten. It reports how many hosts it took as exited.
func (ls *locations) sweep(now time.Time) (exited int) {
	if ls.hostTimeout > 0 {
		for l := ls.head; l != nil && now.Sub(l.seen) >= ls.hostTimeout; l = ls.head {
			ls.held = requeueHeld(l.w, ls.held)
			ls.log.Warn("dwork: a host sent nothing for the host timeout; taken as exited, its tasks back in the queue",
				zap.String("location", l.name), zap.Int("tasks", len(ls.held)),
				zap.Duration("silent", now.Sub(l.seen)), zap.Duration("timeout", ls.hostTimeout))
			ls.forget(l)
			exited++
		}
	}
	// A host that holds tasks stays, however long it is silent: it is
	// passed over, not moved, so that its place still says when it was
	// last heard from.
	for l := ls.head; l != nil && now.Sub(l.seen) >= ls.ttl; {
		next := l.next
		if l.w.Running() == 0 {
			ls.forget(l)
		}
		l = next
	}
	return exited
}

// nopWaker: a location's worker never sleeps, Steal never waits.
type nopWaker struct{}

func (nopWaker) Wake(any) {}

// get returns the location named name, heard from now, making it when
// create is set (nil when the table is full of locations holding tasks).
func (ls *locations) get(name string, now time.Time, create bool) *location {
	if l := ls.byName[name]; l != nil {
		ls.touch(l, now)
		return l
	}
	if !create {
		return nil
	}
	if len(ls.byName) >= ls.max && !ls.evict() {
		return nil
	}
	w := ls.s.NewWorker(nopWaker{})
	w.SetName(name)
	w.CanDo(ls.fn, 0)
	l := &location{name: name, w: w, seen: now}
	ls.byName[name] = l
	ls.pushBack(l)
	return l
}

// holder returns the location whose worker is named name, if any: the
// location running a job whose JobView.Worker is name.
func (ls *locations) holder(name string) *location { return ls.byName[name] }

// evict forgets the least recently seen location that holds nothing, and
// reports whether there was one.
func (ls *locations) evict() bool {
	for l := ls.head; l != nil; l = l.next {
		if l.w.Running() == 0 {
			ls.forget(l)
			return true
		}
	}
	return false
}

// forget drops a location and closes its worker (which takes back what it
// holds, as lost attempts: callers requeue first what should not count).
func (ls *locations) forget(l *location) {
	delete(ls.byName, l.name)
	ls.unlink(l)
	l.w.Close()
}

// closeAll forgets every location; what each holds goes back first in
// line, in the order it was stolen.
func (ls *locations) closeAll() {
	for l := ls.head; l != nil; l = ls.head {
		requeueHeld(l.w, nil)
		ls.forget(l)
	}
}

// requeueHeld puts back what w holds at the head of its queue, uncounted,
// the first stolen first in line. scratch is reused.
func requeueHeld(w *sched.Worker, scratch []uint64) []uint64 {
	held := w.Holding(scratch[:0])
	// Holding lists the most recently grabbed first; each requeue goes to
	// the front, so the last one requeued, the first grabbed, leads.
	for _, id := range held {
		w.Requeue(id, sched.RequeueReq{Front: true})
	}
	return held
}

func (ls *locations) touch(l *location, now time.Time) {
	l.seen = now
	if ls.tail != l {
		ls.unlink(l)
		ls.pushBack(l)
	}
}

func (ls *locations) pushBack(l *location) {
	l.prev, l.next = ls.tail, nil
	if ls.tail != nil {
		ls.tail.next = l
	} else {
		ls.head = l
	}
	ls.tail = l
}

func (ls *locations) unlink(l *location) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		ls.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	} else {
		ls.tail = l.prev
	}
	l.prev, l.next = nil, nil
}
