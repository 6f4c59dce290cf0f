package replicated

import (
	"cmp"
	"slices"
)

// records is the FSM's job records by id, packed into large chunks and
// addressed by where they lie. Neither the map nor the chunks hold a
// pointer per job, so the collector does not walk them, and storing a
// record costs a copy, not an allocation: on a follower, a map of cloned
// records cost a fifth of its CPU in allocation and marking.
//
// A chunk's bytes are written once: a record replaced is written anew
// elsewhere, a chunk whose records are all gone is dropped, not reused.
// So a view (Snapshot, Load) that holds the chunks it saw reads them
// while applies go on.
type records struct {
	ids    index
	chunks [][]byte // nil: a free slot
	live   []int    // bytes of live records, by chunk
	free   []uint32 // free slots of chunks
	cur    int      // the chunk records are appended to; -1 for none
	bytes  int      // of the live records
	held   int      // of the chunks held (their capacity)
}

// span is where a record lies.
type span struct {
	chunk, off uint32
	n          int
}

const (
	chunkSize = 1 << 20
	// ownChunk: a record this large gets a chunk of its own, dropped
	// with it, so that large records leave no holes.
	ownChunk = chunkSize / 8
	// compactSlack: records are moved together once the chunks hold
	// more than twice the live bytes and this much besides.
	compactSlack = 8 * chunkSize
)

func newRecords() *records {
	return &records{cur: -1}
}

// Len is the number of records.
func (r *records) Len() int { return r.ids.len() }

// put stores rec (copied) as id's record, replacing any.
func (r *records) put(id uint64, rec []byte) {
	s := r.store(rec)
	r.bytes += len(rec)
	if old, had := r.ids.set(id, s); had {
		r.release(old)
	}
	if r.held > 2*r.bytes+compactSlack {
		r.compact()
	}
}

// delete drops id's record, if any.
func (r *records) delete(id uint64) {
	if old, ok := r.ids.remove(id); ok {
		r.release(old)
	}
}

// get is id's record, nil if none. It is never written again.
func (r *records) get(id uint64) ([]byte, bool) {
	s, ok := r.ids.get(id)
	if !ok {
		return nil, false
	}
	return r.at(s), true
}

func (r *records) at(s span) []byte {
	return at(r.chunks, s)
}

func at(chunks [][]byte, s span) []byte {
	if s.n == 0 {
		return nil
	}
	end := int(s.off) + s.n
	return chunks[s.chunk][s.off:end:end]
}

func (r *records) store(rec []byte) span {
	if len(rec) == 0 {
		return span{} // in no chunk: it holds none
	}
	if len(rec) >= ownChunk {
		i := r.slot(slices.Clone(rec))
		r.live[i] = len(rec)
		return span{chunk: i, n: len(rec)}
	}
	if r.cur < 0 || len(r.chunks[r.cur])+len(rec) > cap(r.chunks[r.cur]) {
		old := r.cur
		r.cur = int(r.slot(make([]byte, 0, chunkSize)))
		if old >= 0 && r.live[old] == 0 {
			r.drop(uint32(old))
		}
	}
	c := r.chunks[r.cur]
	s := span{chunk: uint32(r.cur), off: uint32(len(c)), n: len(rec)}
	r.chunks[r.cur] = append(c, rec...)
	r.live[r.cur] += len(rec)
	return s
}

func (r *records) release(s span) {
	if s.n == 0 {
		return
	}
	r.bytes -= s.n
	r.live[s.chunk] -= s.n
	if r.live[s.chunk] == 0 && int(s.chunk) != r.cur {
		r.drop(s.chunk)
	}
}

// slot holds a new chunk and returns its index.
func (r *records) slot(c []byte) uint32 {
	r.held += cap(c)
	if n := len(r.free); n > 0 {
		i := r.free[n-1]
		r.free = r.free[:n-1]
		r.chunks[i] = c
		return i
	}
	r.chunks = append(r.chunks, c)
	r.live = append(r.live, 0)
	return uint32(len(r.chunks) - 1)
}

func (r *records) drop(i uint32) {
	r.held -= cap(r.chunks[i])
	r.chunks[i] = nil
	r.live[i] = 0
	r.free = append(r.free, i)
}

// compact moves every record into new chunks, in id order. Its cost, a
// copy of the live bytes, is paid once at least as many bytes (and
// compactSlack) have been freed in chunks still held.
func (r *records) compact() {
	v := r.view()
	n := newRecords()
	v.sorted(func(id uint64, rec []byte) error {
		n.put(id, rec)
		return nil
	})
	*r = *n
}

// view is the records as they are now, for reading while r changes.
type view struct {
	ids    []located
	chunks [][]byte
}

type located struct {
	id uint64
	at span
}

func (r *records) view() view {
	v := view{ids: make([]located, 0, r.ids.len()), chunks: slices.Clone(r.chunks)}
	r.ids.each(func(id uint64, s span) { v.ids = append(v.ids, located{id, s}) })
	return v
}

// sorted calls fn with each record in id order. It sorts v's ids: one
// caller at a time.
func (v view) sorted(fn func(id uint64, rec []byte) error) error {
	slices.SortFunc(v.ids, func(a, b located) int { return cmp.Compare(a.id, b.id) })
	for _, l := range v.ids {
		if err := fn(l.id, at(v.chunks, l.at)); err != nil {
			return err
		}
	}
	return nil
}
