package dwork

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"switchyard/sched"
)

// A location is a host that steals tasks: one sched.Worker, named after
// it, serving the dwork function. The table of locations is the handler's
// alone (one goroutine), bounded in size and in time:
//
//   - a location not heard from for ttl that holds nothing is forgotten
//     (its worker closed), so the function's worker count in Gearman's
//     "status" is the hosts that are around, not every host ever seen;
//   - when the table is full, the least recently heard from location that
//     holds nothing is forgotten to make room; if every one holds tasks,
//     the newcomer gets none.
//
// A location that holds tasks is not forgotten that way: Exit gives its
// tasks back, as with the real hub, and so does the closing of every
// connection it stole on. A location is bound to the connections of its
// Steals, each known by its peer's ZeroMQ identity (the envelope's first
// frame); when the last of them closes, the host is taken as exited: what
// it holds goes back first in line and it is forgotten (unless keepOnClose:
// the hub's way, which notices nothing).

// location is one stealing host.
type location struct {
	name       string
	w          *sched.Worker
	seen       time.Time // last request naming it, by the monotonic clock
	active     bool      // stole or completed since it was made or last exited (the hub's "listed as active")
	prev, next *location // the table's list, least recently seen first
	conns      []string  // identities of the open connections it stole on
}

// locations is the table.
type locations struct {
	s           *sched.Sched
	fn          []byte
	max         int
	ttl         time.Duration
	byName      map[string]*location
	byConn      map[string][]*location // identity -> the locations that stole on it
	head        *location              // least recently seen
	tail        *location
	keepOnClose bool
	held        []uint64 // scratch
	log         *zap.Logger
}

func newLocations(s *sched.Sched, fn string, max int, ttl time.Duration) *locations {
	return &locations{s: s, fn: []byte(fn), max: max, ttl: ttl,
		byName: make(map[string]*location), byConn: make(map[string][]*location), log: zap.NewNop()}
}

// bind records that l stole on a connection whose peer's identity is id.
func (ls *locations) bind(l *location, id []byte) {
	if ls.keepOnClose {
		return
	}
	for _, c := range l.conns {
		if c == string(id) {
			return
		}
	}
	c := string(id)
	l.conns = append(l.conns, c)
	ls.byConn[c] = append(ls.byConn[c], l)
}

// closed is the closing of the connection whose peer's identity is id: a
// location that stole on it and on no other open connection is taken as
// exited, as Exit does: what it holds goes back first in line, and it is
// forgotten.
func (ls *locations) closed(id []byte) {
	locs, ok := ls.byConn[string(id)]
	if !ok {
		return
	}
	delete(ls.byConn, string(id))
	// The last bound first: each requeue goes to the front, so the tasks
	// of the location that first stole on the connection lead.
	for _, l := range slices.Backward(locs) {
		l.conns = slices.DeleteFunc(l.conns, func(c string) bool { return c == string(id) })
		if len(l.conns) == 0 {
			ls.held = requeueHeld(l.w, ls.held)
			ls.log.Info("dwork: a host's connections closed; taken as exited, its tasks back in the queue",
				zap.String("location", l.name), zap.Int("tasks", len(ls.held)))
			ls.forget(l)
		}
	}
}

// nopWaker: a location's worker never sleeps, Steal never waits.
type nopWaker struct{}

func (nopWaker) Wake(any) {}

// get returns the location named name, heard from now, making it when
// create is set (nil when the table is full of locations holding tasks).
func (ls *locations) get(name string, now time.Time, create bool) *location {
	ls.expire(now)
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

// expire forgets the locations not heard from for ttl that hold nothing;
// one that holds tasks counts as heard from.
func (ls *locations) expire(now time.Time) {
	for l := ls.head; l != nil && now.Sub(l.seen) >= ls.ttl; l = ls.head {
		if l.w.Running() > 0 {
			ls.touch(l, now) // to the back, seen now: the loop ends
			continue
		}
		ls.forget(l)
	}
}

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
	for _, c := range l.conns {
		rest := slices.DeleteFunc(ls.byConn[c], func(x *location) bool { return x == l })
		if len(rest) == 0 {
			delete(ls.byConn, c)
		} else {
			ls.byConn[c] = rest
		}
	}
	l.conns = nil
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
