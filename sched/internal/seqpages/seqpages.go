// Package seqpages keeps a run of pages indexed by page number: the
// storage under a table keyed by numbers that mostly grow, such as a
// shard's job sequence numbers. New numbers land on the last page and
// ended ones empty the first, so the table needs no hashing, touches
// memory in order, and never stalls to rehash however many numbers are
// live.
package seqpages

// Run is a run of pages, the first numbered First; a page not made, or
// freed, is nil.
type Run[P any] struct {
	pages []*P
	base  uint64 // page number of pages[0]
}

// Page is page pn, or nil if the run has none.
func (r *Run[P]) Page(pn uint64) *P {
	if pn < r.base || pn-r.base >= uint64(len(r.pages)) {
		return nil
	}
	return r.pages[pn-r.base]
}

// Make returns page pn, made (zeroed) if the run has none, the run
// stretched to it at either end. With limit > 0 a run is at most limit
// pages long: Make returns nil for a page that would stretch it further.
func (r *Run[P]) Make(pn uint64, limit int) *P {
	switch {
	case len(r.pages) == 0:
		r.base = pn
		r.pages = append(r.pages, nil)
	case pn < r.base:
		more := r.base - pn
		if limit > 0 && more > uint64(limit-len(r.pages)) {
			return nil
		}
		pages := make([]*P, int(more)+len(r.pages))
		copy(pages[more:], r.pages)
		r.pages, r.base = pages, pn
	case pn-r.base >= uint64(len(r.pages)):
		if limit > 0 && pn-r.base >= uint64(limit) {
			return nil
		}
		for pn-r.base >= uint64(len(r.pages)) {
			r.pages = append(r.pages, nil)
		}
	}
	p := r.pages[pn-r.base]
	if p == nil {
		p = new(P)
		r.pages[pn-r.base] = p
	}
	return p
}

// Free drops page pn, and with it the empty pages then at either end of
// the run.
func (r *Run[P]) Free(pn uint64) {
	if pn < r.base || pn-r.base >= uint64(len(r.pages)) {
		return
	}
	r.pages[pn-r.base] = nil
	i := 0
	for i < len(r.pages) && r.pages[i] == nil {
		i++
	}
	j := len(r.pages)
	for j > i && r.pages[j-1] == nil {
		j--
	}
	switch {
	case i == j:
		r.pages, r.base = nil, 0
	case i > 0 || j < len(r.pages):
		if cap(r.pages) > 4*(j-i)+64 { // let a long run's array go
			r.pages = append([]*P(nil), r.pages[i:j]...)
		} else {
			r.pages = r.pages[i:j]
		}
		r.base += uint64(i)
	}
}

// First is the number of the run's first page, Len how many pages the run
// spans (nil ones too), and At(i) the page First+i.
func (r *Run[P]) First() uint64 { return r.base }
func (r *Run[P]) Len() int      { return len(r.pages) }
func (r *Run[P]) At(i int) *P   { return r.pages[i] }
