package replicated

import "switchyard/sched"

// index maps job ids to where their records lie. A hash map spread the
// ids of a growing queue over memory, and every new id cost a cache miss
// and, as the map grew, its moves: a fifth of a follower's CPU. A job id
// is its shard's sequence number with the shard in its low bits (see
// sched), so the index keeps a lane per shard, and in each lane a run of
// pages indexed by sequence number: new ids land on the page last
// touched, ended ones on the oldest.
//
// Any id is stored, whatever its layout: an id whose page would stretch
// its lane's run past maxPages goes to a map instead.
type index struct {
	lanes [1 << laneBits]lane
	far   map[uint64]span // ids outside their lane's run
	n     int
}

// laneBits: the low bits of an id that name its shard.
const laneBits = 8

// The lanes are the scheduler's shards.
var _ [1<<laneBits - sched.DefaultShards]struct{}
var _ [sched.DefaultShards - 1<<laneBits]struct{}

const (
	idPageBits = 8
	idPageSize = 1 << idPageBits
	// maxPages bounds a lane's run: 4,096 pages of 256 ids, a million of
	// a shard's jobs between its oldest stored and its newest.
	maxPages = 4096
)

type lane struct {
	pages []*idPage
	base  uint64 // page number of pages[0]
}

type idPage struct {
	spans [idPageSize]span
	has   [idPageSize / 64]uint64
	live  int
}

func (x *index) len() int { return x.n }

// where is id's lane, page number and slot on the page.
func (x *index) where(id uint64) (*lane, uint64, int) {
	seq := id >> laneBits
	return &x.lanes[id&(1<<laneBits-1)], seq >> idPageBits, int(seq & (idPageSize - 1))
}

// page is the page pn of l, nil if it has none.
func (l *lane) page(pn uint64) *idPage {
	if pn < l.base || pn-l.base >= uint64(len(l.pages)) {
		return nil
	}
	return l.pages[pn-l.base]
}

func (p *idPage) holds(slot int) bool { return p.has[slot/64]&(1<<(slot%64)) != 0 }

func (x *index) get(id uint64) (span, bool) {
	l, pn, slot := x.where(id)
	if p := l.page(pn); p != nil && p.holds(slot) {
		return p.spans[slot], true
	}
	if len(x.far) > 0 {
		s, ok := x.far[id]
		return s, ok
	}
	return span{}, false
}

// set stores s as id's span and returns the span it replaces, if any.
func (x *index) set(id uint64, s span) (old span, had bool) {
	l, pn, slot := x.where(id)
	p := l.page(pn)
	if p == nil || !p.holds(slot) {
		if len(x.far) > 0 { // id may be there, from when its page was out of reach
			if old, had = x.far[id]; had {
				x.far[id] = s
				return old, true
			}
		}
		if p == nil {
			if p = l.grow(pn); p == nil {
				if x.far == nil {
					x.far = make(map[uint64]span)
				}
				x.far[id] = s
				x.n++
				return span{}, false
			}
		}
		p.has[slot/64] |= 1 << (slot % 64)
		p.spans[slot] = s
		p.live++
		x.n++
		return span{}, false
	}
	old = p.spans[slot]
	p.spans[slot] = s
	return old, true
}

// grow makes page pn of l, or returns nil if the run would be longer than
// maxPages.
func (l *lane) grow(pn uint64) *idPage {
	switch {
	case len(l.pages) == 0:
		l.base = pn
		l.pages = append(l.pages, nil)
	case pn < l.base:
		more := l.base - pn
		if more > maxPages-uint64(len(l.pages)) {
			return nil
		}
		pages := make([]*idPage, int(more)+len(l.pages))
		copy(pages[more:], l.pages)
		l.pages, l.base = pages, pn
	case pn-l.base >= uint64(len(l.pages)):
		if pn-l.base >= maxPages {
			return nil
		}
		for pn-l.base >= uint64(len(l.pages)) {
			l.pages = append(l.pages, nil)
		}
	}
	p := new(idPage)
	l.pages[pn-l.base] = p
	return p
}

// remove forgets id and returns its span, if it had one.
func (x *index) remove(id uint64) (span, bool) {
	l, pn, slot := x.where(id)
	p := l.page(pn)
	if p == nil || !p.holds(slot) {
		if s, ok := x.far[id]; ok {
			delete(x.far, id)
			x.n--
			return s, true
		}
		return span{}, false
	}
	s := p.spans[slot]
	p.has[slot/64] &^= 1 << (slot % 64)
	p.spans[slot] = span{}
	p.live--
	x.n--
	if p.live == 0 {
		l.pages[pn-l.base] = nil
		l.trim()
	}
	return s, true
}

// trim drops the empty pages at either end of the run.
func (l *lane) trim() {
	i := 0
	for i < len(l.pages) && l.pages[i] == nil {
		i++
	}
	j := len(l.pages)
	for j > i && l.pages[j-1] == nil {
		j--
	}
	if i == j {
		l.pages, l.base = nil, 0
		return
	}
	if i > 0 || j < len(l.pages) {
		if cap(l.pages) > 4*(j-i)+64 { // let a long run's array go
			l.pages = append([]*idPage(nil), l.pages[i:j]...)
		} else {
			l.pages = l.pages[i:j]
		}
		l.base += uint64(i)
	}
}

// each calls fn for every id, in no order.
func (x *index) each(fn func(id uint64, s span)) {
	for li := range x.lanes {
		l := &x.lanes[li]
		for pi, p := range l.pages {
			if p == nil {
				continue
			}
			first := (l.base + uint64(pi)) << idPageBits
			for slot := range idPageSize {
				if p.holds(slot) {
					fn((first+uint64(slot))<<laneBits|uint64(li), p.spans[slot])
				}
			}
		}
	}
	for id, s := range x.far {
		fn(id, s)
	}
}
