package sched

import (
	"errors"
	"fmt"
)

// ErrWrongShard means a stored job's id names another shard than its
// function's: the store was written by a scheduler with another number of
// shards (Config.Shards).
var ErrWrongShard = errors.New("sched: stored job's id names another shard than its function's")

// Replay loads every job the Store kept, in the order Load gives them
// (ascending id keeps each function's order), under their old ids, or new
// ones for records that have none (see Store.Load). It must
// run before the first submit, as a server starts and before it listens.
// It returns how many jobs it restored.
func (s *Sched) Replay() (int, error) {
	if !s.durable {
		return 0, nil
	}
	n := 0
	var waiting []pending
	err := s.store.Load(func(r *Record) error {
		if err := s.restore(r); err != nil {
			return fmt.Errorf("job %d of %q: %w", r.ID, r.Func, err)
		}
		if len(r.After) > 0 {
			waiting = append(waiting, pending{r.ID, append([]Key(nil), r.After...)})
		}
		n++
		return nil
	})
	if err != nil {
		return n, err
	}
	// The graph once every job is back: a predecessor not stored has ended.
	for _, p := range waiting {
		s.link(s.shardOf(p.id), p.id, p.after)
	}
	return n, nil
}

// pending is a restored job whose predecessors are still to be linked.
type pending struct {
	id    uint64
	after []Key
}

// restore puts a stored job back under its id: waiting in its queue, or in
// the wheel until its due time, and in its function's unique index. The
// shard's sequence moves past the id, so new jobs never take it.
func (s *Sched) restore(r *Record) error {
	sh := s.shardFor([]byte(r.Func))
	if r.ID == 0 {
		// A store that keeps no ids (gearmand's table): a new one, told
		// back in r.ID.
		r.ID = sh.seq.Add(1)<<s.shardBits | sh.idx
	} else if s.shardOf(r.ID) != sh {
		return ErrWrongShard
	}
	if r.Priority >= numPriorities {
		return fmt.Errorf("sched: priority %d", r.Priority)
	}
	j := buildJob(&SubmitReq{Unique: []byte(r.Unique), Payload: r.Payload, Reducer: []byte(r.Reducer),
		Priority: r.Priority, Background: true, CoalesceOnPayload: r.CoalesceOnPayload,
		When: r.When, Timeout: r.Timeout, Counter: r.Counter, RetryForever: r.RetryForever, After: r.After,
		Remember: r.Remember})
	j.id = r.ID
	seq := r.ID >> s.shardBits
	for {
		cur := sh.seq.Load()
		if cur >= seq || sh.seq.CompareAndSwap(cur, seq) {
			break
		}
	}
	var wake wakeList
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.job(r.ID) != nil {
		return errors.New("sched: id stored twice")
	}
	f := s.function(sh, []byte(r.Func))
	j.fn = f
	key := j.key()
	if key != "" && f.uniqueJob(key) != nil {
		sh.settle(f)
		return fmt.Errorf("sched: unique %q stored twice", key)
	}
	sh.jobs.put(seq, j)
	if key != "" {
		sh.addUnique(f, key, j) // after: the index finds its jobs in the table
	}
	if len(r.After) > 0 {
		sh.block(j) // linked once every job is back, see Replay
	} else {
		s.place(sh, j, &wake) // no worker is connected yet: nobody to wake
	}
	return nil
}
