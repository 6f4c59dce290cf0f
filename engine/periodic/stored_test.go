package periodic

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	codec "switchyard/codec/periodic"
	"switchyard/sched"
)

// gateStore is a durable store whose writes are answered only when the
// test says so.
type gateStore struct {
	mu      sync.Mutex
	pending []func(error)
	queued  chan struct{}
}

func (g *gateStore) Encode(*sched.Record) []byte              { return []byte{} }
func (g *gateStore) Put(_ uint64, _ []byte, done func(error)) { g.add(done) }
func (g *gateStore) Delete(uint64)                            {}
func (g *gateStore) Flush(done func(error))                   { g.add(done) }
func (g *gateStore) Load(func(*sched.Record) error) error     { return nil }

func (g *gateStore) add(done func(error)) {
	if done == nil {
		return
	}
	g.mu.Lock()
	g.pending = append(g.pending, done)
	g.mu.Unlock()
	g.queued <- struct{}{}
}

func (g *gateStore) answer(err error) {
	g.mu.Lock()
	done := g.pending[0]
	g.pending = g.pending[1:]
	g.mu.Unlock()
	go done(err)
}

// SUCCESS waits for the store; the replies after it wait behind it; a job
// the store could not keep is answered with the error and is gone. LOAD,
// which has no reply, waits for nothing.
func TestSuccessWaitsForStore(t *testing.T) {
	st := &gateStore{queued: make(chan struct{}, 64)}
	s := sched.New(sched.Config{Store: st})
	defer s.Close()
	srv := New(Config{Addrs: []string{"tcp://127.0.0.1:0"}, Loops: 1}, s, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(context.Background())
	c := dialKind(t, "tcp", srv.Addrs()[0].String(), codec.TypeClient)
	c.send("1", codec.SubmitJob, jobJSON("f", "a", "", 0))
	c.send("p1", codec.Ping)
	c.send("2", codec.SubmitJob, jobJSON("f", "b", "", 0))
	c.send("p2", codec.Ping)
	<-st.queued
	<-st.queued
	c.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if b, err := c.r.ReadByte(); err == nil {
		t.Fatalf("got %q before the store answered", b)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatal(err)
	}
	st.answer(nil)
	c.expect("1", codec.Success)
	c.expect("p1", codec.Pong)
	st.answer(errors.New("no space left on device"))
	if m := c.expect("2", codec.Unknown); string(m.Data) != "no space left on device" {
		t.Fatalf("failed submit answered %q", m.Data)
	}
	c.expect("p2", codec.Pong)
	if _, ok := s.Find([]byte("f"), []byte("b")); ok {
		t.Fatal("a job the store could not keep is queued")
	}
	c.write(codec.AppendRequest(nil, []byte("l"), codec.Load, []byte(`{"jobs":[`+jobJSON("f", "c", "", 0)+`]}`)))
	c.send("p3", codec.Ping)
	c.expect("p3", codec.Pong) // not held behind the LOAD's write
	<-st.queued
	st.answer(nil)
}
