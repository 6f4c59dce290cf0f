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
	Timeout      time.Duration
	Counter      int64
	RetryForever bool
}

// Store persists background and delayed jobs. Save is called before the
// submit is acknowledged and Delete once the job has ended; neither is
// called with a scheduler lock held. Load replays saved jobs at start.
// Save must not keep r.Payload: with Config.Release the frontend reuses
// that memory as soon as the job ends, possibly before Delete.
type Store interface {
	Save(r *Record) error
	Delete(id uint64) error
	Load(fn func(r *Record) error) error
}

// memStore is the default: jobs live only in memory.
type memStore struct{}

func (memStore) Save(*Record) error               { return nil }
func (memStore) Delete(uint64) error              { return nil }
func (memStore) Load(func(r *Record) error) error { return nil }
