package main

// gearmand's HTTP protocol (-r http), end to end: Debian's gearmand and
// switchyard side by side, each with a raw Gearman worker on its Gearman
// port, the same request bytes sent to both and the answers compared:
// status, X-Gearman-Job-Handle (its number aside: the two servers number
// jobs differently), X-Gearman-Command, Content-Length, body, whether the
// connection is closed, and the payload the worker got. Where switchyard
// answers differently on purpose (gearmand sends broken bytes or never
// answers), TestE2EHTTPAgainstGearmand/differences checks each server
// against what it does; docs/http.md lists those cases.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// debianGearmand is the baseline of the differential tests.
const debianGearmand = "/usr/sbin/gearmand"

// httpServer is a server started with -r http: its Gearman and HTTP ports.
type httpServer struct {
	name string
	proc *serverProc
	gear string
	http string
	// leftovers: the server may hand a worker a job whose client has gone,
	// made by an earlier request. gearmand does: it drops such a job only
	// when a worker would take it, and only once it has dealt with the
	// client's leaving, which its proc thread may do after the job is
	// queued (a chunked request's job is queued after gearmand has closed
	// its connection). switchyard drops the job at once: none is handed.
	leftovers bool
}

// startHTTPServer starts bin with -r http --http-port 0: two listeners,
// the Gearman one answering getpid, the other HTTP.
func startHTTPServer(t *testing.T, bin string, args ...string) *httpServer {
	t.Helper()
	proc, others := startBinaryPorts(t, bin, 2, append([]string{"-r", "http", "--http-port", "0"}, args...)...)
	return &httpServer{name: filepath.Base(bin), proc: proc, gear: proc.addr, http: others[0]}
}

// httpAnswer is what a server sent back, as the comparison sees it.
type httpAnswer struct {
	raw     []byte // every byte before the server closed, or the deadline passed
	status  int    // 0: no response that parses
	handle  string // X-Gearman-Job-Handle, its number replaced by N
	command string // X-Gearman-Command
	length  string // Content-Length
	body    string
	closed  bool // the server closed the connection
}

func (a httpAnswer) String() string {
	body := a.body
	if len(body) > 40 {
		body = fmt.Sprintf("%q... (%d bytes)", body[:40], len(body))
	} else {
		body = strconv.Quote(body)
	}
	return fmt.Sprintf("status %d handle %q command %q Content-Length %q body %s closed %v", a.status, a.handle, a.command, a.length, body, a.closed)
}

// same compares what the clients of both servers can see.
func (a httpAnswer) same(b httpAnswer) bool {
	return a.status == b.status && a.handle == b.handle && a.command == b.command &&
		a.length == b.length && a.body == b.body && a.closed == b.closed
}

var httpHandleNumber = regexp.MustCompile(`^(H:[^:]+:)\d*$`)

// sendHTTP sends raw on a new connection and reads until the server closes
// it or wait has passed, then parses the first response. It reports only
// through its results: it runs beside the test's goroutine.
func sendHTTP(addr, raw string, wait time.Duration) (httpAnswer, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return httpAnswer{}, err
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		return httpAnswer{}, err
	}
	return readHTTP(c, raw, wait)
}

func readHTTP(c net.Conn, raw string, wait time.Duration) (httpAnswer, error) {
	c.SetReadDeadline(time.Now().Add(wait))
	var a httpAnswer
	var err error
	a.raw, err = io.ReadAll(c)
	var ne net.Error
	switch {
	case err == nil:
		a.closed = true
	case errors.As(err, &ne) && ne.Timeout():
	default:
		return a, err
	}
	method, _, _ := strings.Cut(raw, " ")
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(a.raw)), &http.Request{Method: method})
	if err != nil {
		return a, nil // nothing, or nothing HTTP
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return a, nil
	}
	a.status, a.command, a.length, a.body = resp.StatusCode, resp.Header.Get("X-Gearman-Command"), resp.Header.Get("Content-Length"), string(body)
	a.handle = httpHandleNumber.ReplaceAllString(resp.Header.Get("X-Gearman-Job-Handle"), "${1}N")
	return a, nil
}

// httpCase is one request and what the worker does with the job it makes.
type httpCase struct {
	name string
	raw  string
	fn   string        // the function whose worker gets a job; "" for none
	wait time.Duration // how long to read the answer; 0 = e2eWaitTimeout
}

// httpWorkerFuncs are what the differential tests' workers do:
// workHTTPJob says how.
var httpWorkerFuncs = []string{"echo", "fixed", "status", "warn", "fail", "exc", "data", "echo?x=1", "slow"}

// workHTTPJob plays the worker's part for a job of fn: "echo" completes
// with the payload; the others report what their names say.
func workHTTPJob(g *gearConn, handle, fn, payload string) {
	switch fn {
	case "echo", "echo?x=1":
		g.send(pWorkComplete, handle, payload)
	case "fixed":
		g.send(pWorkComplete, handle, "abc")
	case "status":
		g.send(12, handle, "1", "2") // WORK_STATUS
		g.send(pWorkComplete, handle, "late")
	case "warn":
		g.send(29, handle, "careful") // WORK_WARNING
		g.send(pWorkComplete, handle, "late")
	case "fail":
		g.send(pWorkFail, handle)
	case "exc":
		g.send(pWorkException, handle, "boom")
	case "data":
		g.send(pWorkData, handle, "d1")
		g.send(pWorkData, handle, "d2")
		g.send(pWorkComplete, handle, "done")
	default:
		g.t.Fatalf("no worker part for %s", fn)
	}
}

// httpRun is one request answered by one server, and the job its worker got.
type httpRun struct {
	answer  httpAnswer
	handle  string // the job's handle as the worker got it; "" if none
	payload string
}

// run sends c to the server and, if c makes a job, works it with g.
func (s *httpServer) run(t *testing.T, g *gearConn, c httpCase) httpRun {
	t.Helper()
	wait := c.wait
	if wait == 0 {
		wait = e2eWaitTimeout
	}
	type result struct {
		a   httpAnswer
		err error
	}
	got := make(chan result, 1)
	go func() {
		a, err := sendHTTP(s.http, c.raw, wait)
		got <- result{a, err}
	}()
	var r httpRun
	for c.fn != "" {
		job := g.grabJob(e2eWaitTimeout)
		if job[1] != c.fn {
			if !s.leftovers {
				t.Fatalf("%s: %s: the worker got a job of %q, want %q", s.name, c.name, job[1], c.fn)
			}
			// An earlier request's, its client gone: worked, unseen.
			t.Logf("%s: %s: the worker got a job of %q an earlier request left (payload %q); worked, and the next taken", s.name, c.name, job[1], clipBytes([]byte(job[2])))
			workHTTPJob(g, job[0], job[1], job[2])
			continue
		}
		r.handle, r.payload = job[0], job[2]
		workHTTPJob(g, job[0], job[1], job[2])
		break
	}
	res := <-got
	if res.err != nil {
		t.Fatalf("%s: %s: %v", s.name, c.name, res.err)
	}
	r.answer = res.a
	return r
}

// httpPair is gearmand and switchyard, each with its worker.
type httpPair struct {
	servers [2]*httpServer // gearmand, switchyard
	workers [2]*gearConn
}

func startHTTPPair(t *testing.T) *httpPair {
	t.Helper()
	if isGearmand(t) {
		t.Skip("compares switchyard with gearmand")
	}
	if _, err := os.Stat(debianGearmand); err != nil {
		missing(t, debianGearmand)
	}
	p := &httpPair{}
	// switchyard's own timeout, short enough for a test to see it lapse.
	p.servers[0] = startHTTPServer(t, debianGearmand)
	p.servers[0].leftovers = true
	p.servers[1] = startHTTPServer(t, serverBinary(t), "--http-timeout", "5s")
	for i, s := range p.servers {
		g := dialGear(t, s.gear, s.name+" worker")
		for _, fn := range httpWorkerFuncs {
			g.send(pCanDo, fn)
		}
		waitWorkers(t, s.gear, "slow", 1)
		p.workers[i] = g
	}
	return p
}

// compare sends c to both servers and checks that they answer alike and
// that their workers got the same payload.
func (p *httpPair) compare(t *testing.T, c httpCase) [2]httpRun {
	t.Helper()
	var runs [2]httpRun
	for i, s := range p.servers {
		runs[i] = s.run(t, p.workers[i], c)
	}
	if !runs[0].answer.same(runs[1].answer) {
		t.Errorf("%s:\n gearmand:   %v\n switchyard: %v\n gearmand sent %q", c.name, runs[0].answer, runs[1].answer, clipBytes(runs[0].answer.raw))
	}
	if runs[0].payload != runs[1].payload {
		t.Errorf("%s: gearmand's worker got %d bytes, switchyard's %d", c.name, len(runs[0].payload), len(runs[1].payload))
	}
	return runs
}

func clipBytes(b []byte) []byte {
	if len(b) > 300 {
		return b[:300]
	}
	return b
}

func httpPost(fn, headers, body string) string {
	return fmt.Sprintf("POST /%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n%s", fn, len(body), headers, body)
}

func TestE2EHTTPAgainstGearmand(t *testing.T) {
	t.Parallel()
	p := startHTTPPair(t)

	// Every combination of gearmand's three headers, on a job a worker
	// echoes: foreground (waits for WORK_COMPLETE) or background
	// (JOB_CREATED), whatever the priority; uniques and payloads differ
	// from request to request, so no two coalesce.
	t.Run("headers", func(t *testing.T) {
		i := 0
		for _, unique := range []string{"", "u", "empty"} {
			for _, bg := range []string{"", "yes", "no", "true", "TRUE", "1"} {
				for _, prio := range []string{"", "high", "low", "normal", "bad"} {
					i++
					var h strings.Builder
					switch unique {
					case "u":
						fmt.Fprintf(&h, "X-Gearman-Unique: u%d\r\n", i)
					case "empty":
						h.WriteString("X-Gearman-Unique: \r\n")
					}
					if bg != "" {
						fmt.Fprintf(&h, "X-Gearman-Background: %s\r\n", bg)
					}
					if prio != "" {
						fmt.Fprintf(&h, "X-Gearman-Priority: %s\r\n", prio)
					}
					p.compare(t, httpCase{name: fmt.Sprintf("unique %q background %q priority %q", unique, bg, prio),
						raw: httpPost("echo", h.String(), fmt.Sprint("p", i)), fn: "echo"})
				}
			}
		}
	})

	t.Run("requests", func(t *testing.T) {
		big := strings.Repeat("0123456789abcdef", 256<<10) // 4 MiB
		for _, c := range []httpCase{
			{name: "POST", raw: httpPost("echo", "", "hello"), fn: "echo"},
			{name: "empty body", raw: httpPost("echo", "", ""), fn: "echo"},
			{name: "no Content-Length", raw: "POST /echo HTTP/1.1\r\nHost: x\r\n\r\n", fn: "echo"},
			{name: "HTTP/1.0", raw: "POST /echo HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi", fn: "echo"},
			{name: "HTTP/1.0 without a length", raw: "POST /echo HTTP/1.0\r\n\r\n", fn: "echo"},
			{name: "Connection: close", raw: httpPost("echo", "Connection: close\r\n", "c"), fn: "echo"},
			{name: "PUT", raw: "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nput", fn: "echo"},
			{name: "GET", raw: "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", fn: "echo"},
			{name: "GET with a body", raw: "GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", fn: "echo"},
			{name: "leading slashes", raw: "GET ///echo HTTP/1.1\r\nHost: x\r\n\r\n", fn: "echo"},
			{name: "query in the name", raw: "GET /echo?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", fn: "echo?x=1"},
			{name: "HEAD", raw: "HEAD /fixed HTTP/1.1\r\nHost: x\r\n\r\n", fn: "fixed"},
			{name: "4 MiB", raw: httpPost("echo", "", big), fn: "echo"},
			{name: "WORK_STATUS", raw: httpPost("status", "", "s"), fn: "status"},
			{name: "WORK_WARNING", raw: httpPost("warn", "", "w"), fn: "warn"},
			{name: "WORK_FAIL", raw: httpPost("fail", "", "f"), fn: "fail"},
			{name: "WORK_EXCEPTION", raw: httpPost("exc", "", "e"), fn: "exc"},
			{name: "unique of 64 bytes", raw: httpPost("echo", "X-Gearman-Unique: "+strings.Repeat("u", 64)+"\r\n", "x"), fn: "echo"},
			{name: "unique of 65 bytes", raw: httpPost("echo", "X-Gearman-Unique: "+strings.Repeat("u", 65)+"\r\n", "x")},
			{name: "POST /", raw: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"},
			{name: "GET /", raw: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
			{name: "PUT //", raw: "PUT // HTTP/1.0\r\n\r\n"},
			{name: "DELETE", raw: "DELETE /echo HTTP/1.1\r\nHost: x\r\n\r\n"},
			{name: "OPTIONS", raw: "OPTIONS /echo HTTP/1.1\r\nHost: x\r\n\r\n"},
			{name: "PATCH", raw: "PATCH /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"},
			{name: "background, no worker", raw: httpPost("nobody-bg", "X-Gearman-Background: true\r\n", "x")},
			// Neither answers while no worker runs the job (switchyard's
			// --http-timeout is 5s here; see differences).
			{name: "foreground, no worker", raw: httpPost("nobody", "", "x"), wait: time.Second},
		} {
			p.compare(t, c)
		}
		for _, s := range p.servers {
			waitStatus(t, s.gear, "nobody-bg", "one job queued", func(st funcStatus) bool {
				return st.queued == 1 && st.running == 0 && st.workers == 0
			})
		}
	})

	// The priority headers as the queues see them: background jobs of a
	// function without a worker, then "prioritystatus".
	t.Run("priorities", func(t *testing.T) {
		for i, prio := range []string{"high", "low", "normal", "urgent", "", "HIGH", "Low"} {
			h := "X-Gearman-Background: true\r\n"
			if prio != "" {
				h += "X-Gearman-Priority: " + prio + "\r\n"
			}
			p.compare(t, httpCase{name: "priority " + prio, raw: httpPost("prio", h, fmt.Sprint(i))})
		}
		var lines [2]string
		for i, s := range p.servers {
			for _, l := range strings.Split(adminCmd(t, s.gear, "prioritystatus"), "\n") {
				if strings.HasPrefix(l, "prio\t") {
					lines[i] = l
				}
			}
		}
		if lines[0] != lines[1] || lines[0] != "prio\t2\t3\t2\t0" {
			t.Errorf("prioritystatus: gearmand %q, switchyard %q, want %q", lines[0], lines[1], "prio\t2\t3\t2\t0")
		}
	})

	// A client that hangs up while its job runs: the job runs on, its
	// worker's result is taken (no error to the worker), and then it is
	// gone, as with a Gearman client.
	t.Run("client leaves", func(t *testing.T) {
		for i, s := range p.servers {
			g := p.workers[i]
			c, err := net.DialTimeout("tcp", s.http, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, httpPost("slow", "", "zzz"))
			job := g.grabJob(e2eWaitTimeout)
			waitStatus(t, s.gear, "slow", "running", func(st funcStatus) bool { return st.queued == 1 && st.running == 1 })
			c.Close()
			st, _ := adminStatus(t, s.gear)
			if st["slow"] != (funcStatus{1, 1, 1}) {
				t.Errorf("%s: slow %+v after its client left, want running", s.name, st["slow"])
			}
			g.send(pWorkComplete, job[0], "nobody listens")
			g.send(pEchoReq, "after")
			g.expect(pEchoRes, "after") // and no JOB_NOT_FOUND before it
			waitStatus(t, s.gear, "slow", "done", func(st funcStatus) bool { return st == funcStatus{0, 0, 1} })
		}
	})

	// curl, the client gearmand's documentation and tests use, on a body
	// large enough that it asks "Expect: 100-continue" (gearmand never
	// answers that; curl goes on after a second).
	t.Run("curl", func(t *testing.T) {
		curl := requireTool(t, "curl")
		dir := t.TempDir()
		in := filepath.Join(dir, "in")
		big := bytes.Repeat([]byte("switchyard\x00\xff"), 4<<20/12)
		if err := os.WriteFile(in, big, 0o644); err != nil {
			t.Fatal(err)
		}
		var heads [2]string
		for i, s := range p.servers {
			out := filepath.Join(dir, s.name+".out")
			pr := startProc(t, "", curl, "-sS", "-D", "-", "-o", out, "--data-binary", "@"+in, "-H", "X-Gearman-Unique: curl",
				"http://"+s.http+"/echo")
			job := p.workers[i].grabJob(e2eWaitTimeout)
			if !bytes.Equal([]byte(job[2]), big) {
				t.Fatalf("%s: the worker got %d bytes, want the %d curl sent", s.name, len(job[2]), len(big))
			}
			workHTTPJob(p.workers[i], job[0], job[1], job[2])
			if code := pr.wait(t, e2eCmdTimeout); code != 0 {
				t.Fatalf("%s: curl exit %d: %s", s.name, code, pr.stderr.String())
			}
			got, err := os.ReadFile(out)
			if err != nil || !bytes.Equal(got, big) {
				t.Fatalf("%s: curl got %d bytes back (%v)", s.name, len(got), err)
			}
			headers := bufio.NewReader(strings.NewReader(pr.stdout.String()))
			resp, err := http.ReadResponse(headers, nil)
			for err == nil && resp.StatusCode == http.StatusContinue { // switchyard's, not gearmand's
				resp, err = http.ReadResponse(headers, nil)
			}
			if err != nil {
				t.Fatalf("%s: curl's headers: %v\n%s", s.name, err, pr.stdout.String())
			}
			heads[i] = fmt.Sprintf("%d %s %s %s", resp.StatusCode, httpHandleNumber.ReplaceAllString(resp.Header.Get("X-Gearman-Job-Handle"), "${1}N"),
				resp.Header.Get("X-Gearman-Command"), resp.Header.Get("Content-Length"))
		}
		if heads[0] != heads[1] {
			t.Errorf("curl: gearmand %q, switchyard %q", heads[0], heads[1])
		}
	})

	t.Run("differences", func(t *testing.T) { httpDifferences(t, p) })
}

// httpDifferences checks the cases where switchyard answers on purpose
// otherwise than gearmand, each server against what it does.
func httpDifferences(t *testing.T, p *httpPair) {
	gm, sy := p.servers[0], p.servers[1]
	gw, sw := p.workers[0], p.workers[1]
	both := func(c httpCase) (g, s httpRun) { return gm.run(t, gw, c), sy.run(t, sw, c) }

	// WORK_DATA: gearmand writes the data over the start of its header
	// (less each chunk's last byte) and appends as many stray bytes;
	// switchyard puts the data before the result.
	g, s := both(httpCase{name: "WORK_DATA", raw: httpPost("data", "", "x"), fn: "data"})
	if bytes.HasPrefix(g.answer.raw, []byte("HTTP/")) || !bytes.HasPrefix(g.answer.raw, []byte("ddTP/1.0 200 OK\r\n")) {
		t.Errorf("gearmand's WORK_DATA answer: %q", g.answer.raw)
	}
	if s.answer.status != 200 || s.answer.command != "WORK_COMPLETE" || s.answer.body != "d1d2done" {
		t.Errorf("switchyard's WORK_DATA answer: %v", s.answer)
	}

	// WORK_FAIL: gearmand drops the handle's last character.
	g, s = both(httpCase{name: "WORK_FAIL", raw: httpPost("fail", "", "f2"), fn: "fail"})
	if h := header(t, g.answer, "X-Gearman-Job-Handle"); h != g.handle[:len(g.handle)-1] {
		t.Errorf("gearmand's WORK_FAIL handle %q, the job's %q", h, g.handle)
	}
	if h := header(t, s.answer, "X-Gearman-Job-Handle"); h != s.handle {
		t.Errorf("switchyard's WORK_FAIL handle %q, the job's %q", h, s.handle)
	}

	// A foreground job no worker takes: gearmand waits for ever,
	// switchyard for --http-timeout, then answers 504 with the handle.
	s = sy.run(t, sw, httpCase{name: "timeout", raw: httpPost("nobody", "", "t"), wait: 20 * time.Second})
	if s.answer.status != http.StatusGatewayTimeout || !strings.HasPrefix(s.answer.handle, "H:") || !s.answer.closed {
		t.Errorf("switchyard after --http-timeout: %v", s.answer)
	}

	// TRACE: gearmand waits for as many bytes again as the request had,
	// and never answers; switchyard refuses it with 405, echoing nothing.
	trace := "TRACE /echo HTTP/1.1\r\nHost: x\r\nCookie: secret=1\r\n\r\n"
	g = gm.run(t, gw, httpCase{name: "TRACE", raw: trace, wait: time.Second})
	s = sy.run(t, sw, httpCase{name: "TRACE", raw: trace})
	if len(g.answer.raw) != 0 || g.answer.closed {
		t.Errorf("gearmand answered TRACE: %q", g.answer.raw)
	}
	if s.answer.status != http.StatusMethodNotAllowed || s.answer.body != "" || bytes.Contains(s.answer.raw, []byte("secret")) || !s.answer.closed {
		t.Errorf("switchyard's TRACE: %v", s.answer)
	}

	// Connection: keep-alive. gearmand reads on while the first job waits
	// and submits both; it answers the first WORK_COMPLETE that reaches
	// the connection, whichever job's, and closes, dropping the other job
	// with its client. switchyard reads the second request once it has
	// answered the first, and answers both. gearmand's worker starts once
	// both jobs are queued (else the answer depends on whether gearmand
	// read the second request in time), and skips any job of another
	// case still queued ahead of them.
	ka := httpPost("echo", "Connection: keep-alive\r\n", "k1") + httpPost("echo", "", "k2")
	for i, srv := range p.servers {
		type result struct {
			a   httpAnswer
			err error
		}
		before, _ := adminStatus(t, srv.gear)
		got := make(chan result, 1)
		go func() {
			a, err := sendHTTP(srv.http, ka, e2eWaitTimeout)
			got <- result{a, err}
		}()
		if i == 0 {
			waitStatus(t, srv.gear, "echo", "both requests' jobs queued", func(st funcStatus) bool { return st.queued >= before["echo"].queued+2 })
		}
		var ran []string     // k1 and k2, in the order they ran
		for len(ran) < 1+i { // gearmand answers one, switchyard both
			job := p.workers[i].grabJob(e2eWaitTimeout)
			workHTTPJob(p.workers[i], job[0], job[1], job[2])
			if job[2] == "k1" || job[2] == "k2" {
				ran = append(ran, job[2])
			}
		}
		r := <-got
		if r.err != nil {
			t.Fatal(r.err)
		}
		if n := bytes.Count(r.a.raw, []byte("X-Gearman-Command: WORK_COMPLETE")); n != len(ran) || !r.a.closed || !bytes.HasSuffix(r.a.raw, []byte(ran[len(ran)-1])) {
			t.Errorf("%s: %d answers to two requests, the first with keep-alive, closed %v, after running %q: %q", srv.name, n, r.a.closed, ran, r.a.raw)
		}
	}

	// What net/http refuses before switchyard sees it: HTTP/1.1 without
	// Host (400), a version other than 1.x (505). The function is not
	// echo: gearmand may still hand out the echo job keep-alive left,
	// which run tells from this request's only by its function.
	noHost := "POST /fixed HTTP/1.1\r\nContent-Length: 1\r\n\r\nh"
	g = gm.run(t, gw, httpCase{name: "no Host", raw: noHost, fn: "fixed"})
	s = sy.run(t, sw, httpCase{name: "no Host", raw: noHost})
	if g.answer.status != 200 || s.answer.status != http.StatusBadRequest {
		t.Errorf("HTTP/1.1 without Host: gearmand %v, switchyard %v", g.answer, s.answer)
	}
	v2 := "POST /echo HTTP/2.0\r\nContent-Length: 1\r\n\r\nv"
	g = gm.run(t, gw, httpCase{name: "HTTP/2.0", raw: v2})
	s = sy.run(t, sw, httpCase{name: "HTTP/2.0", raw: v2})
	if len(g.answer.raw) != 0 || !g.answer.closed || s.answer.status != http.StatusHTTPVersionNotSupported {
		t.Errorf("HTTP/2.0: gearmand %q, switchyard %v", g.answer.raw, s.answer)
	}

	// A chunked body: gearmand submits a job with an empty payload, reads
	// the chunks as a next request and closes without answering (the job
	// is left queued, its client gone, and may still reach the worker in
	// a later case: see httpServer.leftovers); switchyard reads the body.
	chunked := "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
	g = gm.run(t, gw, httpCase{name: "chunked", raw: chunked})
	s = sy.run(t, sw, httpCase{name: "chunked", raw: chunked, fn: "echo"})
	if len(g.answer.raw) != 0 || !g.answer.closed || s.payload != "abc" || s.answer.body != "abc" {
		t.Errorf("chunked: gearmand answered %q; switchyard's worker got %q, answer %v", g.answer.raw, s.payload, s.answer)
	}

	// HEAD: gearmand sends the result after the header all the same, and
	// for HEAD / a handle out of a stale packet ("(null)" at first);
	// switchyard sends neither.
	g, s = both(httpCase{name: "HEAD", raw: "HEAD /fixed HTTP/1.1\r\nHost: x\r\n\r\n", fn: "fixed"})
	if !bytes.HasSuffix(g.answer.raw, []byte("\r\n\r\nabc")) || !bytes.HasSuffix(s.answer.raw, []byte("\r\n\r\n")) {
		t.Errorf("HEAD: gearmand sent %q, switchyard %q", g.answer.raw, s.answer.raw)
	}
	g, s = both(httpCase{name: "HEAD /", raw: "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"})
	if g.answer.status != 200 || header(t, g.answer, "X-Gearman-Job-Handle") == "" ||
		s.answer.status != 200 || header(t, s.answer, "X-Gearman-Job-Handle") != "" {
		t.Errorf("HEAD /: gearmand %q, switchyard %q", g.answer.raw, s.answer.raw)
	}
}

// header returns a header of a's raw response, "" if absent.
func header(t *testing.T, a httpAnswer, name string) string {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(a.raw)), &http.Request{Method: "HEAD"})
	if err != nil {
		t.Fatalf("%q: %v", a.raw, err)
	}
	return resp.Header.Get(name)
}

// Without -r http nothing listens for HTTP, whatever --http-port says.
func TestE2EHTTPOff(t *testing.T) {
	t.Parallel()
	startServerPorts(t, 1, "--http-port", "0") // exactly one listener: Gearman's
}

// A background job submitted over HTTP is acknowledged once on disk: a
// server killed right after runs it after the restart, under the handle
// the HTTP client got.
func TestE2EHTTPDurable(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("switchyard's durable queue")
	}
	data := filepath.Join(t.TempDir(), "data")
	s := startHTTPServer(t, serverBinary(t), "--data-dir", data)
	a, err := sendHTTP(s.http, httpPost("kept", "X-Gearman-Background: true\r\nX-Gearman-Unique: k\r\n", "payload"), e2eWaitTimeout)
	if err != nil || a.status != 200 || a.command != "JOB_CREATED" {
		t.Fatalf("submit: %v %v", a, err)
	}
	resp, _ := http.ReadResponse(bufio.NewReader(bytes.NewReader(a.raw)), nil)
	handle := resp.Header.Get("X-Gearman-Job-Handle")
	s.proc.cmd.Process.Kill()
	<-s.proc.done

	s = startHTTPServer(t, serverBinary(t), "--data-dir", data)
	g := dialGear(t, s.gear, "worker")
	g.send(pCanDo, "kept")
	job := g.grabJob(e2eWaitTimeout)
	if job[0] != handle || job[2] != "payload" {
		t.Fatalf("after the restart the worker got %q, want %s with its payload", job, handle)
	}
}

// Debian's own worker (gearman -w) runs a job an HTTP client submits, and
// curl gets its output.
func TestE2EHTTPGearmanWorker(t *testing.T) {
	t.Parallel()
	curl := requireTool(t, "curl")
	gearman := requireTool(t, "gearman")
	s := startHTTPServer(t, serverBinary(t))
	// The log names the port the kernel picked for --http-port 0.
	re := regexp.MustCompile(`\slistening\s+\{.*"http": \["` + regexp.QuoteMeta(s.http) + `"\]`)
	waitUntil(t, e2eWaitTimeout, "an http listening line naming "+s.http, func() (bool, string) {
		out := s.proc.stderr.String()
		return re.MatchString(out), out
	})
	host, port, _ := net.SplitHostPort(s.gear)
	w := startProc(t, "", gearman, "-w", "-h", host, "-p", port, "-f", "wc", "--", "wc", "-c")
	defer w.kill()
	waitWorkers(t, s.gear, "wc", 1)
	out := mustRun(t, "", curl, "-sS", "--data-binary", "twelve bytes", "http://"+s.http+"/wc")
	if strings.TrimSpace(out) != "12" {
		t.Fatalf("curl got %q", out)
	}
}

// A request with both Content-Length and Transfer-Encoding, the shape of
// request smuggling, sent over a raw connection with a second request
// hidden after its chunked body: one answer, 400, and the connection
// closed; neither request submits a job. TRACE is refused, echoing
// nothing of the request.
func TestE2EHTTPSmugglingAndTrace(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand takes the Content-Length and never answers TRACE")
	}
	s := startHTTPServer(t, serverBinary(t))
	bg := "X-Gearman-Background: true\r\nConnection: keep-alive\r\n"
	raw := "POST /front HTTP/1.1\r\nHost: x\r\n" + bg + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		"POST /smuggled HTTP/1.1\r\nHost: x\r\n" + bg + "Content-Length: 1\r\n\r\nx"
	a, err := sendHTTP(s.http, raw, e2eWaitTimeout)
	if err != nil || a.status != http.StatusBadRequest || !a.closed || bytes.Count(a.raw, []byte("HTTP/1.1 ")) != 1 {
		t.Fatalf("Content-Length with Transfer-Encoding: %v %q, %v; want one 400 and the connection closed", a, a.raw, err)
	}
	// A request on a connection of its own, answered after the one above:
	// had either of those made a job, status would list its function.
	if a, err := sendHTTP(s.http, httpPost("after", "X-Gearman-Background: true\r\n", "y"), e2eWaitTimeout); err != nil || a.command != "JOB_CREATED" {
		t.Fatalf("a request after: %v, %v", a, err)
	}
	m, out := adminStatus(t, s.gear)
	if _, ok := m["after"]; !ok || len(m) != 1 {
		t.Fatalf("status:\n%s\nwant the function after alone", out)
	}

	a, err = sendHTTP(s.http, "TRACE /after HTTP/1.1\r\nHost: x\r\nCookie: secret=1\r\n\r\n", e2eWaitTimeout)
	if err != nil || a.status != http.StatusMethodNotAllowed || !a.closed || a.body != "" || bytes.Contains(a.raw, []byte("secret")) {
		t.Fatalf("TRACE: %v %q, %v; want 405, nothing echoed", a, a.raw, err)
	}
}
