package main

import "sync"

// fsm is one group's applied state: every job's record, copied into
// large chunks with no pointer per job, as sched/replicated's records.
// Job ids are a group's sequence numbers, as the scheduler's are a
// shard's, so the index is the spans in id order, as sched/replicated's
// index keeps pages by sequence number (a Go map here cost 2 µs a job:
// a cache miss per insert, and growth): applying a job costs a copy and
// an append.
type fsm struct {
	mu     sync.Mutex
	pages  [][]located // filled in turn, never grown: no copy of the index
	chunks [][]byte
	jobs   int
}

type located struct {
	id uint64
	at span
}

const pageLen = 4096

type span struct {
	chunk, off, n uint32
}

const chunkSize = 4 << 20

func newFSM() *fsm { return &fsm{} }

// apply stores an entry's jobs and says how many.
func (f *fsm) apply(entry []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	before := f.jobs
	err := eachJob(entry, f.put)
	return f.jobs - before, err
}

func (f *fsm) put(id uint64, rec []byte) {
	last := len(f.chunks) - 1
	if last < 0 || len(f.chunks[last])+len(rec) > cap(f.chunks[last]) {
		f.chunks = append(f.chunks, make([]byte, 0, max(chunkSize, len(rec))))
		last++
	}
	c := f.chunks[last]
	p := len(f.pages) - 1
	if p < 0 || len(f.pages[p]) == pageLen {
		f.pages = append(f.pages, make([]located, 0, pageLen))
		p++
	}
	f.pages[p] = append(f.pages[p], located{id, span{chunk: uint32(last), off: uint32(len(c)), n: uint32(len(rec))}})
	f.chunks[last] = append(c, rec...)
	f.jobs++
}

func (f *fsm) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs
}
