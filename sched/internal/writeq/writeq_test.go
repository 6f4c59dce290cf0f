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

// TakeAtLeast waits for its count of urgent items, whatever else is
// queued; a Wake has it ask its min again; Close ends the wait with what
// is queued.
func TestTakeAtLeast(t *testing.T) {
	q := NewUrgent(func(v int) bool { return v > 0 }) // non-positive: not urgent
	want := 3
	var mu sync.Mutex
	min := func() int { mu.Lock(); defer mu.Unlock(); return want }
	took := make(chan []int)
	take := func() {
		batch, _ := q.TakeAtLeast(min)
		took <- slices.Clone(batch)
	}
	pending := func() bool {
		select {
		case b := <-took:
			t.Fatalf("took %v early", b)
		default:
		}
		return true
	}

	go take()
	q.Push(1)
	q.Push(-1)
	q.Push(-2)
	q.Push(2)
	pending()
	q.Push(3) // the third urgent one
	if b := <-took; !slices.Equal(b, []int{1, -1, -2, 2, 3}) {
		t.Fatalf("took %v", b)
	}

	// A Wake after min has dropped to 0: any item will do.
	go take()
	q.Push(4)
	pending()
	mu.Lock()
	want = 0
	mu.Unlock()
	q.Wake()
	if b := <-took; !slices.Equal(b, []int{4}) {
		t.Fatalf("took %v after Wake", b)
	}
	if q.Urgent() != 0 {
		t.Fatalf("%d urgent items counted after a take", q.Urgent())
	}

	// Close ends a wait with what is queued, then false.
	mu.Lock()
	want = 10
	mu.Unlock()
	go take()
	q.Push(5)
	if q.Urgent() != 1 {
		t.Fatalf("%d urgent items queued, want 1", q.Urgent())
	}
	q.Close()
	if b := <-took; !slices.Equal(b, []int{5}) {
		t.Fatalf("took %v at Close", b)
	}
	if b, ok := q.TakeAtLeast(min); ok || b != nil {
		t.Fatalf("after Close: %v, %v", b, ok)
	}
}
