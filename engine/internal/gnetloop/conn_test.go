package gnetloop

import (
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// flushedConn is a gnet connection with nothing left to write: all that
// close asks of gnet.
type flushedConn struct{ gnet.Conn }

func (flushedConn) OutboundBuffered() int { return 0 }

// TestCloseAfterOffLoopEnded: a connection that closes while an off-loop
// answer is in hand keeps its socket for the answer, which closes it once
// written; if the answer had already ended (its last batch taken by the
// loop, its end not yet) nothing would close the kept socket, and the peer
// would never see the connection end. The socket here is one end of a
// socketpair: once the connection's own descriptor is closed as gnet
// does, the peer must read EOF.
func TestCloseAfterOffLoopEnded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ended bool
		kept  bool // the answer's goroutine takes the socket
	}{
		{"answer ended", true, false},
		{"answer at work", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			peer := fds[1]
			defer unix.Close(peer)
			c := &Conn{C: flushedConn{}, fd: fds[0], Paused: true}
			c.off = &offLoop{cond: sync.Cond{L: &c.mu}, ended: tc.ended}
			c.close()
			unix.Close(fds[0]) // gnet closes its descriptor after OnClose
			if got := c.off.late != nil; got != tc.kept {
				t.Fatalf("socket kept for the answer: %v, want %v", got, tc.kept)
			}
			if tc.kept {
				c.off.late.Close() // the answer's goroutine does, once written
			}
			tv := unix.NsecToTimeval(int64(5 * time.Second))
			if err := unix.SetsockoptTimeval(peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
				t.Fatal(err)
			}
			var b [1]byte
			if n, err := unix.Read(peer, b[:]); n != 0 || err != nil {
				t.Fatalf("peer read %d, %v: want EOF, the connection closed", n, err)
			}
		})
	}
}
