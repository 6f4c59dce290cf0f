package gearman

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/engine/internal/servertest"
	"switchyard/sched"
)

// FuzzServer writes arbitrary bytes to a real server, as a client, a worker
// or both, and checks that the server never dies and keeps serving others.
// The seeds are real sessions; `go test -fuzz FuzzServer` explores from them.
func FuzzServer(f *testing.F) {
	seeds := [][]byte{
		bytes.Join([][]byte{req(codec.CanDo, "f"), req(codec.SubmitJob, "f", "u", "x"), req(codec.GrabJob),
			req(codec.WorkStatus, "H:lap:1", "1", "2"), req(codec.WorkComplete, "H:lap:1", "r")}, nil),
		bytes.Join([][]byte{req(codec.SubmitJobEpoch, "f", "", "1", "x"), req(codec.GrabJobAll),
			req(codec.SubmitReduceJob, "f", "u", "r", "", "d"), req(codec.GetStatusUnique, "u")}, nil),
		[]byte("status\nworkers\nshow jobs\nshow unique jobs\nmaxqueue f 1 2 3\ncancel job H:lap:1\n"),
		bytes.Join([][]byte{req(codec.CanDoTimeout, "f", "1000"), req(codec.PreSleep), req(codec.OptionReq, "exceptions"),
			req(codec.WorkException, "H:lap:1", "e"), []byte("drop function f\r\n")}, nil),
		[]byte("\x00REQ\x00\x00\x00\x07\x00\x00\x00\x02fn"),
		// The longest line, then one the peer never ends.
		[]byte("create function " + strings.Repeat("f", codec.MaxLineSize-18) + "\r\nversion\ncreate function g"),
		// Packets over largeBody, read into buffers of their own: one
		// whole, run by a worker, and one the peer leaves in the middle of.
		bytes.Join([][]byte{req(codec.SubmitJobBg, "f", "", strings.Repeat("x", 2*largeBody)), req(codec.CanDo, "f"),
			req(codec.GrabJob)}, nil),
		req(codec.SubmitJob, "f", "u", strings.Repeat("y", 4*largeBody))[:largeBody+100],
	}
	for _, s := range seeds {
		f.Add(s)
	}
	var once sync.Once
	var addr string
	f.Fuzz(func(t *testing.T, data []byte) {
		once.Do(func() {
			// One server for the whole run: state left by one input is
			// part of what the next one meets.
			s := sched.New(sched.Config{})
			srv := New(Config{Addrs: []string{"tcp://127.0.0.1:0"}, HandlePrefix: "H:lap", Loops: 1, MaxPacket: 1 << 20}, s, nil)
			// Every listing off the loop: the inline path is plain code,
			// the pause and resume around a listing's goroutine is not.
			srv.hooks.Store(&testHooks{inline: -1})
			addr = servertest.Start(t, srv)
		})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(data)
		c.Close()
		p := dial(t, addr)
		p.send(req(codec.EchoReq, "alive"))
		p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		p.expect(res(codec.EchoRes, "alive"))
	})
}
