package cluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// waitLimit bounds a test's wait for something that must happen: reached,
// the test fails rather than hang. It is no timing claim.
const waitLimit = 10 * time.Second

// echoServer is a leader's listener on loopback that answers every line
// with its name and the line.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, name+" "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// ask sends a line through addr on a new connection and returns the
// answer.
func ask(t *testing.T, addr, line string) (string, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, waitLimit)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(waitLimit))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("through %s: %v", addr, err)
	}
	return got, c
}

// closedWithin says whether c is closed by its peer: a read returns EOF
// or a reset, not a timeout of waitLimit.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(waitLimit))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// A relay carries a connection to its target and back; a new target
// closes the connections to the old one, and new connections reach the
// new one.
func TestRelayRetarget(t *testing.T) {
	a, b := echoServer(t, "a"), echoServer(t, "b")
	r, err := Listen("gearman", "tcp", "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.SetTarget(a)
	got, old := ask(t, r.Addr().String(), "one")
	if got != "a one\n" {
		t.Fatalf("through the relay to a: %q", got)
	}
	r.SetTarget(b)
	if !closedByPeer(old) {
		t.Error("a connection to the old target stayed open")
	}
	if got, _ := ask(t, r.Addr().String(), "two"); got != "b two\n" {
		t.Fatalf("through the relay to b: %q", got)
	}
	if r.Conns() != 1 {
		t.Errorf("%d connections relayed, want 1", r.Conns())
	}
}

// holeDial is a dial toward a host cut off: it ends only when its context
// does (or the test gives up: giveUp). started says it began.
func holeDial(started chan<- string, giveUp <-chan struct{}) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		started <- addr
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-giveUp:
			return nil, errors.New("the test gave up")
		}
	}
}

// A dial toward a leader that is cut off (no answer, no reset) holds
// neither Close nor a change of target: both end it, and Close returns.
// A node that wins the lead stops its follower's relays first, and waited
// here for TCP's timeouts.
func TestRelayCloseEndsDials(t *testing.T) {
	for _, how := range []string{"close", "retarget"} {
		t.Run(how, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			started, giveUp := make(chan string, 1), make(chan struct{})
			r := serve("gearman", ln, nil, holeDial(started, giveUp))
			t.Cleanup(r.Close)
			t.Cleanup(func() { close(giveUp) }) // first: a failed test ends
			r.SetTarget("192.0.2.1:4730")       // never dialled for real: holeDial
			c, err := net.Dial("tcp", r.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			<-started
			done := make(chan struct{})
			go func() {
				if how == "close" {
					r.Close()
				} else {
					r.SetTarget("")
				}
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(waitLimit):
				t.Fatalf("%s waits on a dial toward a host cut off", how)
			}
			if !closedByPeer(c) {
				t.Errorf("after %s, the client's connection stayed open", how)
			}
		})
	}
}

// failingListener is a listener whose accepts the test decides: each
// Accept says it was called (calls), then takes what to do from next: an
// error to return, or nil for the real listener's accept.
type failingListener struct {
	net.Listener
	calls chan struct{}
	next  chan error
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.calls <- struct{}{}
	if err := <-l.next; err != nil {
		return nil, err
	}
	return l.Listener.Accept()
}

func (l *failingListener) Close() error {
	err := l.Listener.Close()
	select {
	case l.next <- net.ErrClosed: // an Accept waiting for its turn ends
	default:
	}
	return err
}

// A relay whose accepts fail (EMFILE: the process is out of file
// descriptors) says so in its log and in Err, and keeps accepting: once an
// accept works again, it relays, and Err is nil.
func TestRelayAcceptFails(t *testing.T) {
	real, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: real, calls: make(chan struct{}, 1), next: make(chan error, 1)}
	core, logs := observer.New(zapcore.WarnLevel)
	r := serve("gearman", fl, zap.New(core), (&net.Dialer{Timeout: dialTimeout}).DialContext)
	defer r.Close()
	r.SetTarget(echoServer(t, "leader"))
	turn := func() {
		t.Helper()
		select {
		case <-fl.calls:
		case <-time.After(waitLimit):
			t.Fatal("the relay stopped accepting")
		}
	}
	turn()
	fl.next <- &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	turn() // after its pause, it accepts again
	if err := r.Err(); !errors.Is(err, syscall.EMFILE) {
		t.Errorf("Err while accepting fails: %v", err)
	}
	fl.next <- &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	turn()
	if n := logs.FilterMessage("relay: cannot accept connections; trying again").Len(); n != 1 {
		t.Errorf("%d log lines for one streak of failed accepts, want 1", n)
	}
	fl.next <- nil
	if got, _ := ask(t, r.Addr().String(), "hello"); got != "leader hello\n" {
		t.Fatalf("through the relay after the failed accepts: %q", got)
	}
	turn() // the accept after the one that worked
	if err := r.Err(); err != nil {
		t.Errorf("Err once accepting works: %v", err)
	}
	if logs.FilterMessage("relay: accepting connections again").Len() != 1 {
		t.Errorf("no log line says accepting works again: %v", logs.All())
	}
	fl.next <- net.ErrClosed // for the Close below: the accept loop ends
}
