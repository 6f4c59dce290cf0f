// Package writeq is the queue between a store's callers and its one writer
// goroutine. Callers push writes in order, holding the queue's mutex for an
// append; the writer takes everything queued at once, which makes one
// batch (group commit), and hands each batch's slice back once it is done
// with it, so that a busy queue allocates no slices.
package writeq

import "sync"

// maxFree is how many emptied slices a queue keeps for reuse: enough for
// the batches a store has in flight at once (the batch being written and
// the one waiting for its sync), and a few more; maxKept is the largest
// it keeps.
const (
	maxFree = 8
	maxKept = 1 << 14
)

// Queue is a FIFO of writes with one taker. The zero value is not usable:
// make one with New.
type Queue[T any] struct {
	mu     sync.Mutex
	wake   sync.Cond // signalled when items becomes non-empty, and at Close
	items  []T
	free   [][]T // emptied slices, for the next Take to queue into
	closed bool
}

// New returns an empty, open queue.
func New[T any]() *Queue[T] {
	q := &Queue[T]{}
	q.wake.L = &q.mu
	return q
}

// Push queues v, reporting false (and queuing nothing) once the queue is
// closed.
func (q *Queue[T]) Push(v T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	if len(q.items) == 1 {
		q.wake.Signal()
	}
	q.mu.Unlock()
	return true
}

// Take waits until something is queued and returns all of it, in the
// order pushed; the caller owns the slice until it gives it back with
// Recycle. Once the queue is closed, Take returns what is left, then
// false.
func (q *Queue[T]) Take() ([]T, bool) {
	q.mu.Lock()
	for len(q.items) == 0 && !q.closed {
		q.wake.Wait()
	}
	batch := q.items
	if len(batch) == 0 {
		q.mu.Unlock()
		return nil, false
	}
	if n := len(q.free); n > 0 {
		q.items, q.free = q.free[n-1], q.free[:n-1]
	} else {
		q.items = nil
	}
	q.mu.Unlock()
	return batch, true
}

// Idle reports whether nothing is queued: a Take now would wait.
func (q *Queue[T]) Idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == 0
}

// Recycle gives back a slice Take returned, once the caller is done with
// it: its items are cleared (the garbage collector may have what they
// held) and the slice is kept for a later batch.
func (q *Queue[T]) Recycle(batch []T) {
	clear(batch)
	batch = batch[:0]
	q.mu.Lock()
	if len(q.free) < maxFree && cap(batch) <= maxKept {
		q.free = append(q.free, batch)
	}
	q.mu.Unlock()
}

// Close stops the queue taking pushes. What is queued stays for Take.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.wake.Signal()
	q.mu.Unlock()
}
