package replicated

import (
	"switchyard/sched"
	"switchyard/sched/internal/seqpages"
)

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

// lane is one shard's run of pages.
type lane = seqpages.Run[idPage]

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

func (p *idPage) holds(slot int) bool { return p.has[slot/64]&(1<<(slot%64)) != 0 }

func (x *index) get(id uint64) (span, bool) {
	l, pn, slot := x.where(id)
	if p := l.Page(pn); p != nil && p.holds(slot) {
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
	p := l.Page(pn)
	if p == nil || !p.holds(slot) {
		if len(x.far) > 0 { // id may be there, from when its page was out of reach
			if old, had = x.far[id]; had {
				x.far[id] = s
				return old, true
			}
		}
		if p == nil {
			if p = l.Make(pn, maxPages); p == nil {
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

// remove forgets id and returns its span, if it had one.
func (x *index) remove(id uint64) (span, bool) {
	l, pn, slot := x.where(id)
	p := l.Page(pn)
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
		l.Free(pn)
	}
	return s, true
}

// each calls fn for every id, in no order.
func (x *index) each(fn func(id uint64, s span)) {
	for li := range x.lanes {
		l := &x.lanes[li]
		for pi := range l.Len() {
			p := l.At(pi)
			if p == nil {
				continue
			}
			first := (l.First() + uint64(pi)) << idPageBits
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
