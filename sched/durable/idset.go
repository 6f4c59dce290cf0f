package durable

import (
	"math/bits"
	"slices"
)

// idSet is the set of job ids with a record in the database, which the
// writer keeps to count them exactly (the mark's jobs): a put of an
// id already there and a delete of one that is not change nothing.
//
// A Go map of every id costs the writer a hash and, as the queue grows, a
// rehash of a map of millions: hundreds of nanoseconds a job. The ids a
// scheduler makes are each shard's sequence number shifted past the shard
// bits, so each shard's jobs follow one another 256 ids apart, and end
// roughly in the order they came. The set is kept in pages of 65,536 ids:
// a sorted array of their low 16 bits while sparse (one shard's jobs: 256
// a page, 2 bytes each), a bitmap once dense (8 KiB). A put appends to
// its page's array, a delete takes from its front, and the pages of the
// last put and the last delete are at hand without a lookup.
type idSet struct {
	pages map[uint64]*idPage // by id >> 16
	n     int
	put   pageRef // the page of the last add
	del   pageRef // the page of the last remove
}

type pageRef struct {
	key uint64
	p   *idPage
}

// idPage holds the ids of one page: low while they are few, bits once
// there are more than denseAt.
type idPage struct {
	low  []uint16
	bits *[1 << 10]uint64
	n    int
}

const denseAt = 4096 // ids at which an array's 2 bytes each outgrow a bitmap's 8 KiB

func newIDSet(hint int) *idSet {
	return &idSet{pages: make(map[uint64]*idPage, hint/256+1)}
}

// Len is how many ids the set holds.
func (s *idSet) Len() int { return s.n }

// page is the page of key, made if create.
func (s *idSet) page(ref *pageRef, key uint64, create bool) *idPage {
	if ref.p != nil && ref.key == key {
		return ref.p
	}
	p := s.pages[key]
	if p == nil {
		if !create {
			return nil
		}
		p = &idPage{}
		s.pages[key] = p
	}
	*ref = pageRef{key, p}
	return p
}

// add puts id in the set.
func (s *idSet) add(id uint64) {
	key, low := id>>16, uint16(id)
	p := s.page(&s.put, key, true)
	if p.bits != nil {
		w, b := &p.bits[low>>6], uint64(1)<<(low&63)
		if *w&b == 0 {
			*w |= b
			p.n++
			s.n++
		}
		return
	}
	if k := len(p.low); k == 0 || p.low[k-1] < low {
		p.low = append(p.low, low) // the common case: ids grow
	} else {
		i, found := slices.BinarySearch(p.low, low)
		if found {
			return
		}
		p.low = slices.Insert(p.low, i, low)
	}
	p.n++
	s.n++
	if len(p.low) > denseAt {
		p.bits = new([1 << 10]uint64)
		for _, l := range p.low {
			p.bits[l>>6] |= 1 << (l & 63)
		}
		p.low = nil
	}
}

// remove takes id out of the set.
func (s *idSet) remove(id uint64) {
	key, low := id>>16, uint16(id)
	p := s.page(&s.del, key, false)
	if p == nil {
		return
	}
	if p.bits != nil {
		w, b := &p.bits[low>>6], uint64(1)<<(low&63)
		if *w&b == 0 {
			return
		}
		*w &^= b
	} else if len(p.low) > 0 && p.low[0] == low {
		p.low = p.low[1:] // the common case: the oldest ends first
	} else {
		i, found := slices.BinarySearch(p.low, low)
		if !found {
			return
		}
		p.low = slices.Delete(p.low, i, i+1)
	}
	p.n--
	s.n--
	if p.n == 0 {
		delete(s.pages, key)
		if s.put.p == p {
			s.put = pageRef{}
		}
		s.del = pageRef{}
	}
}

// has tells whether id is in the set.
func (s *idSet) has(id uint64) bool {
	p := s.pages[id>>16]
	if p == nil {
		return false
	}
	low := uint16(id)
	if p.bits != nil {
		return p.bits[low>>6]&(1<<(low&63)) != 0
	}
	_, found := slices.BinarySearch(p.low, low)
	return found
}

// each calls fn for every id in the set; fn may remove the id it is
// given.
func (s *idSet) each(fn func(id uint64)) {
	var ids []uint64
	for key, p := range s.pages {
		ids = ids[:0]
		if p.bits != nil {
			for i, w := range p.bits {
				for ; w != 0; w &= w - 1 {
					ids = append(ids, key<<16|uint64(i)<<6|uint64(bits.TrailingZeros64(w)))
				}
			}
		} else {
			for _, l := range p.low {
				ids = append(ids, key<<16|uint64(l))
			}
		}
		for _, id := range ids {
			fn(id)
		}
	}
}
