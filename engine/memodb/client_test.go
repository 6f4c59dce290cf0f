package memodb

import (
	"bytes"
	"sync"
	"testing"
	"time"

	codec "switchyard/codec/memodb"
	"switchyard/sched"
)

// A client's JOB waits parked for its result, whoever runs it and however
// large it is: the worker gets the client's service, timeout and payload,
// and the client the worker's payload behind ["memo01", 3, h”].
func TestJobRoundTrip(t *testing.T) {
	f := start(t, Config{})
	for _, tc := range []struct {
		name      string
		timeoutMS uint64
		payload   string
		result    string
	}{
		{"empty", 0, "", ""},
		{"small", 1000, "in", "out"},
		{"a CBOR payload", 30000, "\xa2\x63src\x01\x63tgt\x02", "\x82\x00\xa0"},
		{"1 MiB", 60000, string(bytes.Repeat([]byte{0xab}, 1<<20)), string(bytes.Repeat([]byte{0xcd}, 1<<20))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f.on(t)
			svc := "rt " + tc.name // a worker of the last case waits on its own
			c, w := f.peer(f.dial()), f.peer(f.dial())
			c.send(job(svc, tc.timeoutMS, tc.payload))
			if got := w.wantJob(w.ask(ready("other", svc)), svc, tc.timeoutMS); got != tc.payload {
				t.Fatalf("the worker got %d bytes, want %d", len(got), len(tc.payload))
			}
			w.send(result(w.id, tc.result))
			c.wantResult(c.recv(), tc.result)
		})
	}
}

// A job no worker takes within the queue timeout ends: its request is
// left unanswered (memodb-broker's answer too; the client's REQ socket
// resends), its context goes back to the free list, and a worker that
// comes later does not run it.
func TestQueueTimeout(t *testing.T) {
	f := start(t, Config{QueueTimeout: 50 * time.Millisecond, Heartbeat: 100 * time.Millisecond})
	c := f.peer(f.dial())
	began := time.Now()
	c.send(job("nobody", 0, "p"))
	f.noted("dropped")
	if waited := time.Since(began); waited < 50*time.Millisecond {
		t.Fatalf("dropped after %v", waited)
	}
	f.srv.mu.Lock()
	free := len(f.srv.free)
	f.srv.mu.Unlock()
	if free == 0 {
		t.Fatal("the dropped request's context is not free")
	}
	w := f.peer(f.dial())
	m := w.ask(ready("nobody"))
	w.id = m.ID
	w.wantType(m, codec.Heartbeat)
	c.none()
	if st := statOf(f.sched, "nobody"); st.Total() != 0 {
		t.Fatalf("%+v", st)
	}
}

// listener is a Gearman-style client: a sched.Listener.
type listener struct {
	mu  sync.Mutex
	got map[uint64]sched.Update
	ch  chan uint64
}

func (l *listener) Notify(id uint64, u *sched.Update) {
	l.mu.Lock()
	l.got[id] = sched.Update{Kind: u.Kind, Data: append([]byte(nil), u.Data...)}
	l.mu.Unlock()
	if u.Kind.Terminal() {
		l.ch <- id
	}
}

// gwaker is a Gearman-style worker's Waker: it only counts.
type gwaker struct{ woken chan struct{} }

func (g *gwaker) Wake(any) {
	select {
	case g.woken <- struct{}{}:
	default:
	}
}

// Same shards, both ways: a Gearman-style worker (a sched.Worker) runs a
// MemoDB client's job, and a MemoDB worker runs a Gearman-style client's
// job (no timeout: JOB says 0; a timeout: JOB says it), each result going
// to the client that asked.
func TestCrossProtocol(t *testing.T) {
	f := start(t, Config{Heartbeat: 100 * time.Millisecond})

	t.Run("MemoDB client, Gearman worker", func(t *testing.T) {
		f := f.on(t)
		g := &gwaker{woken: make(chan struct{}, 1)}
		gw := f.sched.NewWorker(g)
		defer gw.Close()
		gw.CanDo([]byte("xg"), 0)
		gw.Sleep()
		c := f.peer(f.dial())
		c.send(job("xg", 2000, "for gearman"))
		select {
		case <-g.woken:
		case <-time.After(waitFor):
			t.Fatal("the Gearman worker was not woken")
		}
		var a sched.Attempt
		j := gw.GrabAttempt(&a)
		if j == nil || string(j.Payload()) != "for gearman" || a.Timeout != 2*time.Second {
			t.Fatalf("grabbed %v (timeout %v)", j, a.Timeout)
		}
		if err := gw.Update(j.ID(), &sched.Update{Kind: sched.Complete, Data: []byte("from gearman")}); err != nil {
			t.Fatal(err)
		}
		c.wantResult(c.recv(), "from gearman")
	})

	for _, tc := range []struct {
		name    string
		timeout time.Duration
		wantMS  uint64
	}{
		{"Gearman client, MemoDB worker", 0, 0},
		{"Gearman client with a timeout, MemoDB worker", 1500*time.Millisecond + 1, 1501},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f.on(t)
			svc := "xm " + tc.name
			l := &listener{got: map[uint64]sched.Update{}, ch: make(chan uint64, 1)}
			gc := f.sched.NewClient(l)
			defer gc.Close()
			id, err := gc.Submit(&sched.SubmitReq{Func: []byte(svc), Payload: []byte("for memodb"), Priority: sched.Normal, Timeout: tc.timeout})
			if err != nil {
				t.Fatal(err)
			}
			w := f.peer(f.dial())
			if got := w.wantJob(w.ask(ready(svc)), svc, tc.wantMS); got != "for memodb" {
				t.Fatalf("payload %q", got)
			}
			w.send(result(w.id, "from memodb"))
			select {
			case done := <-l.ch:
				l.mu.Lock()
				u := l.got[done]
				l.mu.Unlock()
				if done != id || u.Kind != sched.Complete || string(u.Data) != "from memodb" {
					t.Fatalf("job %d: %+v, want %d complete", done, u, id)
				}
			case <-time.After(waitFor):
				t.Fatal("no result for the Gearman client")
			}
			w.wantType(w.recv(), codec.Heartbeat)
		})
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		ms   uint64
		want time.Duration
	}{
		{0, 0},
		{1, time.Millisecond},
		{30000, 30 * time.Second},
		{uint64(maxTimeout / time.Millisecond), maxTimeout},
		{1<<64 - 1, maxTimeout},
	} {
		if got := millis(tc.ms); got != tc.want {
			t.Errorf("millis(%d) = %v, want %v", tc.ms, got, tc.want)
		}
	}
}
