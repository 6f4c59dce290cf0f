package sched

import "time"

// Record is what a Store keeps of a job that must survive a restart.
type Record struct {
	ID       uint64
	Func     string
	Unique   string
	Payload  []byte
	Reducer  string
	Priority Priority
	When     int64
	// What SubmitReq set and a requeue may have changed since.
	Timeout           time.Duration
	Counter           int64
	RetryForever      bool
	CoalesceOnPayload bool  // the payload is the coalescing key, see SubmitReq
	Remember          bool  // noted when it ends, see SubmitReq.Remember
	After             []Key // what it waits for, see SubmitReq; at replay, names with no job have ended
}

// Store persists the jobs that must survive a restart: the background
// ones. Writes are queued, in order, and answered later:
//
//   - Encode turns a record into the bytes Put writes. It copies what it
//     keeps and does no I/O; the scheduler calls it outside its locks where
//     it can, since a payload may be megabytes. The scheduler puts each
//     record it encodes once at most, so a store may reuse the record's
//     memory once it has written it.
//   - Put queues the write of a job's record, Delete its removal, Flush a
//     barrier. The scheduler calls Put under the job's shard lock, so that a
//     job's writes are queued in the order its changes were made and a
//     delete never overtakes the save before it.
//   - done, when not nil, is called once the write (for Flush: every write
//     queued before it) is durable, or with the error that kept it off
//     disk; from any goroutine, but never from within the call that queued
//     it. A store may leave out a put that a delete of the same job
//     follows before it was written (Delete means the job has ended, and a
//     job that has run cannot be lost); its done is called all the same, in
//     its turn.
//   - Load replays the saved jobs at start, in id order. A store that
//     keeps no ids (gearmand's SQLite table) gives records with ID 0, in the
//     order they were written; fn then sets r.ID to the id it gave the job.
type Store interface {
	Encode(r *Record) []byte
	Put(id uint64, rec []byte, done func(error))
	Delete(id uint64)
	Flush(done func(error))
	Load(fn func(r *Record) error) error
}

// Resyncer is a Store that can lose writes it has answered with an error
// (a full disk) and later take writes again: the writes it dropped while
// it was down (deletes of jobs that ended, rewrites) are lost, and a
// write it refused may be on disk after all. The scheduler hands itself
// to it in New, and the store makes its records match StoredRecords
// before it takes writes again.
type Resyncer interface {
	Attach(s *Sched)
}

// StoredRecords hands fn the record of every live background job (what
// the store must hold), from Store.Encode, a chunk at a time: each chunk
// is encoded under a short hold of its shard's lock, and fn runs with no
// lock held. Jobs submitted or changed meanwhile may be seen as they were
// or as they are; their writes are queued after the call began, so a
// store that applies what fn gives it before those writes ends up with
// every job as it is.
func (s *Sched) StoredRecords(fn func(id uint64, rec []byte)) {
	if !s.durable {
		return
	}
	type stored struct {
		id  uint64
		rec []byte
	}
	buf := make([]stored, 0, chunk)
	size := 0
	// A step stops at chunk jobs or at chunkBytes of records, whichever
	// comes first: payloads may be megabytes.
	add := func(j *Job) bool {
		if size >= chunkBytes {
			return false
		}
		if j.background {
			rec := s.encode(j, j.fn.name)
			buf = append(buf, stored{j.id, rec})
			size += len(rec)
		}
		return true
	}
	for i := range s.shards {
		sh := &s.shards[i]
		for seq, done := uint64(0), false; !done; {
			sh.mu.Lock()
			seq, done = sh.jobs.walkUntil(seq, chunk, add)
			sh.mu.Unlock()
			for _, r := range buf {
				fn(r.id, r.rec)
			}
			clear(buf)
			buf, size = buf[:0], 0
		}
	}
}

// chunkBytes bounds the records StoredRecords encodes under one hold of a
// shard's lock.
const chunkBytes = 4 << 20

// memStore is the default: jobs live only in memory. The scheduler never
// writes to it (see Sched.durable).
type memStore struct{}

func (memStore) Encode(*Record) []byte            { return nil }
func (memStore) Put(uint64, []byte, func(error))  {}
func (memStore) Delete(uint64)                    {}
func (memStore) Flush(func(error))                {}
func (memStore) Load(func(r *Record) error) error { return nil }
