package cluster

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/tlstest"
)

// chanListener is a net.Listener over connections a test hands it.
type chanListener struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7000} }

// FuzzHandshake sends the acceptor whatever bytes, then hangs up: no
// input gets a connection through to raft (none can hold a certificate of
// the cluster's CA), each is refused and counted once, and none leaves a
// handshake in flight. Seeds: a real ClientHello, a plain raft RPC, HTTP.
func FuzzHandshake(f *testing.F) {
	ca := tlstest.CA("cluster CA")
	src := nodeCerts(f, ca, ca.Node("n1"))
	f.Add(clientHello(f))
	f.Add([]byte{0, 0x85, 0xa9, 'R', 'P', 'C', 'H', 'e', 'a', 'd', 'e', 'r'})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	ln := &chanListener{conns: make(chan net.Conn), done: make(chan struct{})}
	ref := &refusals{log: zap.NewNop(), logged: make(map[string]bool)}
	sl := newStreamLayer(ln, src, 2*time.Second, ref)
	f.Cleanup(func() { sl.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	total := func() uint64 {
		var n uint64
		for r := range numReasons {
			n += ref.counts[r].Load()
		}
		return n
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		before := total()
		server, client := net.Pipe()
		ln.conns <- server
		done := make(chan struct{})
		go func() { // what the server answers, read so that it never blocks
			io.Copy(io.Discard, client)
			close(done)
		}()
		client.SetWriteDeadline(time.Now().Add(5 * time.Second))
		client.Write(in)
		client.Close()
		<-done
		deadline := time.Now().Add(10 * time.Second)
		for total() == before || sl.Handshaking() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("input %q: no refusal counted (%d handshakes in flight)", in, sl.Handshaking())
			}
			time.Sleep(time.Millisecond)
		}
		if got := total(); got != before+1 {
			t.Fatalf("input %q: %d refusals counted, want 1", in, got-before)
		}
		select {
		case c := <-accepted:
			c.Close()
			t.Fatalf("input %q got through to raft", in)
		default:
		}
	})
}
