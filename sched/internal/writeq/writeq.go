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
	// urgent says which items TakeAtLeast counts (nil: all); queued is
	// how many of those are queued, need how many a waiting TakeAtLeast
	// wants (0: any one item).
	urgent func(T) bool
	queued int
	need   int
}

// New returns an empty, open queue.
func New[T any]() *Queue[T] { return NewUrgent[T](nil) }

// NewUrgent returns an empty queue whose TakeAtLeast counts only the
// items urgent says are (nil: all of them).
func NewUrgent[T any](urgent func(T) bool) *Queue[T] {
	q := &Queue[T]{urgent: urgent}
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
	if q.urgent == nil || q.urgent(v) {
		q.queued++
		if q.need > 0 && q.queued == q.need {
			q.wake.Signal()
		}
	}
	if q.need == 0 && len(q.items) == 1 {
		q.wake.Signal()
	}
	q.mu.Unlock()
	return true
}

// Take waits until something is queued and returns all of it, in the
// order pushed; the caller owns the slice until it gives it back with
// Recycle. Once the queue is closed, Take returns what is left, then
// false.
func (q *Queue[T]) Take() ([]T, bool) { return q.TakeAtLeast(nil) }

// TakeAtLeast is Take that waits for min() urgent items (see NewUrgent)
// rather than any one item; min() of 0 is any one item. min is called
// with the queue locked, each time the queue is woken: when min() urgent
// items are queued, at Wake, and at Close. nil: any one item.
func (q *Queue[T]) TakeAtLeast(min func() int) ([]T, bool) {
	q.mu.Lock()
	for !q.closed {
		n := 0
		if min != nil {
			n = min()
		}
		if n == 0 && len(q.items) > 0 || n > 0 && q.queued >= n {
			break
		}
		q.need = n
		q.wake.Wait()
	}
	q.need, q.queued = 0, 0
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

// Urgent is how many urgent items are queued.
func (q *Queue[T]) Urgent() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.queued
}

// Wake has a waiting TakeAtLeast call its min again.
func (q *Queue[T]) Wake() {
	q.mu.Lock()
	q.wake.Signal()
	q.mu.Unlock()
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
