package writeq

import (
	"slices"
	"sync"
	"testing"
)

// Pushes from many goroutines come out of Take whole, each goroutine's in
// the order it pushed them, and Take ends once the queue is closed and
// drained.
func TestOrderAndClose(t *testing.T) {
	q := New[[2]int]()
	const pushers, each = 4, 5000
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				if !q.Push([2]int{p, i}) {
					t.Error("push refused before Close")
				}
			}
		})
	}
	got := make(chan [pushers][]int)
	go func() {
		var seen [pushers][]int
		for {
			batch, ok := q.Take()
			if !ok {
				got <- seen
				return
			}
			for _, v := range batch {
				seen[v[0]] = append(seen[v[0]], v[1])
			}
			q.Recycle(batch)
		}
	}()
	wg.Wait()
	q.Close()
	if q.Push([2]int{0, -1}) {
		t.Error("push taken after Close")
	}
	seen := <-got
	for p := range pushers {
		if len(seen[p]) != each || !slices.IsSorted(seen[p]) {
			t.Fatalf("pusher %d: %d items, in order: %v", p, len(seen[p]), slices.IsSorted(seen[p]))
		}
	}
}

// What is queued before Close is still taken after it.
func TestTakeAfterClose(t *testing.T) {
	q := New[int]()
	q.Push(1)
	q.Push(2)
	q.Close()
	batch, ok := q.Take()
	if !ok || !slices.Equal(batch, []int{1, 2}) {
		t.Fatalf("Take after Close: %v %v", batch, ok)
	}
	if batch, ok := q.Take(); ok || batch != nil {
		t.Fatalf("Take of a closed, empty queue: %v %v", batch, ok)
	}
}

// A recycled slice comes back cleared, as the next batch's, so that a
// steady queue allocates nothing.
func TestRecycle(t *testing.T) {
	q := New[*int]()
	v := new(int)
	q.Push(v)
	batch, _ := q.Take()
	q.Recycle(batch)
	if batch[:1][0] != nil {
		t.Fatal("a recycled slice still holds its items")
	}
	allocs := testing.AllocsPerRun(100, func() {
		for range 64 {
			q.Push(v)
		}
		b, _ := q.Take()
		q.Recycle(b)
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per batch once warm", allocs)
	}
}
