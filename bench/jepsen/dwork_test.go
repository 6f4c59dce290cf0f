package jepsen

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/dwork"
)

// A dwork request whose ZMTP handshake does not finish (a server that
// reads the greeting and answers nothing) fails within the workload's
// timeout and closes its connection: the server sees it end. zmq4 alone
// leaves it open, and a dwork server that greets one peer at a time then
// waits its handshake timeout on it.
func TestDworkClosesAFailedHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const timeout = 300 * time.Millisecond
	w := &Workload{cfg: Config{Timeout: timeout, Dial: (&net.Dialer{}).DialContext}}
	failed := make(chan error, 1)
	go func() {
		_, err := w.dworkDo(context.Background(), ln.Addr().String(), &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Steal), Location: proto.String("h")})
		failed <- err
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The greeting comes; nothing is sent back. The read ends when the
	// client closes (EOF), or at this far bound if it never does.
	c.SetReadDeadline(time.Now().Add(100 * timeout))
	n, err := io.Copy(io.Discard, c)
	if err != nil {
		t.Fatalf("the client's connection did not close after a failed handshake (%d bytes read): %v", n, err)
	}
	if n == 0 {
		t.Fatal("no greeting came")
	}
	if err := <-failed; err == nil {
		t.Fatal("a request with no handshake succeeded")
	}
}
