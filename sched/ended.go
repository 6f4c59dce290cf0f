package sched

import (
	"strings"
	"time"
)

// Ended jobs remembered: a job submitted with SubmitReq.Remember leaves,
// when it ends, a note of its name, id, time and the worker that last ran
// it, so that a later submit of the same name is known to be late (the
// work is done) and a lookup can say where it ran. Notes are kept for
// Config.EndedRetention, and a shard keeps at most Config.EndedMax /
// shards of them, dropping the oldest first: memory stays bounded however
// many jobs end.

// Ended is the note of an ended job.
type Ended struct {
	ID     uint64
	At     time.Time // when it ended, by the scheduler's wall clock
	Worker string    // the name (Worker.SetName) of the worker that ran it last; "" if none
}

// DefaultEndedRetention and DefaultEndedMax are Config's defaults.
const (
	DefaultEndedRetention = time.Hour
	DefaultEndedMax       = 1 << 20
)

// endedNote is one note in a shard's FIFO of notes.
type endedNote struct {
	key  Key
	note Ended
	mono time.Time // when it ended, by the monotonic clock: what retention counts
}

// endedNotes is a shard's notes: by key, and oldest first.
type endedNotes struct {
	byKey map[Key]int // index into fifo
	fifo  []endedNote // oldest first from head; dropped and superseded slots have no key
	head  int
}

// note records that j ended, if it asked to be remembered. Caller holds
// sh.mu; j's worker, if any, is still set.
func (sh *shard) note(j *Job) {
	if !j.is(flagRemember) || j.ulen == 0 {
		return
	}
	j.set(flagRemember, false) // noted once, whichever way it ends
	s := sh.s
	n := &sh.ended
	if n.byKey == nil {
		n.byKey = make(map[Key]int)
	}
	k := Key{j.fn.name, strings.Clone(j.Unique())} // not the job's: kept after it ends
	e := endedNote{key: k, note: Ended{ID: j.id, At: s.clock.Wall()}, mono: s.clock.Now()}
	if j.worker != nil {
		e.note.Worker = j.worker.Name()
	}
	sh.expire(e.mono)
	if i, ok := n.byKey[k]; ok {
		n.fifo[i].key = Key{} // superseded: its slot is dropped in turn
	}
	for len(n.fifo)-n.head >= s.endedMax {
		sh.dropOldest()
	}
	n.fifo = append(n.fifo, e)
	n.byKey[k] = len(n.fifo) - 1
}

// expire drops the notes older than the retention. Caller holds sh.mu.
func (sh *shard) expire(now time.Time) {
	n := &sh.ended
	for n.head < len(n.fifo) && now.Sub(n.fifo[n.head].mono) >= sh.s.endedKeep {
		sh.dropOldest()
	}
}

// dropOldest drops the oldest note, and compacts the FIFO once half of it
// is dropped slots. Caller holds sh.mu.
func (sh *shard) dropOldest() {
	n := &sh.ended
	e := &n.fifo[n.head]
	if e.key != (Key{}) {
		if i, ok := n.byKey[e.key]; ok && i == n.head {
			delete(n.byKey, e.key)
		}
	}
	*e = endedNote{}
	n.head++
	if n.head == len(n.fifo) {
		n.fifo, n.head = n.fifo[:0], 0
		return
	}
	if n.head > 1024 && n.head*2 > len(n.fifo) {
		live := copy(n.fifo, n.fifo[n.head:])
		clear(n.fifo[live:])
		n.fifo = n.fifo[:live]
		for i := range n.fifo {
			if k := n.fifo[i].key; k != (Key{}) {
				n.byKey[k] = i
			}
		}
		n.head = 0
	}
}

// EndedJob returns the note of the job function fn knew by key, if it was
// submitted with Remember and ended within the retention.
func (s *Sched) EndedJob(fn, key []byte) (Ended, bool) {
	sh := s.shardFor(fn)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.expire(s.clock.Now())
	i, ok := sh.ended.byKey[Key{string(fn), string(key)}]
	if !ok {
		return Ended{}, false
	}
	return sh.ended.fifo[i].note, true
}
