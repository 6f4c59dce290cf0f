package gearhttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	codec "switchyard/codec/gearman"
	"switchyard/engine/gearman"
	"switchyard/sched"
	"switchyard/sched/storetest"
)

// env is a scheduler with a Gearman port (for the workers) and gearmand's
// HTTP protocol in front of it, on ports of 127.0.0.1 the kernel picks.
type env struct {
	sched *sched.Sched
	srv   *Server
	gear  string // the Gearman port's address
	http  string // the HTTP port's address
}

func start(t *testing.T, cfg Config, scfg sched.Config) *env {
	t.Helper()
	s := sched.New(scfg)
	t.Cleanup(s.Close)
	g := gearman.New(gearman.Config{Addrs: []string{"tcp://127.0.0.1:0"}, HandlePrefix: "H:lap", Loops: 1}, s, nil)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, "the Gearman server", g.Stop) })
	cfg.Addr, cfg.HandlePrefix = "127.0.0.1:0", "H:lap"
	srv := New(cfg, s, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(t, "the HTTP server", srv.Stop) })
	return &env{sched: s, srv: srv, gear: g.Addrs()[0].String(), http: srv.Addr().String()}
}

// stop stops a server within 5 s. Once in CI one of them did not (after
// TestPayloads, every subtest passed): on a timeout the goroutines are
// logged, to show what the stop waited for.
func stop(t *testing.T, what string, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		buf := make([]byte, 1<<20)
		t.Errorf("stop %s: %v\ngoroutines:\n%s", what, err, buf[:runtime.Stack(buf, true)])
	}
}

// worker is a Gearman worker speaking the binary protocol on a socket.
type worker struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func newWorker(t *testing.T, addr string, funcs ...string) *worker {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &worker{t: t, c: c, r: bufio.NewReader(c)}
	for _, f := range funcs {
		w.send(codec.CanDo, f)
	}
	return w
}

func (w *worker) send(typ codec.Type, args ...string) {
	w.t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	if _, err := w.c.Write(codec.AppendPacket(nil, codec.Req, typ, bs...)); err != nil {
		w.t.Fatal(err)
	}
}

func (w *worker) packet() (codec.Type, []byte) {
	w.t.Helper()
	w.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [12]byte
	if _, err := io.ReadFull(w.r, hdr[:]); err != nil {
		w.t.Fatalf("worker: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[8:]))
	if _, err := io.ReadFull(w.r, body); err != nil {
		w.t.Fatalf("worker: %v", err)
	}
	return codec.Type(binary.BigEndian.Uint32(hdr[4:])), body
}

// grab waits for a job, as libgearman's workers do: GRAB_JOB, and on
// NO_JOB, PRE_SLEEP until a NOOP.
func (w *worker) grab() (handle, fn string, payload []byte) {
	w.t.Helper()
	for {
		w.send(codec.GrabJob)
		typ, body := w.packet()
		switch typ {
		case codec.JobAssign:
			parts := bytes.SplitN(body, []byte{0}, 3)
			return string(parts[0]), string(parts[1]), parts[2]
		case codec.NoJob:
			w.send(codec.PreSleep)
			if typ, _ := w.packet(); typ != codec.Noop {
				w.t.Fatalf("worker: %v while asleep", typ)
			}
		default:
			w.t.Fatalf("worker: %v to GRAB_JOB", typ)
		}
	}
}

// exchange sends raw request bytes on a new connection and reads the
// response.
func exchange(t *testing.T, addr, raw string) (*http.Response, []byte, net.Conn) {
	t.Helper()
	r := tryExchange(addr, raw)
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.conn.Close() })
	return r.resp, r.body, r.conn
}

type reply struct {
	resp *http.Response
	body []byte
	conn net.Conn
	err  error
}

// async runs exchange on another goroutine, for a request whose answer
// waits for a worker that the test drives.
func async(t *testing.T, addr, raw string) <-chan reply {
	got := make(chan reply, 1)
	go func() { got <- tryExchange(addr, raw) }()
	t.Cleanup(func() {
		select {
		case r := <-got:
			if r.conn != nil {
				r.conn.Close()
			}
		default:
		}
	})
	return got
}

// wait returns the reply async delivers.
func wait(t *testing.T, got <-chan reply) reply {
	t.Helper()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		r.conn.Close()
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no answer")
	}
	panic("unreachable")
}

func tryExchange(addr, raw string) reply {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return reply{err: err}
	}
	if _, err := io.WriteString(c, raw); err != nil {
		c.Close()
		return reply{err: err}
	}
	resp, body, err := tryRead(c, bufio.NewReader(c), raw)
	if err != nil {
		c.Close()
		return reply{err: err}
	}
	return reply{resp: resp, body: body, conn: c}
}

func readResponse(t *testing.T, c net.Conn, r *bufio.Reader, raw string) (*http.Response, []byte) {
	t.Helper()
	resp, body, err := tryRead(c, r, raw)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func tryRead(c net.Conn, r *bufio.Reader, raw string) (*http.Response, []byte, error) {
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(r, &http.Request{Method: method})
	for err == nil && resp.StatusCode == http.StatusContinue {
		resp, err = http.ReadResponse(r, &http.Request{Method: method})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%q: %w", clip(raw), err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("%q: body: %w", clip(raw), err)
	}
	return resp, body, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// closedByServer reports whether the server closes c with nothing more to
// read.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	n, err := c.Read(b[:])
	return n == 0 && errors.Is(err, io.EOF)
}

func post(fn, headers, body string) string {
	return fmt.Sprintf("POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n%s", fn, len(body), headers, body)
}

// checkReply checks a response's status, gearmand's headers and body.
func checkReply(t *testing.T, resp *http.Response, body []byte, status int, handle, command, wantBody string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d", resp.StatusCode, status)
	}
	if got := resp.Header.Get("X-Gearman-Job-Handle"); got != handle {
		t.Errorf("handle %q, want %q", got, handle)
	}
	if got := resp.Header.Get("X-Gearman-Command"); got != command {
		t.Errorf("command %q, want %q", got, command)
	}
	if resp.ContentLength != int64(len(wantBody)) || string(body) != wantBody {
		t.Errorf("body %q (Content-Length %d), want %q", clip(string(body)), resp.ContentLength, clip(wantBody))
	}
	for _, h := range []string{"Date", "Content-Type"} {
		if v := resp.Header.Values(h); len(v) > 0 {
			t.Errorf("%s: %q; gearmand sends none", h, v)
		}
	}
}

// A foreground request is answered with its job's end, whatever protocol
// its worker speaks; the handle is the one the worker got.
func TestForeground(t *testing.T) {
	tests := []struct {
		name       string
		exceptions bool
		work       func(w *worker, h string)
		command    string
		body       string
	}{
		{"complete", false, func(w *worker, h string) { w.send(codec.WorkComplete, h, "result") }, "WORK_COMPLETE", "result"},
		{"data then complete", false, func(w *worker, h string) {
			w.send(codec.WorkData, h, "d1")
			w.send(codec.WorkData, h, "d2")
			w.send(codec.WorkComplete, h, "done")
		}, "WORK_COMPLETE", "d1d2done"},
		{"status ends it", false, func(w *worker, h string) {
			w.send(codec.WorkStatus, h, "1", "2")
			w.send(codec.WorkComplete, h, "late")
		}, "WORK_STATUS", ""},
		{"warning ends it", false, func(w *worker, h string) {
			w.send(codec.WorkWarning, h, "careful")
			w.send(codec.WorkComplete, h, "late")
		}, "WORK_WARNING", "careful"},
		{"fail", false, func(w *worker, h string) { w.send(codec.WorkFail, h) }, "WORK_FAIL", ""},
		{"exception as fail", false, func(w *worker, h string) { w.send(codec.WorkException, h, "boom") }, "WORK_FAIL", ""},
		{"exception", true, func(w *worker, h string) { w.send(codec.WorkException, h, "boom") }, "WORK_EXCEPTION", "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, Config{Exceptions: tc.exceptions}, sched.Config{})
			w := newWorker(t, e.gear, "f")
			got := async(t, e.http, post("f", "", "payload"))
			h, fn, payload := w.grab()
			if fn != "f" || string(payload) != "payload" {
				t.Fatalf("worker got %q %q", fn, payload)
			}
			tc.work(w, h)
			r := wait(t, got)
			checkReply(t, r.resp, r.body, 200, h, tc.command, tc.body)
			if !strings.HasPrefix(h, "H:lap:") {
				t.Errorf("handle %q", h)
			}
		})
	}
}

// The headers that shape a job: priority, background, unique. Background
// jobs are queued with no worker, then one worker takes them in the order
// of their priorities.
func TestJobHeaders(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	bg := "X-Gearman-Background: true\r\n"
	handles := map[string]string{}
	for _, p := range []string{"low", "normal", "urgent", "HIGH", ""} {
		hdr := bg
		if p != "" {
			hdr += "X-Gearman-Priority: " + p + "\r\n"
		}
		resp, body, _ := exchange(t, e.http, post("prio", hdr, p))
		checkReply(t, resp, body, 200, resp.Header.Get("X-Gearman-Job-Handle"), "JOB_CREATED", "")
		handles[p] = resp.Header.Get("X-Gearman-Job-Handle")
	}
	w := newWorker(t, e.gear, "prio")
	var order []string
	for range handles {
		h, _, payload := w.grab()
		if handles[string(payload)] != h {
			t.Errorf("job %q has handle %s, its submit said %s", payload, h, handles[string(payload)])
		}
		order = append(order, string(payload))
		w.send(codec.WorkComplete, h, "")
	}
	if got := strings.Join(order, ","); got != "HIGH,normal,urgent,,low" {
		t.Errorf("run order %s", got)
	}

	// Coalescing: the same unique is the same job; without one (or with an
	// empty one), the same payload is ("-", as gearmand submits them).
	same := func(a, b string) {
		t.Helper()
		ra, _, _ := exchange(t, e.http, a)
		rb, _, _ := exchange(t, e.http, b)
		if ha, hb := ra.Header.Get("X-Gearman-Job-Handle"), rb.Header.Get("X-Gearman-Job-Handle"); ha != hb || ha == "" {
			t.Errorf("handles %q and %q, want one job", ha, hb)
		}
	}
	different := func(a, b string) {
		t.Helper()
		ra, _, _ := exchange(t, e.http, a)
		rb, _, _ := exchange(t, e.http, b)
		if ha, hb := ra.Header.Get("X-Gearman-Job-Handle"), rb.Header.Get("X-Gearman-Job-Handle"); ha == hb {
			t.Errorf("one handle %q, want two jobs", ha)
		}
	}
	same(post("u", bg+"X-Gearman-Unique: u1\r\n", "a"), post("u", bg+"X-Gearman-Unique: u1\r\n", "b"))
	different(post("u", bg+"X-Gearman-Unique: u2\r\n", "a"), post("u", bg+"X-Gearman-Unique: u3\r\n", "a"))
	same(post("u", bg, "same"), post("u", bg+"X-Gearman-Unique: \r\n", "same"))
	different(post("u", bg, "one"), post("u", bg, "two"))

	// Only "true" makes a job background: the others wait for the result.
	for _, v := range []string{"yes", "1", "false"} {
		t.Run("background "+v, func(t *testing.T) {
			got := async(t, e.http, post("fg", "X-Gearman-Background: "+v+"\r\n", v))
			w := newWorker(t, e.gear, "fg")
			h, _, _ := w.grab()
			w.send(codec.WorkComplete, h, "")
			if c := wait(t, got).resp.Header.Get("X-Gearman-Command"); c != "WORK_COMPLETE" {
				t.Errorf("command %q", c)
			}
		})
	}
}

// With a durable store, JOB_CREATED goes out once the job is on disk; a
// write that fails is gearmand's answer to a queue error, and the job is
// gone. A full queue is answered the same way.
func TestBackgroundStored(t *testing.T) {
	st := storetest.NewGate(8)
	e := start(t, Config{}, sched.Config{Store: st})
	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, post("f", "X-Gearman-Background: true\r\nX-Gearman-Unique: u1\r\n", "a"))
	<-st.Queued
	// Nothing may come before the store answers (a read with a deadline:
	// the check for what must not happen).
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var b [1]byte
	if _, err := c.Read(b[:]); err == nil {
		t.Fatal("answered before the store did")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatal(err)
	}
	st.Answer(nil)
	resp, body := readResponse(t, c, bufio.NewReader(c), "POST")
	h := resp.Header.Get("X-Gearman-Job-Handle")
	checkReply(t, resp, body, 200, h, "JOB_CREATED", "")
	id, ok := codec.NewHandles("H:lap").Parse([]byte(h))
	if !ok || !e.sched.Status(id).Known {
		t.Fatalf("handle %q is no queued job", h)
	}

	got := async(t, e.http, post("f", "X-Gearman-Background: true\r\nX-Gearman-Unique: u2\r\n", "b"))
	<-st.Queued
	st.Answer(errors.New("no space left on device"))
	r := wait(t, got)
	checkReply(t, r.resp, r.body, 200, "QUEUE_ERROR", "ERROR", "")
	if st := e.sched.StatusUnique([]byte("u2")); st.Known {
		t.Fatal("a job that never reached the store is queued")
	}

	got = async(t, e.http, post("full", "X-Gearman-Background: true\r\n", "1"))
	<-st.Queued
	st.Answer(nil)
	if r := wait(t, got); r.resp.Header.Get("X-Gearman-Command") != "JOB_CREATED" {
		t.Fatalf("first job: %v", r.resp.Header)
	}
	e.sched.SetMaxQueue([]byte("full"), [3]int{1, 1, 1})
	resp, body, _ = exchange(t, e.http, post("full", "X-Gearman-Background: true\r\n", "2"))
	checkReply(t, resp, body, 200, "QUEUE_ERROR", "ERROR", "")
	resp, body, _ = exchange(t, e.http, post("full", "", "3"))
	checkReply(t, resp, body, 200, "QUEUE_ERROR", "ERROR", "")
}

func TestUniqueTooLarge(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	resp, body, _ := exchange(t, e.http, post("f", "X-Gearman-Unique: "+strings.Repeat("u", 65)+"\r\n", "x"))
	checkReply(t, resp, body, 200, "ARGUMENT_TOO_LARGE", "ERROR", "")
	// 64 bytes is fine.
	resp, body, _ = exchange(t, e.http, post("f", "X-Gearman-Background: true\r\nX-Gearman-Unique: "+strings.Repeat("u", 64)+"\r\n", "x"))
	checkReply(t, resp, body, 200, resp.Header.Get("X-Gearman-Job-Handle"), "JOB_CREATED", "")
}

// waitClients waits until job id has n clients attached.
func waitClients(t *testing.T, s *sched.Sched, id uint64, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.Status(id).Clients != n; {
		if time.Now().After(deadline) {
			t.Fatalf("job %d has %d clients, want %d", id, s.Status(id).Clients, n)
		}
		time.Sleep(time.Millisecond) // polling the scheduler's view
	}
}

// jobOf returns the id of the one live job of fn, once there is one.
func jobOf(t *testing.T, s *sched.Sched, fn string) uint64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		for _, j := range s.Jobs() {
			if j.Func == fn {
				return j.ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job of %s", fn)
		}
		time.Sleep(time.Millisecond) // polling the scheduler's view
	}
}

// A client that hangs up leaves its job as a Gearman client does: a
// running job runs on (its worker's result is taken, and dropped), a
// queued one nobody else waits for is dropped.
func TestClientLeaves(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	w := newWorker(t, e.gear, "run")
	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, post("run", "", "x"))
	h, _, _ := w.grab()
	id, _ := codec.NewHandles("H:lap").Parse([]byte(h))
	waitClients(t, e.sched, id, 1)
	c.Close()
	waitClients(t, e.sched, id, 0)
	if st := e.sched.Status(id); !st.Known || !st.Running {
		t.Fatalf("running job after its client left: %+v", st)
	}
	w.send(codec.WorkComplete, h, "nobody listens")
	w.send(codec.EchoReq, "after") // no JOB_NOT_FOUND before the echo
	if typ, body := w.packet(); typ != codec.EchoRes {
		t.Fatalf("worker got %v %q", typ, body)
	}
	if e.sched.Status(id).Known {
		t.Fatal("completed job still known")
	}

	// Half-closing is leaving, as gearmand has it.
	c, err = net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, post("queued", "", "y"))
	id = jobOf(t, e.sched, "queued")
	c.(*net.TCPConn).CloseWrite()
	if !closedByServer(t, c) {
		t.Fatal("a half-closed request was answered")
	}
	waitClients(t, e.sched, id, 0)
	if e.sched.Status(id).Known {
		t.Fatal("a queued job nobody waits for is still queued")
	}
}

// --http-timeout: the request is answered 504 with the job's handle, and
// the job is left as a departed client leaves it.
func TestTimeout(t *testing.T) {
	e := start(t, Config{Timeout: 50 * time.Millisecond}, sched.Config{})
	resp, body, c := exchange(t, e.http, post("nobody", "", "x"))
	h := resp.Header.Get("X-Gearman-Job-Handle")
	checkReply(t, resp, body, http.StatusGatewayTimeout, h, "", "")
	id, ok := codec.NewHandles("H:lap").Parse([]byte(h))
	if !ok {
		t.Fatalf("handle %q", h)
	}
	if !closedByServer(t, c) {
		t.Fatal("connection left open")
	}
	waitClients(t, e.sched, id, 0)
	if e.sched.Status(id).Known {
		t.Fatal("the job outlived its timed-out request")
	}
}

// Requests gearmand answers without a job, or not at all.
func TestNoJob(t *testing.T) {
	e := start(t, Config{MaxBody: 1024}, sched.Config{})
	for _, raw := range []string{
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"PUT //// HTTP/1.0\r\n\r\n",
	} {
		resp, body, c := exchange(t, e.http, raw)
		checkReply(t, resp, body, http.StatusNotFound, "", "", "")
		if !closedByServer(t, c) {
			t.Errorf("%q: connection left open", raw)
		}
	}
	resp, body, _ := exchange(t, e.http, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
	checkReply(t, resp, body, http.StatusOK, "", "", "")

	resp, body, _ = exchange(t, e.http, post("f", "", strings.Repeat("b", 1025)))
	checkReply(t, resp, body, http.StatusRequestEntityTooLarge, "", "", "")
	resp, body, _ = exchange(t, e.http, "POST /f HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n401\r\n"+strings.Repeat("b", 1025)+"\r\n0\r\n\r\n")
	checkReply(t, resp, body, http.StatusRequestEntityTooLarge, "", "", "")

	// gearmand closes the connection on any other method, "OPTIONS *"
	// (which net/http would answer itself) included.
	for _, m := range []string{"DELETE /f", "OPTIONS /f", "OPTIONS *", "PATCH /f", "get /f"} {
		c, err := net.Dial("tcp", e.http)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, m+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
		if !closedByServer(t, c) {
			t.Errorf("%s: answered", m)
		}
		c.Close()
	}
	// A body cut short: no job, no answer.
	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /f HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc")
	c.(*net.TCPConn).CloseWrite()
	if !closedByServer(t, c) {
		t.Error("a body cut short was answered")
	}
	c.Close()
	if n := len(e.sched.Jobs()); n != 0 {
		t.Fatalf("%d jobs", n)
	}

	// TRACE is refused: an echo of the head would hand a page's script
	// the request's cookies.
	resp, body, _ = exchange(t, e.http, "TRACE /f HTTP/1.1\r\nHost: x\r\nCookie: secret=1\r\nX-A: b\r\n\r\n")
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD, POST, PUT" || len(body) != 0 || !resp.Close {
		t.Fatalf("TRACE: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	for k, v := range resp.Header {
		if strings.Contains(strings.Join(v, ","), "secret") || k == "X-A" {
			t.Fatalf("TRACE echoed %s: %q", k, v)
		}
	}
}

// What each method submits: POST and PUT their body (by length or
// chunked, and up to the limit), GET and HEAD nothing; HEAD is answered
// without a body or X-Gearman-Command. The function is the raw target.
func TestPayloads(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	big := strings.Repeat("0123456789abcdef", 256<<10) // 4 MiB
	tests := []struct {
		name, raw, fn, payload string
		head                   bool
	}{
		{"POST", post("echo", "", "hello"), "echo", "hello", false},
		{"PUT", "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", "echo", "abc", false},
		{"empty POST", post("echo", "", ""), "echo", "", false},
		{"POST without length", "POST /echo HTTP/1.0\r\n\r\n", "echo", "", false},
		{"chunked", "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "echo", "abcde", false},
		{"GET ignores a body", "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", "echo", "", false},
		{"HEAD", "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n", "echo", "", true},
		{"raw target", "GET //a/b?c=%20 HTTP/1.1\r\nHost: x\r\n\r\n", "a/b?c=%20", "", false},
		{"4 MiB", post("echo", "", big), "echo", big, false},
		{"4 MiB with Expect", "POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
			fmt.Sprint(len(big)) + "\r\n\r\n" + big, "echo", big, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorker(t, e.gear, tc.fn)
			got := async(t, e.http, tc.raw)
			h, fn, payload := w.grab()
			if fn != tc.fn || string(payload) != tc.payload {
				t.Fatalf("worker got %q, %d bytes; want %q, %d bytes", fn, len(payload), tc.fn, len(tc.payload))
			}
			w.send(codec.WorkComplete, h, "r:"+string(payload))
			r := wait(t, got)
			if tc.head {
				if r.resp.StatusCode != 200 || r.resp.Header.Get("X-Gearman-Job-Handle") != h ||
					r.resp.Header.Get("X-Gearman-Command") != "" || r.resp.ContentLength != int64(len("r:")+len(tc.payload)) {
					t.Errorf("HEAD: %d %v", r.resp.StatusCode, r.resp.Header)
				}
				return
			}
			checkReply(t, r.resp, r.body, 200, h, "WORK_COMPLETE", "r:"+tc.payload)
		})
	}
}

// gearmand closes the connection after every response. A client that asks
// to keep it open ("Connection: keep-alive") has it kept.
func TestConnection(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	bg := "X-Gearman-Background: true\r\n"
	for _, raw := range []string{
		post("f", bg, "1"),
		"POST /f HTTP/1.0\r\nContent-Length: 1\r\n" + bg + "\r\n2",
		post("f", bg, "3") + post("f", bg, "4"), // the second is not read
	} {
		resp, _, c := exchange(t, e.http, raw)
		if !resp.Close || !closedByServer(t, c) {
			t.Errorf("%q: connection left open", clip(raw))
		}
	}

	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for i, ka := range []string{"Connection: keep-alive\r\n", "Connection: Keep-Alive\r\n", ""} {
		raw := post("f", bg+ka, fmt.Sprint("ka", i))
		if i == 1 {
			raw = "POST /f HTTP/1.0\r\nContent-Length: 3\r\n" + bg + ka + "\r\nka1"
		}
		io.WriteString(c, raw)
		resp, body := readResponse(t, c, r, raw)
		checkReply(t, resp, body, 200, resp.Header.Get("X-Gearman-Job-Handle"), "JOB_CREATED", "")
		if resp.Close != (ka == "") {
			t.Errorf("request %d: close %v", i, resp.Close)
		}
	}
	if !closedByServer(t, c) {
		t.Fatal("connection left open after a request without keep-alive")
	}
}

// Stop drops the requests that wait, unanswered, and their jobs with them
// if nobody else waits; Drain lets them finish.
func TestStopAndDrain(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	w := newWorker(t, e.gear, "run")
	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, post("run", "", "x"))
	h, _, _ := w.grab()

	e.srv.Drain(context.Background())
	// New connections are refused once the listener is closed.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c2, err := net.Dial("tcp", e.http)
		if err != nil {
			break
		}
		c2.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting after Drain")
		}
		time.Sleep(time.Millisecond) // polling for the listener's close
	}
	w.send(codec.WorkComplete, h, "drained")
	resp, body := readResponse(t, c, bufio.NewReader(c), "POST")
	checkReply(t, resp, body, 200, h, "WORK_COMPLETE", "drained")

	e2 := start(t, Config{}, sched.Config{})
	c, err = net.Dial("tcp", e2.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, post("nobody", "", "x"))
	id := jobOf(t, e2.sched, "nobody")
	waitClients(t, e2.sched, id, 1)
	stop(t, "the HTTP server", e2.srv.Stop)
	if !closedByServer(t, c) {
		t.Fatal("a waiting request was answered at Stop")
	}
	for deadline := time.Now().Add(10 * time.Second); e2.sched.Status(id).Known; {
		if time.Now().After(deadline) {
			t.Fatal("the stopped request's job is still queued")
		}
		time.Sleep(time.Millisecond) // polling the scheduler's view
	}
}

// A request with both Content-Length and Transfer-Encoding is the shape of
// request smuggling (RFC 9112 §6.3: the two disagree on where the body
// ends, and a proxy in front may have taken the other): it is refused with
// 400 and the connection closed, whatever follows it unread, so neither
// it nor a request hidden in its body is ever submitted. net/http alone
// takes the chunked body and drops the Content-Length before a handler
// sees the request. A request with Transfer-Encoding alone is served, and
// its connection closed after the answer.
func TestContentLengthWithTransferEncoding(t *testing.T) {
	e := start(t, Config{}, sched.Config{})
	bg := "X-Gearman-Background: true\r\nConnection: keep-alive\r\n"
	hidden := "POST /smuggled HTTP/1.1\r\nHost: x\r\nX-Gearman-Background: true\r\nContent-Length: 1\r\n\r\nx"
	next := "POST /next HTTP/1.1\r\nHost: x\r\n" + bg + "Content-Length: 1\r\n\r\nx"
	for _, tc := range []struct {
		name, raw string
	}{
		{"chunked body, a request after it", "POST /f HTTP/1.1\r\nHost: x\r\n" + bg +
			"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden},
		{"a request in the Content-Length body", "POST /f HTTP/1.1\r\nHost: x\r\n" + bg +
			fmt.Sprintf("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n0\r\n\r\n", 5+len(hidden)) + hidden},
		{"names in any case", "POST /f HTTP/1.1\r\nHost: x\r\n" + bg +
			"transfer-encoding: CHUNKED\r\ncontent-LENGTH: 5\r\n\r\n0\r\n\r\n" + hidden},
		{"HTTP/1.0, where net/http ignores Transfer-Encoding", "POST /f HTTP/1.0\r\n" + bg +
			fmt.Sprintf("Transfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n", len(hidden)) + hidden},
		{"a CR before the name, which net/http trims", "POST /f HTTP/1.1\r\nHost: x\r\n" + bg +
			"\rContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden},
		{"Transfer-Encoding folded onto two lines", "POST /f HTTP/1.1\r\nHost: x\r\n" + bg +
			"Content-Length: 5\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n" + hidden},
		{"the second request of a kept connection", post("first", bg, "1") +
			"POST /f HTTP/1.1\r\nHost: x\r\n" + bg + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + hidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", e.http)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, tc.raw+next); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			if strings.HasPrefix(tc.raw, "POST /first ") {
				resp, _ := readResponse(t, c, r, tc.raw)
				if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gearman-Command") != "JOB_CREATED" {
					t.Fatalf("the first request: %d %v", resp.StatusCode, resp.Header)
				}
			}
			resp, body := readResponse(t, c, r, tc.raw)
			if resp.StatusCode != http.StatusBadRequest || !resp.Close {
				t.Errorf("answered %d (close %v) %v %q, want 400 and the connection closed", resp.StatusCode, resp.Close, resp.Header, body)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
				t.Errorf("after the 400: %q, %v; want the connection closed", rest, err)
			}
			for _, j := range e.sched.Jobs() {
				if j.Func != "first" {
					t.Errorf("a job of %q was submitted", j.Func)
				}
			}
		})
	}

	// Transfer-Encoding alone: served, then the connection is closed, so
	// the server never has to find where a chunked body ends to read on.
	raw := "POST /chunked HTTP/1.1\r\nHost: x\r\n" + bg + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" + next
	c, err := net.Dial("tcp", e.http)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, raw)
	r := bufio.NewReader(c)
	resp, _ := readResponse(t, c, r, raw)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Gearman-Command") != "JOB_CREATED" || !resp.Close {
		t.Fatalf("chunked: %d %v (close %v)", resp.StatusCode, resp.Header, resp.Close)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
		t.Errorf("after the chunked request: %q, %v; want the connection closed", rest, err)
	}
	for _, j := range e.sched.Jobs() {
		if j.Func == "next" {
			t.Error("the request after the chunked one was served")
		}
	}
}
