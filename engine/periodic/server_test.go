package periodic

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	codec "switchyard/codec/periodic"
	"switchyard/engine/internal/servertest"
	"switchyard/sched"
)

// fakeClock lets a test move time: the scheduler runs with Tick < 0 and
// the test calls Advance.
type fakeClock struct {
	mu         sync.Mutex
	mono, wall time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.mono }
func (c *fakeClock) Wall() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.wall }
func (c *fakeClock) pass(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono, c.wall = c.mono.Add(d), c.wall.Add(d)
	return c.mono
}

type testServer struct {
	*Server
	s     *sched.Sched
	clock *fakeClock
	addr  string
}

// runServer starts a server on 127.0.0.1 (and any extra addresses) with a
// scheduler on a fake clock, stopped when the test ends.
func runServer(t *testing.T, loops int, extra ...string) *testServer {
	t.Helper()
	return runServerWith(t, loops, nil, extra...)
}

// runServerWith is runServer with a hook that adjusts the server before it
// starts.
func runServerWith(t *testing.T, loops int, setup func(*Server), extra ...string) *testServer {
	t.Helper()
	clk := &fakeClock{mono: time.Unix(0, 0), wall: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	s := sched.New(sched.Config{Tick: -1, Clock: clk})
	t.Cleanup(s.Close)
	srv := New(Config{Addrs: append([]string{"tcp://127.0.0.1:0"}, extra...), Loops: loops}, s, nil)
	if setup != nil {
		setup(srv)
	}
	addr := servertest.Run(t, srv)
	return &testServer{Server: srv, s: s, clock: clk, addr: addr}
}

// advance moves the fake clock by d and fires the scheduler's timers.
func (ts *testServer) advance(d time.Duration) { ts.s.Advance(ts.clock.pass(d)) }

// peer is a raw Periodic connection with a deadline on every read.
type peer struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialKind(t *testing.T, network, addr string, kind byte) *peer {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := &peer{t: t, c: c, r: bufio.NewReader(c)}
	if kind != 0 {
		p.write(codec.AppendHandshake(nil, kind))
	}
	return p
}

func (p *peer) write(b []byte) {
	p.t.Helper()
	if _, err := p.c.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

func (p *peer) send(id string, cmd codec.Command, args ...string) {
	p.t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	p.write(codec.AppendRequest(nil, []byte(id), cmd, bs...))
}

// next reads one response frame and splits it as a client does.
func (p *peer) next() codec.Message {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, codec.HeaderSize)
	if _, err := io.ReadFull(p.r, hdr); err != nil {
		p.t.Fatalf("read header: %v", err)
	}
	_, _, need, _ := codec.ParseFrame(hdr, codec.ResMagic, 1<<30)
	frame := make([]byte, need)
	copy(frame, hdr)
	if _, err := io.ReadFull(p.r, frame[codec.HeaderSize:]); err != nil {
		p.t.Fatalf("read body: %v", err)
	}
	payload, n, _, err := codec.ParseFrame(frame, codec.ResMagic, 1<<30)
	if err != nil || n != len(frame) {
		p.t.Fatalf("frame %q: %v", frame, err)
	}
	var m codec.Message
	if err := codec.ParseMessage(payload, &m); err != nil {
		p.t.Fatalf("message %q: %v", payload, err)
	}
	return m
}

func (p *peer) expect(id string, cmd codec.Command) codec.Message {
	p.t.Helper()
	m := p.next()
	if string(m.ID) != id || m.Cmd != cmd {
		p.t.Fatalf("got id %q cmd %v data %q, want id %q cmd %v", m.ID, m.Cmd, m.Data, id, cmd)
	}
	return m
}

// expectClosed reads until EOF, failing on any frame.
func (p *peer) expectClosed() {
	p.t.Helper()
	p.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := p.r.ReadByte(); err != io.EOF {
		p.t.Fatalf("read %q, %v; want the server to close", b, err)
	}
}

// assign reads a JOB_ASSIGN for id and decodes its handle and job.
func (p *peer) assign(id string) (string, map[string]any) {
	p.t.Helper()
	m := p.expect(id, codec.JobAssign)
	handle, rest, _ := codec.NextArg(m.Data)
	var job map[string]any
	if err := json.Unmarshal(rest, &job); err != nil {
		p.t.Fatalf("job JSON %q: %v", rest, err)
	}
	return string(handle), job
}

func jobJSON(fn, name, workload string, schedAt int64) string {
	b, _ := json.Marshal(map[string]any{"func": fn, "name": name, "workload": workload, "sched_at": schedAt})
	return string(b)
}

func TestPingSleepUnknown(t *testing.T) {
	ts := runServer(t, 1)
	c := dialKind(t, "tcp", ts.addr, codec.TypeClient)
	w := dialKind(t, "tcp", ts.addr, codec.TypeWorker)
	c.send("", codec.Ping)
	c.expect("", codec.Pong)
	c.send("a\x00b", codec.GrabJob) // a worker's command
	c.expect("a\x00b", codec.Unknown)
	c.send("x", codec.Command(200))
	c.expect("x", codec.Unknown)
	w.send("long-message-id", codec.Ping)
	w.expect("long-message-id", codec.Pong)
	w.send("s", codec.Sleep)
	w.expect("s", codec.Noop)
	w.send("u", codec.SubmitJob, jobJSON("f", "n", "", 0)) // a client's command
	w.expect("u", codec.Unknown)
}

// A job goes to a worker's waiting GRAB_JOB, with the real server's JSON,
// and WORK_DONE ends it.
func TestSubmitGrabDone(t *testing.T) {
	for _, loops := range []int{1, 2} { // one loop: wake-ups on the loop itself
		t.Run(fmt.Sprint(loops, " loops"), func(t *testing.T) {
			ts := runServer(t, loops)
			w := dialKind(t, "tcp", ts.addr, codec.TypeWorker)
			w.send("", codec.CanDo, "f")
			w.send("g1", codec.GrabJob)
			w.send("g2", codec.GrabJob)
			c := dialKind(t, "tcp", ts.addr, codec.TypeClient)
			c.send("1", codec.SubmitJob, jobJSON("f", "a", "A", 0))
			c.expect("1", codec.Success)
			c.send("2", codec.SubmitJob, jobJSON("f", "b", "B", 0))
			c.expect("2", codec.Success)
			h1, j1 := w.assign("g1")
			h2, j2 := w.assign("g2")
			if j1["name"] != "a" || j1["workload"] != "A" || j2["name"] != "b" || j1["status"] != "ready" || j1["run_at"] != 0.0 {
				t.Fatalf("jobs %v %v", j1, j2)
			}
			if h1 != fmt.Sprint(j1["job_id"]) || h1 == h2 {
				t.Fatalf("handles %q %q for %v", h1, h2, j1["job_id"])
			}
			w.send("", codec.WorkDone, h1)
			w.send("", codec.WorkDone, h2)
			w.send("p", codec.Ping) // the reports are answered by nothing: sync on a PING
			w.expect("p", codec.Pong)
			c.send("s", codec.Status)
			if m := c.expect("s", codec.Unknown); string(m.Data) != "f,1,0,0\n" {
				t.Fatalf("status %q", m.Data)
			}
		})
	}
}

// WORK_FAIL runs a job again at once; SCHED_LATER after its delay, with
// its counter stepped; a resubmit replaces; a worker that leaves gives its
// job back.
func TestRetrySemantics(t *testing.T) {
	ts := runServer(t, 2)
	c := dialKind(t, "tcp", ts.addr, codec.TypeClient)
	c.send("1", codec.SubmitJob, jobJSON("f", "n", "one", 0))
	c.expect("1", codec.Success)
	c.send("2", codec.SubmitJob, jobJSON("f", "n", "two", 0))
	c.expect("2", codec.Success)
	w := dialKind(t, "tcp", ts.addr, codec.TypeWorker)
	w.send("", codec.CanDo, "f")
	w.send("g", codec.GrabJob)
	h, j := w.assign("g")
	if j["workload"] != "two" {
		t.Fatalf("replaced job ran as %v", j)
	}
	w.send("", codec.WorkFail, h)
	w.send("g", codec.GrabJob)
	if h2, _ := w.assign("g"); h2 != h {
		t.Fatalf("failed job came back as %s, was %s", h2, h)
	}
	w.send("", codec.SchedLater, h, "5", "2")
	w.send("g", codec.GrabJob)
	w.send("p", codec.Ping)
	w.expect("p", codec.Pong) // the GRAB_JOB waits: the job is not due
	ts.advance(4 * time.Second)
	w.send("p", codec.Ping)
	w.expect("p", codec.Pong)
	ts.advance(time.Second)
	_, j = w.assign("g")
	if j["counter"] != 2.0 || j["sched_at"] != float64(ts.clock.Wall().Unix()) || j["run_at"] == 0.0 {
		t.Fatalf("rescheduled job %v at %d", j, ts.clock.Wall().Unix())
	}
	w.c.Close()
	w2 := dialKind(t, "tcp", ts.addr, codec.TypeWorker)
	w2.send("", codec.CanDo, "f")
	w2.send("g", codec.GrabJob)
	if h2, _ := w2.assign("g"); h2 != h {
		t.Fatalf("lost job came back as %s, was %s", h2, h)
	}
}

// REMOVE_JOB and DROP_FUNC, with the real server's answers.
func TestRemoveAndDrop(t *testing.T) {
	ts := runServer(t, 1)
	c := dialKind(t, "tcp", ts.addr, codec.TypeClient)
	c.send("1", codec.SubmitJob, jobJSON("f", "n", "", 0))
	c.expect("1", codec.Success)
	c.send("2", codec.RemoveJob, jobJSON("f", "n", "", 0))
	c.expect("2", codec.Success)
	c.send("3", codec.RemoveJob, jobJSON("f", "n", "", 0))
	if m := c.expect("3", codec.Unknown); string(m.Data) != "Job f:n not exists." {
		t.Fatalf("remove of unknown job: %q", m.Data)
	}
	c.send("4", codec.SubmitJob, jobJSON("g", "n", "", ts.clock.Wall().Unix()+60))
	c.expect("4", codec.Success)
	c.send("5", codec.DropFunc, "g")
	c.expect("5", codec.Success)
	if n := ts.s.Len(); n != 0 {
		t.Fatalf("%d jobs after drop", n)
	}
	c.send("6", codec.SubmitJob, `{"func":"f"}`)
	if m := c.expect("6", codec.Unknown); string(m.Data) != errNameless.Error() {
		t.Fatalf("nameless job: %q", m.Data)
	}
	c.send("7", codec.SubmitJob, `{"func":"f","name":1}`)
	if m := c.expect("7", codec.Unknown); !strings.Contains(string(m.Data), "json") {
		t.Fatalf("bad JSON: %q", m.Data)
	}
}

// Large STATUS and LOAD answers are built off the loop; the commands
// pipelined behind them are answered after them, in order.
func TestOffLoop(t *testing.T) {
	ts := runServerWith(t, 1, func(s *Server) { s.hooks.Store(&testHooks{inlineFuncs: -1, inlineLoad: -1}) })
	c := dialKind(t, "tcp", ts.addr, codec.TypeClient)
	var jobs []string
	for i := 0; i < 250; i++ {
		jobs = append(jobs, jobJSON(fmt.Sprint("f", i%3), fmt.Sprint("n", i), fmt.Sprint("w", i), 0))
	}
	c.write(codec.AppendRequest(nil, []byte("l"), codec.Load, []byte(`{"jobs":[`+strings.Join(jobs, ",")+`]}`)))
	c.send("s", codec.Status)
	c.send("p", codec.Ping)
	m := c.expect("s", codec.Unknown)
	if lines := strings.Split(strings.TrimSpace(string(m.Data)), "\n"); len(lines) != 3 {
		t.Fatalf("status %q", m.Data)
	}
	c.expect("p", codec.Pong)

	c.send("d", codec.Dump)
	c.send("p", codec.Ping)
	seen := 0
	for {
		m := c.expect("d", codec.Unknown)
		if string(m.Data) == "EOF" {
			break
		}
		var chunk struct{ Jobs []map[string]any }
		if err := json.Unmarshal(m.Data, &chunk); err != nil || len(chunk.Jobs) == 0 || len(chunk.Jobs) > 100 {
			t.Fatalf("dump frame of %d jobs: %v", len(chunk.Jobs), err)
		}
		seen += len(chunk.Jobs)
	}
	if seen != 250 {
		t.Fatalf("dumped %d jobs", seen)
	}
	c.expect("p", codec.Pong)
}

// Input the real server hangs up on, we hang up on; the server serves on.
func TestBadInputCloses(t *testing.T) {
	ts := runServer(t, 1)
	tests := []struct {
		name string
		kind byte
		send []byte
	}{
		{"bad magic", codec.TypeClient, []byte("GET / HTTP/1.0\r\n\r\n")},
		{"no separator", codec.TypeClient, []byte("\x00REQ\x00\x00\x00\x03abc")},
		{"empty command", codec.TypeClient, []byte("\x00REQ\x00\x00\x00\x05\x00\x01\x00\x01x")},
		{"unknown client type", 0, codec.AppendHandshake(nil, 3)},
		{"empty handshake", 0, []byte("\x00REQ\x00\x00\x00\x00")},
		{"too large", codec.TypeClient, []byte("\x00REQ\x7f\x00\x00\x00")},
		{"bad LOAD", codec.TypeClient, codec.AppendRequest(nil, []byte("l"), codec.Load, []byte(`{"jobs":[`))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := dialKind(t, "tcp", ts.addr, tt.kind)
			p.write(tt.send)
			p.expectClosed()
			q := dialKind(t, "tcp", ts.addr, codec.TypeClient)
			q.send("", codec.Ping)
			q.expect("", codec.Pong)
		})
	}
	if ts.s.Len() != 0 {
		t.Fatalf("%d jobs after bad input", ts.s.Len())
	}
}

// A unix socket path: a stale file is taken over and removed at Stop.
func TestUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // leaves a stale socket file
	s := sched.New(sched.Config{})
	defer s.Close()
	srv := New(Config{Addrs: []string{"unix://" + path}, Loops: 1}, s, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	c := dialKind(t, "unix", path, codec.TypeClient)
	c.send("", codec.Ping)
	c.expect("", codec.Pong)
	second := New(Config{Addrs: []string{"unix://" + path}, Loops: 1}, s, nil)
	if err := second.Start(); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Fatalf("second server on a live socket: %v", err)
	}
	srv.Stop(context.Background())
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("socket file after stop: %v", err)
	}
}

// After Drain no job is handed out and new connections are closed; the
// connections already open are still answered.
func TestDrain(t *testing.T) {
	ts := runServer(t, 1)
	c := dialKind(t, "tcp", ts.addr, codec.TypeClient)
	w := dialKind(t, "tcp", ts.addr, codec.TypeWorker)
	w.send("", codec.CanDo, "f")
	w.send("p", codec.Ping)
	w.expect("p", codec.Pong)
	ts.Drain(context.Background())
	c.send("1", codec.SubmitJob, jobJSON("f", "n", "", 0))
	c.expect("1", codec.Success)
	w.send("g", codec.GrabJob)
	w.send("p", codec.Ping)
	w.expect("p", codec.Pong) // and no JOB_ASSIGN before it
	dialKind(t, "tcp", ts.addr, 0).expectClosed()
}
