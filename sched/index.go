package sched

import (
	"hash/maphash"

	"switchyard/sched/internal/words"
)

// keyIndex maps a function's coalescing keys to its live jobs. It is an
// open-addressing table that resizes incrementally, as Redis's dict does:
// a resize allocates the new table and every later insert or delete moves
// a few slots of the old one across, so no single submit pays for moving a
// million keys. Go's map splits its tables one at a time, but with keys that
// hash uniformly they all fill up together, and a million distinct job names
// made the submit rate halve at each doubling.
//
// A slot is one word: the job's sequence number in its shard, which finds
// it in the shard's job table, and 8 bits of its key's hash, which spare
// most probes a look at a job that is not the one. The key itself is the
// job's (Job.key), so the index holds no strings and no pointers: 8 bytes
// a slot, which the collector never scans. (A hash and a pointer were 16
// bytes a slot: 48 MB of index, old table and new, with a million jobs
// queued.) Moving a slot to a new table reads its job's key again for the
// hash. A large table lives outside the Go heap (package words): the old
// one's memory goes back to the kernel as soon as its move ends, where the
// collector would keep it until its next cycle.
type keyIndex struct {
	jobs    *jobTable // the shard's
	bits    uint      // the shard's: a job's sequence number is its id >> bits
	cur     []uint64
	old     []uint64 // being moved into cur; nil when no resize is under way
	curMem  *words.Array
	oldMem  *words.Array
	moved   int // slots of old already moved
	pending int // keys in old, still to be moved
	used    int // slots of cur ever filled since it was made: live and deleted
	live    int // keys in cur and old
}

// A slot is slotEmpty if never used, slotDeleted once its key is removed,
// else seq<<tagBits | the top tagBits of the key's hash. Sequence numbers
// start at 1, so a live slot is neither; they stay below 2^56 (a shard's
// 72 quadrillionth job), as a job id with the shard's bits below them
// must too.
const (
	slotEmpty   = 0
	slotDeleted = 1
	tagBits     = 8
)

func newKeyIndex(jobs *jobTable, bits uint) *keyIndex {
	return &keyIndex{jobs: jobs, bits: bits}
}

var keySeed = maphash.MakeSeed()

func keyHash(key string) uint64 { return maphash.String(keySeed, key) }

func slotOf(seq, h uint64) uint64 { return seq<<tagBits | h>>(64-tagBits) }

const (
	indexMin  = 16 // smallest table
	indexStep = 8  // old slots moved per insert or delete
)

func (x *keyIndex) len() int { return x.live }

// job is the job a live slot names. Every job the index names is in the
// shard's table (a submit adds it there first, and forget takes it out
// last).
func (x *keyIndex) job(s uint64) *Job {
	j := x.jobs.get(s >> tagBits)
	if j == nil {
		panic("sched: the unique index names a job its shard does not hold")
	}
	return j
}

// get returns the job indexed under key, or nil.
func (x *keyIndex) get(key string) *Job {
	h := keyHash(key)
	if i := x.find(x.cur, key, h); i >= 0 {
		return x.job(x.cur[i])
	}
	if i := x.find(x.old, key, h); i >= 0 {
		return x.job(x.old[i])
	}
	return nil
}

// find returns the index of key's live slot in t, or -1.
func (x *keyIndex) find(t []uint64, key string, h uint64) int {
	if len(t) == 0 {
		return -1
	}
	mask := uint64(len(t) - 1)
	tag := h >> (64 - tagBits)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s := t[i]; {
		case s == slotEmpty:
			return -1
		case s != slotDeleted && s&(1<<tagBits-1) == tag && x.job(s).key() == key:
			return int(i)
		}
	}
}

// set indexes j under key, replacing the job there if any. j must be in
// the shard's job table.
func (x *keyIndex) set(key string, j *Job) {
	h := keyHash(key)
	s := slotOf(j.id>>x.bits, h)
	if i := x.find(x.cur, key, h); i >= 0 {
		x.cur[i] = s
		return
	}
	if i := x.find(x.old, key, h); i >= 0 {
		x.old[i] = s
		return
	}
	// The keys still in old will land in cur too: room is kept for them,
	// so that finishing a move never meets a full table (whose probes
	// would never end).
	if (x.used+x.pending+1)*4 > len(x.cur)*3 {
		x.resize()
	}
	x.insert(h, s)
	x.live++
	x.step()
}

// del removes key; it is there, and its job still in the shard's table.
func (x *keyIndex) del(key string) {
	h := keyHash(key)
	i, t := x.find(x.cur, key, h), x.cur
	if i < 0 {
		if i, t = x.find(x.old, key, h), x.old; i >= 0 {
			x.pending--
		}
	}
	if i < 0 {
		return
	}
	t[i] = slotDeleted // later keys' probes go on past it
	x.live--
	x.step()
}

// insert puts slot s, whose key hashes to h and is known to be absent,
// into cur, in the first deleted or empty slot of its probe.
func (x *keyIndex) insert(h, s uint64) {
	mask := uint64(len(x.cur) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch x.cur[i] {
		case slotEmpty:
			x.used++
		case slotDeleted:
		default:
			continue
		}
		x.cur[i] = s
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
	mem := words.Make(n)
	x.old, x.oldMem, x.cur, x.curMem = x.cur, x.curMem, mem.W, mem
	x.moved, x.used, x.pending = 0, 0, x.live
	if len(x.old) == 0 {
		x.old, x.oldMem = nil, nil
	}
}

// free gives the index's tables back; it must not be used again.
func (x *keyIndex) free() {
	x.curMem.Free()
	x.oldMem.Free()
	*x = keyIndex{}
}

// step moves a few slots of old into cur.
func (x *keyIndex) step() {
	for k := 0; x.old != nil && k < indexStep; k++ {
		if s := x.old[x.moved]; s != slotEmpty && s != slotDeleted {
			x.insert(keyHash(x.job(s).key()), s)
			x.old[x.moved] = slotDeleted // moved: old's probes still work
			x.pending--
		}
		if x.moved++; x.moved == len(x.old) {
			x.oldMem.Free()
			x.old, x.oldMem, x.moved = nil, nil, 0
		}
	}
}
