package sched

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"
)

func funcNames(s *Sched) []string {
	var out []string
	for _, f := range s.Funcs() {
		out = append(out, f.Name)
	}
	return out
}

// A function with no job, no worker and no admin setting is forgotten once
// it has been so for FunctionTTL; anything in it restarts the wait.
func TestForgetIdleFunctions(t *testing.T) {
	const ttl = time.Hour
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk, FunctionTTL: ttl})
	c := s.NewClient(&recorder{})

	w := s.NewWorker(&waker{})
	w.CanDo([]byte("worker-left"), 0)
	w.CanDo([]byte("worker-stays"), 0)
	w.CanDo([]byte("job-done"), 0)
	submit(t, c, "queued", "", "x", Normal, true)
	s.CreateFunc([]byte("created"))
	w.CanDo([]byte("maxqueue"), 0)
	s.SetMaxQueue([]byte("maxqueue"), [3]int{5, 5, 5})
	w.CantDo([]byte("maxqueue"))
	id := submit(t, c, "job-done", "", "x", Normal, true)
	if j := w.Grab(); j == nil || j.ID() != id {
		t.Fatal("grab")
	}
	w.Update(id, &Update{Kind: Complete})
	w.CantDo([]byte("worker-left"))
	w.CantDo([]byte("job-done"))

	if n := s.ForgetIdle(clk.pass(ttl - time.Second)); n != 0 {
		t.Fatalf("forgot %d functions before their TTL", n)
	}
	// A worker comes and goes again: job-done's wait starts over.
	w.CanDo([]byte("job-done"), 0)
	w.CantDo([]byte("job-done"))
	if n := s.ForgetIdle(clk.pass(time.Second)); n != 1 {
		t.Fatalf("forgot %d functions at the TTL, want 1 (worker-left): %v", n, funcNames(s))
	}
	want := fmt.Sprint([]string{"worker-stays", "job-done", "queued", "created", "maxqueue"})
	if got := fmt.Sprint(funcNames(s)); got != want {
		t.Fatalf("functions %s, want %s", got, want)
	}
	s.SetMaxQueue([]byte("maxqueue"), [3]int{})
	if n := s.ForgetIdle(clk.pass(ttl)); n != 2 {
		t.Fatalf("forgot %d, want job-done and maxqueue: %v", n, funcNames(s))
	}
	want = fmt.Sprint([]string{"worker-stays", "queued", "created"})
	if got := fmt.Sprint(funcNames(s)); got != want {
		t.Fatalf("functions %s, want %s", got, want)
	}
	// A forgotten function comes back as new when named again.
	submit(t, c, "job-done", "", "y", Normal, true)
	if err := s.DropFunc([]byte("created")); err != nil {
		t.Fatal(err)
	}
	if n := s.ForgetIdle(clk.pass(10 * ttl)); n != 0 {
		t.Fatalf("forgot %d: %v", n, funcNames(s))
	}
}

func TestFunctionTTLZeroKeepsAll(t *testing.T) {
	clk := newFakeClock()
	s := newTest(t, Config{Clock: clk})
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Close()
	if n := s.ForgetIdle(clk.pass(1000 * time.Hour)); n != 0 || len(s.Funcs()) != 1 {
		t.Fatalf("TTL 0 forgot %d functions", n)
	}
}

// The sweeper forgets idle functions on its own when the ticker runs.
func TestSweeperForgetsIdleFunctions(t *testing.T) {
	s := New(Config{Tick: time.Millisecond, FunctionTTL: 20 * time.Millisecond})
	defer s.Close()
	w := s.NewWorker(&waker{})
	w.CanDo([]byte("f"), 0)
	w.Close()
	for deadline := time.Now().Add(5 * time.Second); len(s.Funcs()) != 0; {
		if time.Now().After(deadline) {
			t.Fatal("idle function never forgotten")
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond) // polling the outcome, not synchronising
	}
}

// heapAfter returns the live heap after a full collection.
func heapAfter() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Memory comes back: a peer that registered a great many functions and
// left, and a drained queue of distinct uniques, leave nothing behind.
func TestMemoryComesBack(t *testing.T) {
	const n = 200_000
	for _, tc := range []struct {
		name string
		fill func(s *Sched, clk *fakeClock)
	}{
		{"functions", func(s *Sched, clk *fakeClock) {
			w := s.NewWorker(&waker{})
			for i := 0; i < n; i++ {
				w.CanDo([]byte("fn-"+strconv.Itoa(i)), 0)
			}
			w.Close()
			s.ForgetIdle(clk.pass(time.Hour))
		}},
		{"uniques", func(s *Sched, clk *fakeClock) {
			c := s.NewClient(&recorder{})
			w := s.NewWorker(&waker{})
			w.CanDo([]byte("f"), 0)
			for i := 0; i < n; i++ {
				if _, err := c.Submit(&SubmitReq{Func: []byte("f"), Unique: []byte("unique-" + strconv.Itoa(i)), Background: true}); err != nil {
					panic(err)
				}
			}
			for j := w.Grab(); j != nil; j = w.Grab() {
				w.Update(j.ID(), &Update{Kind: Complete})
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			s := newTest(t, Config{Clock: clk, FunctionTTL: time.Hour})
			before := heapAfter()
			tc.fill(s, clk)
			if s.Len() != 0 {
				t.Fatalf("%d jobs left", s.Len())
			}
			after := heapAfter()
			if grown := int64(after) - int64(before); grown > 2<<20 {
				t.Fatalf("heap grew by %d KiB and stayed", grown>>10)
			}
			runtime.KeepAlive(s)
		})
	}
}

// Functions come and go while the sweeper forgets idle ones as fast as it
// can: no job is lost and no worker loses a function it registered.
func TestForgetIdleConcurrent(t *testing.T) {
	s := New(Config{Shards: 2, Tick: time.Millisecond, FunctionTTL: time.Nanosecond})
	defer s.Close()
	const rounds = 2000
	names := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	done := make(chan int, len(names))
	for _, name := range names {
		go func(name []byte) {
			c := s.NewClient(&recorder{})
			w := s.NewWorker(&waker{})
			ran := 0
			for i := 0; i < rounds; i++ {
				w.CanDo(name, 0)
				if _, err := c.Submit(&SubmitReq{Func: name, Background: true}); err != nil {
					panic(err)
				}
				j := w.Grab()
				if j == nil {
					break
				}
				w.Update(j.ID(), &Update{Kind: Complete})
				ran++
				w.CantDo(name)
				s.ForgetIdle(time.Now())
			}
			done <- ran
		}(name)
	}
	for range names {
		if ran := <-done; ran != rounds {
			t.Fatalf("ran %d of %d jobs", ran, rounds)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("%d jobs left", s.Len())
	}
}
