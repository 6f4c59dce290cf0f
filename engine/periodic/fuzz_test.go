package periodic

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	codec "switchyard/codec/periodic"
	"switchyard/engine/internal/servertest"
	"switchyard/sched"
)

// FuzzServer writes arbitrary bytes to a real server after a client's or a
// worker's handshake (or none), and checks that the server never dies and
// keeps serving others. The seeds are real sessions.
func FuzzServer(f *testing.F) {
	req := func(id string, cmd codec.Command, args ...string) []byte {
		bs := make([][]byte, len(args))
		for i, a := range args {
			bs[i] = []byte(a)
		}
		return codec.AppendRequest(nil, []byte(id), cmd, bs...)
	}
	job := `{"job_id":0,"name":"n","func":"f","workload":"w","timeout":1,"sched_at":0,"run_at":0,"counter":0,"status":""}`
	seeds := []struct {
		kind byte
		data []byte
	}{
		{codec.TypeClient, bytes.Join([][]byte{req("a", codec.SubmitJob, job), req("b", codec.Status),
			req("c", codec.Dump), req("d", codec.RemoveJob, job), req("e", codec.DropFunc, "f")}, nil)},
		{codec.TypeClient, req("l", codec.Load, `{"jobs":[`+job+`,`+job+`]}`)},
		{codec.TypeWorker, bytes.Join([][]byte{req("", codec.CanDo, "f"), req("g", codec.GrabJob),
			req("", codec.WorkFail, "1"), req("", codec.SchedLater, "1", "0", "1"), req("", codec.WorkDone, "1"),
			req("s", codec.Sleep), req("p", codec.Ping), req("", codec.CantDo, "f")}, nil)},
		{0, codec.AppendHandshake(nil, codec.TypeClient)},
		{codec.TypeWorker, []byte("\x00REQ\x00\x00\x00\x02\x00\x01")},
	}
	for _, s := range seeds {
		f.Add(s.kind, s.data)
	}
	var once sync.Once
	var addr string
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		once.Do(func() {
			// One server for the whole run: state left by one input is
			// part of what the next one meets. Every STATUS and LOAD off
			// the loop: the inline paths are plain code, the pause and
			// resume around a goroutine are not.
			s := sched.New(sched.Config{})
			srv := New(Config{Addrs: []string{"tcp://127.0.0.1:0"}, Loops: 1, MaxFrame: 1 << 16}, s, nil)
			srv.hooks.Store(&testHooks{inlineFuncs: -1, inlineLoad: -1})
			addr = servertest.Start(t, srv)
		})
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if kind == codec.TypeClient || kind == codec.TypeWorker {
			c.Write(codec.AppendHandshake(nil, kind))
		}
		c.Write(data)
		c.Close()
		p := dialKind(t, "tcp", addr, codec.TypeClient)
		p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		p.send("alive", codec.Ping)
		p.expect("alive", codec.Pong)
	})
}
