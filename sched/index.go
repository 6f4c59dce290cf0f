package sched

import "hash/maphash"

// keyIndex maps a function's coalescing keys to its live jobs. It is an
// open-addressing table that resizes incrementally, as Redis's dict does:
// a resize allocates the new table and every later insert or delete moves
// a few slots of the old one across, so no single submit pays for moving a
// million keys. Go's map splits its tables one at a time, but with keys that
// hash uniformly they all fill up together, and a million distinct job names
// made the submit rate halve at each doubling.
//
// A slot holds the key's hash and the job; the key itself is the job's
// (Job.key), so the index stores no strings of its own.
type keyIndex struct {
	cur     []slot
	old     []slot // being moved into cur; nil when no resize is under way
	moved   int    // slots of old already moved
	pending int    // keys in old, still to be moved
	used    int    // slots of cur ever filled since it was made: live and deleted
	live    int    // keys in cur and old
}

type slot struct {
	h uint64 // the key's hash, with the low bit set; 0 for a slot never used
	j *Job   // nil in a deleted slot
}

var keySeed = maphash.MakeSeed()

func keyHash(key string) uint64 { return maphash.String(keySeed, key) | 1 }

const (
	indexMin  = 16 // smallest table
	indexStep = 4  // old slots moved per insert or delete
)

func (x *keyIndex) len() int { return x.live }

// get returns the job indexed under key, or nil.
func (x *keyIndex) get(key string) *Job {
	h := keyHash(key)
	if s := find(x.cur, key, h); s != nil {
		return s.j
	}
	if s := find(x.old, key, h); s != nil {
		return s.j
	}
	return nil
}

// find returns the live slot of key in t, or nil.
func find(t []slot, key string, h uint64) *slot {
	if len(t) == 0 {
		return nil
	}
	mask := uint64(len(t) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t[i]
		switch {
		case s.h == 0:
			return nil
		case s.h == h && s.j != nil && s.j.key() == key:
			return s
		}
	}
}

// set indexes j under key, replacing the job there if any.
func (x *keyIndex) set(key string, j *Job) {
	h := keyHash(key)
	if s := find(x.cur, key, h); s != nil {
		s.j = j
		return
	}
	if s := find(x.old, key, h); s != nil {
		s.j = j
		return
	}
	// The keys still in old will land in cur too: room is kept for them,
	// so that finishing a move never meets a full table (whose probes
	// would never end).
	if (x.used+x.pending+1)*4 > len(x.cur)*3 {
		x.resize()
	}
	x.insert(h, j)
	x.live++
	x.step()
}

// del removes key; it is there.
func (x *keyIndex) del(key string) {
	h := keyHash(key)
	s := find(x.cur, key, h)
	if s == nil {
		if s = find(x.old, key, h); s != nil {
			x.pending--
		}
	}
	if s == nil {
		return
	}
	s.j = nil // deleted: later keys' probes go on past it
	x.live--
	x.step()
}

// insert puts a key known to be absent into cur, in the first deleted or
// empty slot of its probe.
func (x *keyIndex) insert(h uint64, j *Job) {
	mask := uint64(len(x.cur) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.cur[i]
		if s.j != nil {
			continue
		}
		if s.h == 0 {
			x.used++
		}
		s.h, s.j = h, j
		return
	}
}

// resize starts moving into a new table sized for the live keys: larger
// when they fill the table, the same or smaller when deletions left it
// full of deleted slots. A resize still under way is finished first, into
// the room set keeps for it.
func (x *keyIndex) resize() {
	for x.old != nil {
		x.step()
	}
	n := indexMin
	for n < 2*(x.live+1) {
		n *= 2
	}
	x.old, x.cur = x.cur, make([]slot, n)
	x.moved, x.used, x.pending = 0, 0, x.live
	if len(x.old) == 0 {
		x.old = nil
	}
}

// step moves a few slots of old into cur.
func (x *keyIndex) step() {
	for k := 0; x.old != nil && k < indexStep; k++ {
		s := &x.old[x.moved]
		if s.j != nil {
			x.insert(s.h, s.j)
			s.j = nil // moved: a deleted slot, so old's probes still work
			x.pending--
		}
		if x.moved++; x.moved == len(x.old) {
			x.old, x.moved = nil, 0
		}
	}
}
