package sched

import "switchyard/sched/internal/seqpages"

// jobTable maps a shard's job sequence numbers to live jobs. Sequence
// numbers only grow, so the table is a run of fixed pages indexed directly:
// no hashing, and no rehash stalls while millions of jobs are queued. A page
// is freed once all its numbers have been handed out and every job on it
// has ended, and the run then drops the empty pages at its ends.
type jobTable struct {
	pages seqpages.Run[jobPage]
	n     int // live jobs
}

// pageSize is the slots a page: with its count, a page is 8 KiB, one of
// Go's size classes. (1024 slots and a count were 8,200 bytes, an object
// of 9,472: 1.2 MB more with a million jobs queued.) A sequence number's
// page is seq / pageSize, a multiply and a shift.
const pageSize = 1023

type jobPage struct {
	slots [pageSize]*Job
	live  int
}

func (t *jobTable) get(seq uint64) *Job {
	if p := t.pages.Page(seq / pageSize); p != nil {
		return p.slots[seq%pageSize]
	}
	return nil
}

// put stores j under seq. Numbers are taken before the shard lock and some
// are never stored (a coalesced submit), so a put may land on a page that
// was already freed, even one before the front: it is simply made again.
//
// A put past the back page frees that page if its jobs have all ended:
// remove keeps a page whose numbers were not all handed out yet, and if
// the rest of them went to submits never stored, no remove comes back to
// it. Without this the page would stay for good, and the run with it from
// there on: 8 KB, and a slot per later page.
func (t *jobTable) put(seq uint64, j *Job) {
	pn := seq / pageSize
	if n := t.pages.Len(); n > 0 {
		if back := t.pages.First() + uint64(n) - 1; pn > back && t.pages.At(n-1).live == 0 {
			t.pages.Free(back)
		}
	}
	p := t.pages.Make(pn, 0)
	p.slots[seq%pageSize] = j
	p.live++
	t.n++
}

// remove forgets seq. last is the highest number handed out so far: a page
// whose numbers are all handed out and whose jobs have all ended is freed.
func (t *jobTable) remove(seq, last uint64) {
	pn := seq / pageSize
	p := t.pages.Page(pn)
	if p == nil || p.slots[seq%pageSize] == nil {
		return
	}
	p.slots[seq%pageSize] = nil
	p.live--
	t.n--
	if p.live == 0 && last >= (pn+1)*pageSize-1 {
		t.pages.Free(pn)
	}
}

// walk calls fn for the live jobs numbered seq or more, in order, looking
// at no more than limit slots, and returns the number to resume from; done
// says the walk reached the end of the table. A listing walks a shard a
// bounded step per hold of its lock; between steps the table may change,
// and the walk resumes by number, whatever pages came and went.
func (t *jobTable) walk(seq uint64, limit int, fn func(*Job)) (next uint64, done bool) {
	return t.walkUntil(seq, limit, func(j *Job) bool { fn(j); return true })
}

// walkUntil is walk with an fn that may stop the step early by returning
// false: the job it refused is where the walk resumes.
func (t *jobTable) walkUntil(seq uint64, limit int, fn func(*Job) bool) (next uint64, done bool) {
	base := t.pages.First()
	if pn := seq / pageSize; pn < base {
		seq = base * pageSize
	}
	for i := seq/pageSize - base; i < uint64(t.pages.Len()); i++ {
		p := t.pages.At(int(i))
		if p == nil {
			seq = (base + i + 1) * pageSize
			continue
		}
		for k := seq % pageSize; k < pageSize; k++ {
			if limit == 0 {
				return seq, false
			}
			limit--
			if j := p.slots[k]; j != nil && !fn(j) {
				return seq, false
			}
			seq++
		}
	}
	return seq, true
}
