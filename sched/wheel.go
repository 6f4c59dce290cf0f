package sched

import "sync/atomic"

// timerKind says what a fired timer means.
type timerKind uint8

const (
	timerDue     timerKind = iota + 1 // a delayed job came due
	timerTimeout                      // a running job overran its worker's timeout
)

// timer is intrusive: it lives inside the Job it times, so arming and
// cancelling allocate nothing.
type timer struct {
	prev, next *timer
	expire     int64 // absolute tick
	kind       timerKind
	job        *Job
	late       []*Worker // workers whose run timeout the job overran, see reportedBy
	armed      bool
}

const wheelSlots = 512 // power of two

// timerCount counts what waits on the time (the timers armed in all wheels;
// idle functions), so that the goroutine watching it can sleep while there
// is none: an idle server does not wake a hundred times a second for
// nothing.
type timerCount struct {
	armed atomic.Int64
	kick  chan struct{} // a timer was armed with none before
}

func newTimerCount() *timerCount { return &timerCount{kick: make(chan struct{}, 1)} }

func (c *timerCount) inc() {
	if c != nil && c.armed.Add(1) == 1 {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
}

func (c *timerCount) dec() {
	if c != nil {
		c.armed.Add(-1)
	}
}

// wheel is a hashed timing wheel. A timer sits in slot expire%wheelSlots;
// a slot may hold timers for later laps, which stay until their tick comes.
type wheel struct {
	slots [wheelSlots]*timer
	now   int64 // last tick processed
	n     int   // armed timers
	count *timerCount
}

func (w *wheel) arm(t *timer, expire int64) {
	if t.armed {
		w.cancel(t)
	}
	if expire <= w.now {
		expire = w.now + 1
	}
	t.expire = expire
	s := &w.slots[expire&(wheelSlots-1)]
	t.prev = nil
	t.next = *s
	if *s != nil {
		(*s).prev = t
	}
	*s = t
	t.armed = true
	w.n++
	w.count.inc()
}

func (w *wheel) cancel(t *timer) {
	if !t.armed {
		return
	}
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		w.slots[t.expire&(wheelSlots-1)] = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.prev, t.next = nil, nil
	t.armed = false
	w.n--
	w.count.dec()
}

// advance moves the wheel to tick now and calls fire for each expired timer,
// after unlinking it. fire may re-arm.
func (w *wheel) advance(now int64, fire func(*timer)) {
	if now <= w.now {
		return
	}
	from := w.now + 1
	if now-from >= wheelSlots {
		from = now - wheelSlots + 1 // every slot gets visited once
	}
	w.now = now
	for tick := from; tick <= now && w.n > 0; tick++ {
		t := w.slots[tick&(wheelSlots-1)]
		for t != nil {
			next := t.next
			if t.expire <= now {
				w.cancel(t)
				fire(t)
			}
			t = next
		}
	}
}
