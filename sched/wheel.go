package sched

import "sync/atomic"

// timerKind says what a fired timer means.
type timerKind uint8

const (
	timerDue      timerKind = iota + 1 // a delayed job came due
	timerTimeout                       // a running job overran its worker's timeout
	timerDeadline                      // a worker was not heard from in time
	timerQueued                        // a queued job waited too long for a worker (QueueTimeout)
	timerRewake                        // a worker woken for a job did not ask for work in time (WakeDemand)
)

// timer is intrusive: it lives inside the Job, Worker or ability it times,
// so arming and cancelling allocate nothing.
type timer struct {
	prev, next *timer
	due        *timer // the chain of timers firing in one tick, see advance
	expire     int64  // absolute tick
	kind       timerKind
	armed      bool
	slot       uint16    // level<<wheelBits | index, where it is linked
	job        *Job      // for timerDue and timerTimeout
	worker     *Worker   // for timerDeadline (timerRewake's is its ability: see abilityOf)
	late       []*Worker // workers whose run timeout the job overran, see reportedBy
}

// The wheel has wheelLevels levels of wheelSlots slots. Level 0 holds the
// timers of the next wheelSlots ticks, one tick per slot; level l the
// timers due within wheelSlots^(l+1) ticks, wheelSlots^l ticks per slot.
// With 10 ms ticks that is 2.56 s, 11 min, 46 h and 497 days; anything
// later waits in the last level's farthest slot and is looked at again
// every 497 days.
const (
	wheelBits   = 8
	wheelSlots  = 1 << wheelBits
	wheelMask   = wheelSlots - 1
	wheelLevels = 4
)

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

// wheel is a hierarchical timing wheel, as in the Linux kernel of old: a
// timer goes into the level whose span covers its wait, and when a slot of
// a higher level comes up its timers cascade into the levels below. Each
// timer moves at most wheelLevels-1 times, and a tick looks only at the
// timers due in it (and at a cascade's, once per wheelSlots ticks), so a
// million jobs due in an hour cost nothing per tick until their slot comes
// up.
type wheel struct {
	slots [wheelLevels][wheelSlots]*timer
	now   int64            // last tick processed
	n     int              // armed timers
	in    [wheelLevels]int // armed timers per level, to skip empty stretches
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
	w.link(t)
	t.armed = true
	w.n++
	w.count.inc()
}

// link puts t in the slot its expiry calls for, measured from the next
// tick to process.
func (w *wheel) link(t *timer) {
	base := w.now + 1
	wait := t.expire - base
	var slot int
	switch {
	case wait < 1<<wheelBits:
		slot = int(t.expire & wheelMask)
	case wait < 1<<(2*wheelBits):
		slot = 1<<wheelBits | int(t.expire>>wheelBits&wheelMask)
	case wait < 1<<(3*wheelBits):
		slot = 2<<wheelBits | int(t.expire>>(2*wheelBits)&wheelMask)
	default:
		e := t.expire
		if wait >= 1<<(4*wheelBits) {
			e = base + 1<<(4*wheelBits) - 1 // the farthest slot; it comes back here
		}
		slot = 3<<wheelBits | int(e>>(3*wheelBits)&wheelMask)
	}
	t.slot = uint16(slot)
	w.in[slot>>wheelBits]++
	head := &w.slots[slot>>wheelBits][slot&wheelMask]
	t.prev = nil
	t.next = *head
	if *head != nil {
		(*head).prev = t
	}
	*head = t
}

func (w *wheel) unlink(t *timer) {
	w.in[t.slot>>wheelBits]--
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		w.slots[t.slot>>wheelBits][t.slot&wheelMask] = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.prev, t.next = nil, nil
}

func (w *wheel) cancel(t *timer) {
	if !t.armed {
		return
	}
	w.unlink(t)
	t.armed = false
	w.n--
	w.count.dec()
}

// advance moves the wheel to tick now and calls fire for each expired timer,
// after disarming it. fire may re-arm.
func (w *wheel) advance(now int64, fire func(*timer)) {
	for w.now < now {
		if w.n == 0 {
			w.now = now
			return
		}
		tick := w.now + 1
		if tick&wheelMask == 0 {
			// A new lap of level 0: bring down the next slot of level 1,
			// and of the levels above when theirs come up too.
			for l := 1; l < wheelLevels; l++ {
				idx := tick >> (l * wheelBits) & wheelMask
				w.cascade(l, idx)
				if idx != 0 {
					break
				}
			}
		}
		w.now = tick
		// Chain the slot's timers first, then fire those still armed for
		// this tick: fire may re-arm a timer, even into this very slot
		// (one lap on), or disarm one not yet fired.
		var due *timer
		for t := w.slots[0][tick&wheelMask]; t != nil; t = t.next {
			t.due, due = due, t
		}
		for t := due; t != nil; {
			next := t.due
			t.due = nil
			if t.armed && t.expire <= tick {
				w.cancel(t)
				fire(t)
			}
			t = next
		}
		w.skip(now)
	}
}

// skip moves w.now, at most to now, past the ticks in which nothing can
// happen: the empty slots of level 0 up to the next timer, or the rest of
// the lap, or whole laps of a level when it and those below are empty.
func (w *wheel) skip(now int64) {
	end := w.now // the last tick known to hold nothing
	switch {
	case w.in[0] > 0:
		for end < now && end&wheelMask != wheelMask && w.slots[0][(end+1)&wheelMask] == nil {
			end++
		}
	default:
		span := int64(wheelSlots) // the lap of level 0 ...
		for l := 1; l < wheelLevels-1 && w.in[l] == 0; l++ {
			span <<= wheelBits // ... or of the first level holding a timer
		}
		end = (w.now | (span - 1)) // up to that level's next boundary
	}
	w.now = min(max(end, w.now), now)
}

// cascade re-links every timer of slot idx of level l, measured from the
// tick being started (w.now+1): they fall into lower levels.
func (w *wheel) cascade(l int, idx int64) {
	t := w.slots[l][idx]
	w.slots[l][idx] = nil
	for t != nil {
		next := t.next
		w.link(t)
		t = next
	}
}
