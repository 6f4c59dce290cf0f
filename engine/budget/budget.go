// Package budget is one memory budget for everything peers can make the
// server hold, on every protocol: partial requests, request bodies,
// replies not yet read. Each connection is a Holder. What it holds is
// counted against the budget; a request for more that the budget cannot
// give is refused (the frontend answers with its protocol's error, and
// keeps serving); and when the total passes the budget, the holders that
// hold the most are cut off first, largest first, until it is back under:
// the connections that behave are not touched.
//
// Counting is approximate where it must be: what a connection holds in
// gnet's buffers is read at the end of each of its events; what a body
// takes is counted as it grows.
package budget

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// Budget is the limit and what is held against it.
type Budget struct {
	limit int64
	used  atomic.Int64

	mu      sync.Mutex // guards holders and the cutting
	holders map[*Holder]struct{}

	cuts    atomic.Uint64 // holders cut off
	refused atomic.Uint64 // requests for more refused

	peak    atomic.Int64 // the most held since the last Peak
	pressed atomic.Bool  // past half the budget, and not back under a quarter
	pressMu sync.Mutex   // orders onPress's calls
	onPress func(bool)
}

// New returns a budget of limit bytes; a limit of 0 or less refuses
// nothing and cuts nothing (it only counts).
func New(limit int64) *Budget {
	return &Budget{limit: limit, holders: make(map[*Holder]struct{})}
}

// Limit is the budget in bytes, 0 for none.
func (b *Budget) Limit() int64 { return max(b.limit, 0) }

// Used is what is held now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Peak is the most that was held since the last call of Peak: a burst
// that a sampler would miss between two samples.
func (b *Budget) Peak() int64 {
	return max(b.peak.Swap(b.used.Load()), b.used.Load())
}

// OnPressure has f called with true when what is held passes half the
// budget, and with false once it is back under a quarter of it: the
// server collects its garbage sooner meanwhile, so that what peers make
// it hold and throw away does not double its memory before a collection.
// Call it before the budget is used.
func (b *Budget) OnPressure(f func(pressed bool)) { b.onPress = f }

// moved notes that used is now u.
func (b *Budget) moved(u int64) {
	for p := b.peak.Load(); u > p && !b.peak.CompareAndSwap(p, u); p = b.peak.Load() {
	}
	if b.onPress == nil || b.limit <= 0 {
		return
	}
	if on := b.pressed.Load(); on && u < b.limit/4 || !on && u > b.limit/2 {
		b.pressMu.Lock()
		defer b.pressMu.Unlock()
		// Again under the lock: another goroutine may have flipped it.
		u = b.used.Load()
		if on := b.pressed.Load(); on && u < b.limit/4 || !on && u > b.limit/2 {
			b.pressed.Store(!on)
			b.onPress(!on)
		}
	}
}

// Cuts is how many holders were cut off; Refused how many requests for
// more were refused.
func (b *Budget) Cuts() uint64    { return b.cuts.Load() }
func (b *Budget) Refused() uint64 { return b.refused.Load() }

// Holder is one connection's share.
type Holder struct {
	b     *Budget
	cut   func()       // closes the connection: safe from any goroutine
	base  atomic.Int64 // what Set said it holds (buffers read at event end)
	extra atomic.Int64 // what Take reserved (bodies as they grow)
	done  atomic.Bool  // cut off, or released
}

// Hold registers a holder; cut closes its connection, from any goroutine.
// A nil budget gives a nil holder, whose methods do nothing.
func (b *Budget) Hold(cut func()) *Holder {
	if b == nil {
		return nil
	}
	h := &Holder{b: b, cut: cut}
	b.mu.Lock()
	b.holders[h] = struct{}{}
	b.mu.Unlock()
	return h
}

// Held is what h holds.
func (h *Holder) Held() int64 {
	if h == nil {
		return 0
	}
	return h.base.Load() + h.extra.Load()
}

// Set says what h holds in buffers the budget does not see grow (read at
// the end of each event), and cuts the largest holders off if the total
// is now over the budget.
func (h *Holder) Set(n int64) {
	if h == nil || h.done.Load() {
		return
	}
	if d := n - h.base.Swap(n); d != 0 {
		u := h.b.used.Add(d)
		h.b.moved(u)
		if u > h.b.limit && h.b.limit > 0 && d > 0 {
			h.b.enforce()
		}
	}
}

// Take reserves n more bytes for h (a body about to grow), false if the
// budget cannot give them: the caller refuses what needed them.
func (h *Holder) Take(n int64) bool {
	if h == nil {
		return true
	}
	if h.done.Load() {
		return false
	}
	b := h.b
	u := b.used.Add(n)
	if b.limit > 0 && u > b.limit {
		b.used.Add(-n)
		b.refused.Add(1)
		return false
	}
	b.moved(u)
	h.extra.Add(n)
	return true
}

// Give returns n bytes Take reserved.
func (h *Holder) Give(n int64) {
	if h == nil {
		return
	}
	h.extra.Add(-n)
	h.b.moved(h.b.used.Add(-n))
}

// Follow brings what h has taken for a stream that a library reads on a
// connection's behalf, *taken, to want: Take for more, Give for less;
// false if the budget cannot give more. The caller serialises its calls,
// and makes none once it has called Release.
func (h *Holder) Follow(taken *int64, want int64) bool {
	switch d := want - *taken; {
	case d > 0 && !h.Take(d):
		return false
	case d < 0:
		h.Give(-d)
	}
	*taken = want
	return true
}

// Release gives back everything h holds and forgets it: its connection
// is gone.
func (h *Holder) Release() {
	if h == nil {
		return
	}
	h.done.Store(true)
	h.b.mu.Lock()
	delete(h.b.holders, h)
	h.b.mu.Unlock()
	h.b.moved(h.b.used.Add(-(h.base.Swap(0) + h.extra.Swap(0))))
}

// enforce cuts off the largest holders until what the others hold is
// under nine tenths of the budget: a margin, so that one burst does not
// cut again at once.
func (b *Budget) enforce() {
	b.mu.Lock()
	defer b.mu.Unlock()
	used := b.used.Load()
	if used <= b.limit {
		return
	}
	hs := make([]*Holder, 0, len(b.holders))
	for h := range b.holders {
		if !h.done.Load() {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(x, y *Holder) int { return cmp.Compare(y.Held(), x.Held()) })
	target := b.limit / 10 * 9
	for _, h := range hs {
		if used <= target {
			break
		}
		if h.Held() == 0 {
			break
		}
		used -= h.Held()
		h.done.Store(true)
		b.cuts.Add(1)
		h.cut()
	}
}
