package periodic

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	codec "switchyard/codec/periodic"
	"switchyard/sched"
	"switchyard/sched/storetest"
)

// SUCCESS waits for the store; the replies after it wait behind it; a job
// the store could not keep is answered with the error and is gone. LOAD,
// which has no reply, waits for nothing.
func TestSuccessWaitsForStore(t *testing.T) {
	st := storetest.NewGate(64)
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
	<-st.Queued
	<-st.Queued
	c.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if b, err := c.r.ReadByte(); err == nil {
		t.Fatalf("got %q before the store answered", b)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatal(err)
	}
	st.Answer(nil)
	c.expect("1", codec.Success)
	c.expect("p1", codec.Pong)
	st.Answer(errors.New("no space left on device"))
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
	<-st.Queued
	st.Answer(nil)
}
