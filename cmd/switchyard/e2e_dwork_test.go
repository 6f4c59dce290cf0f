package main

// The dwork frontend (--dwork-listen) end to end: a real switchyard
// process and dwork clients as dwork's own are, pyzmq REQ sockets sending
// what the Python protobuf module protoc generates from codec/dwork's
// .proto makes (testdata/dwork_client.py). Each client is driven a request
// at a time, and a reply is all the synchronisation there is.
//
// gearmand has no dwork frontend: run against it, these tests skip.

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/engine/ops/opstest"
)

// pyPython is Debian's Python, which has Debian's python3-zmq and
// python3-protobuf (a pyenv python3 earlier on PATH would not).
const pyPython = "/usr/bin/python3"

// pyReplyTimeout bounds the wait for one reply: a failure, not a pace.
const pyReplyTimeout = 20 * time.Second

// requirePyDwork returns a directory holding dwork_pb2.py, generated from
// codec/dwork/dwork.proto, or skips (fails under SWITCHYARD_E2E_REQUIRED=1)
// when Python, pyzmq, its protobuf module or protoc is missing.
func requirePyDwork(t *testing.T) string {
	t.Helper()
	if isGearmand(t) {
		t.Skip("gearmand has no dwork frontend")
	}
	if out, err := exec.Command(pyPython, "-c", "import zmq, google.protobuf").CombinedOutput(); err != nil {
		missing(t, "Debian's python3-zmq and python3-protobuf ("+pyPython+": "+string(out)+")")
	}
	protoc := requireTool(t, "protoc")
	dir := t.TempDir()
	if out, err := exec.Command(protoc, "--python_out="+dir, "-I", "../../codec/dwork", "dwork.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	return dir
}

// pyDwork is one Python client process.
type pyDwork struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *syncBuffer
}

func startPyDwork(t *testing.T, pbDir, addr, name string) *pyDwork {
	t.Helper()
	cmd := exec.Command(pyPython, "testdata/dwork_client.py", "tcp://"+addr, pbDir)
	p := &pyDwork{t: t, name: name, cmd: cmd, lines: make(chan string, 16), stderr: &syncBuffer{}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		p.stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(pyReplyTimeout):
			cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// kill kills the client (SIGKILL) and waits until its output has ended.
func (p *pyDwork) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	for range p.lines {
	}
}

// pyReply is a reply as dwork_client.py prints it (protobuf's JSON form).
type pyReply struct {
	Type     string   `json:"type"`
	Task     []pyTask `json:"task"`
	Name     *string  `json:"name"`
	Location *string  `json:"location"`
}

type pyTask struct {
	Name   string `json:"name"`
	Origin string `json:"origin"`
	Log    []struct {
		State string `json:"state"`
		Time  string `json:"time"` // an int64: a string in protobuf's JSON
	} `json:"log"`
}

// do sends one request (the JSON form of a QueryMsg) and returns the reply.
func (p *pyDwork) do(req any) pyReply {
	p.t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("%s: %v\n%s", p.name, err, p.stderr.String())
	}
	select {
	case line, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("%s exited after %s:\n%s", p.name, b, p.stderr.String())
		}
		var r pyReply
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			p.t.Fatalf("%s: reply %q: %v", p.name, line, err)
		}
		return r
	case <-time.After(pyReplyTimeout):
		p.t.Fatalf("%s: no reply to %s after %v\n%s", p.name, b, pyReplyTimeout, p.stderr.String())
	}
	return pyReply{}
}

// Requests, as protobuf's JSON form of QueryMsg.

type jsonMap = map[string]any

func pyCreate(tasks ...[]string) jsonMap {
	var ts []jsonMap
	for _, t := range tasks {
		var preds []jsonMap
		for _, p := range t[1:] {
			preds = append(preds, jsonMap{"name": p})
		}
		ts = append(ts, jsonMap{"name": t[0], "origin": "py", "pred": preds})
	}
	return jsonMap{"type": "Create", "task": ts}
}

func pySteal(loc string, n int) jsonMap {
	return jsonMap{"type": "Steal", "location": loc, "n": n}
}

func pyDone(loc string, names ...string) jsonMap {
	var ts []jsonMap
	for _, n := range names {
		ts = append(ts, jsonMap{"name": n, "origin": loc})
	}
	return jsonMap{"type": "Transfer", "location": loc, "task": ts}
}

// Checks.

func (p *pyDwork) want(what string, req any, typ string) {
	p.t.Helper()
	if r := p.do(req); r.Type != typ || len(r.Task) != 0 || r.Name != nil || r.Location != nil {
		p.t.Fatalf("%s: %s: reply %+v, want only type %s", p.name, what, r, typ)
	}
}

// steal checks that a Steal of up to n gets names (none: NotFound), each
// from this host with a Stolen log entry of a time within the request.
func (p *pyDwork) steal(loc string, n int, names ...string) {
	p.t.Helper()
	if len(names) == 0 {
		p.want("steal by "+loc, pySteal(loc, n), "NotFound")
		return
	}
	host, _ := os.Hostname()
	from := time.Now().UnixMicro()
	r := p.do(pySteal(loc, n))
	to := time.Now().UnixMicro()
	var got []string
	for _, tk := range r.Task {
		got = append(got, tk.Name)
		if tk.Origin != host || len(tk.Log) != 1 || tk.Log[0].State != "Stolen" {
			p.t.Fatalf("%s: stolen task %+v, want origin %q and one Stolen log entry", p.name, tk, host)
		}
		if at, err := strconv.ParseInt(tk.Log[0].Time, 10, 64); err != nil || at < from || at > to {
			p.t.Fatalf("%s: stolen at %q µs, want between %d and %d", p.name, tk.Log[0].Time, from, to)
		}
	}
	if r.Type != "Transfer" || !slices.Equal(got, names) {
		p.t.Fatalf("%s: steal by %s: %+v, want Transfer of %v", p.name, loc, r, names)
	}
}

func (p *pyDwork) lookup(name, loc string) {
	p.t.Helper()
	req := jsonMap{"type": "Lookup", "name": name}
	if loc == "" {
		p.want("lookup "+name, req, "NotFound")
		return
	}
	r := p.do(req)
	if r.Type != "OK" || r.Name == nil || *r.Name != name || r.Location == nil || *r.Location != loc || len(r.Task) != 0 {
		p.t.Fatalf("%s: lookup %s: %+v, want OK at %s", p.name, name, r, loc)
	}
}

// startDwork starts switchyard with a dwork listener on a port the kernel
// picks and returns the server and that port's address.
func startDwork(t *testing.T, extraArgs ...string) (*serverProc, string) {
	t.Helper()
	srv, others := startServerPorts(t, 2, append([]string{"--dwork-listen", "tcp://127.0.0.1:0"}, extraArgs...)...)
	return srv, others[0]
}

// A diamond run by two Python workers: a; b and c after a; d after both.
// Each task is handed out once its predecessors are done, whichever worker
// completed them; Lookup says where each ran; a Gearman worker of the
// function runs a task too; ill-formed requests get Error.
func TestE2EDworkDiamond(t *testing.T) {
	t.Parallel()
	pb := requirePyDwork(t)
	srv, addr := startDwork(t, "--dwork-func", "dag")
	w1, w2 := startPyDwork(t, pb, addr, "worker 1"), startPyDwork(t, pb, addr, "worker 2")

	w1.want("create", pyCreate([]string{"a"}, []string{"b", "a"}, []string{"c", "a"}, []string{"d", "b", "c"}, []string{"e", "d"}), "OK")
	w1.steal("h1", 4, "a")
	w2.steal("h2", 4)
	w1.want("a done", pyDone("h1", "a"), "OK")
	w1.steal("h1", 1, "b")
	w2.steal("h2", 1, "c")
	w2.steal("h2", 1) // d waits for b and c
	w2.want("c done", pyDone("h2", "c"), "OK")
	w1.want("b done", pyDone("h1", "b"), "OK")
	w2.steal("h2", 2, "d")
	w2.want("d done", pyDone("h2", "d"), "OK")
	w1.lookup("a", "h1")
	w1.lookup("c", "h2")
	w1.lookup("d", "h2")
	w1.lookup("e", "")

	// e, ready now, is the function's job: a Gearman worker of "dag" runs it.
	g := dialGear(t, srv.addr, "gearman worker")
	g.send(pCanDo, "dag")
	if job := g.grabJob(pyReplyTimeout); job[1] != "dag" || job[2] != "e" {
		t.Fatalf("the Gearman worker got %q, want the task e (its name as unique and payload)", job)
	}
	w2.steal("h2", 1)

	// A completion naming tasks nobody holds lists them back.
	r := w1.do(pyDone("h1", "e", "zzz"))
	if r.Type != "NotFound" || len(r.Task) != 2 || r.Task[0].Name != "e" || r.Task[1].Name != "zzz" {
		t.Fatalf("completion of tasks no dwork host holds: %+v, want NotFound listing e and zzz", r)
	}
	// Ill-formed: Steal without a location, a reply type, bytes that are
	// not protobuf.
	w1.want("steal without a location", jsonMap{"type": "Steal"}, "Error")
	w1.want("a request of type OK", jsonMap{"type": "OK"}, "Error")
	w1.want("not protobuf", jsonMap{"raw": hex.EncodeToString([]byte{0xff, 0xff})}, "Error")
	// The host exits: it holds nothing, but it has worked.
	w1.want("exit", jsonMap{"type": "Exit", "location": "h1"}, "OK")
	w1.want("exit again", jsonMap{"type": "Exit", "location": "h1"}, "NotFound")
}

// kill -9 in the middle of a DAG: what was created comes back with its
// edges, a task a host held comes back queued, and the DAG runs to its end
// on the restarted server.
func TestE2EDworkKill9(t *testing.T) {
	t.Parallel()
	pb := requirePyDwork(t)
	data := filepath.Join(t.TempDir(), "data")
	srv, addr := startDwork(t, "--data-dir", data)
	w := startPyDwork(t, pb, addr, "before")
	w.want("create", pyCreate([]string{"a"}, []string{"b", "a"}, []string{"c", "a"}, []string{"d", "b", "c"}, []string{"e", "d"}), "OK")
	w.steal("h1", 1, "a")
	w.want("a done", pyDone("h1", "a"), "OK")
	w.steal("h1", 2, "b", "c")
	w.want("b done", pyDone("h1", "b"), "OK")
	// Acknowledged once on disk, after every write before it: a and b's
	// deletions are there too.
	w.want("create z", pyCreate([]string{"z", "a"}), "OK")
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.done

	_, addr = startDwork(t, "--data-dir", data)
	w = startPyDwork(t, pb, addr, "after")
	w.steal("h2", 5, "c", "z") // c, held by h1, is back; d waits for it, e for d
	w.want("c done", pyDone("h2", "c"), "OK")
	w.steal("h2", 5, "d")
	w.want("d done", pyDone("h2", "d"), "OK")
	w.steal("h2", 5, "e")
	w.want("e and z done", pyDone("h2", "e", "z"), "OK")
	w.steal("h2", 5)
	w.lookup("e", "h2")
	w.lookup("b", "") // ended before the restart: notes of ended tasks live in memory
}

// exit closes the client's stdin, so that it exits as a command-line
// client does once its request is answered, and waits until it has.
func (p *pyDwork) exit() {
	p.t.Helper()
	p.stdin.Close()
	for range p.lines {
	}
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("%s: %v\n%s", p.name, err, p.stderr.String())
	}
}

// dworkStep is one command of a transcript: a request sent by a process
// of its own, on a connection of its own, and the reply it must get.
type dworkStep struct {
	req   jsonMap
	want  string   // the reply's type
	tasks []string // the reply's task names, in order
	loc   string   // a Lookup's OK: the location
	// hub is the reply dwork's hub gives where switchyard differs on
	// purpose (docs/dwork.md, "Differences from dwork's hub"); "" if the
	// same.
	hub string
}

// dworkTranscript is dwork's shell workflow, as dquery runs it: every
// command a process and a ZeroMQ connection of its own, which closes when
// it exits. A host is the location its requests name: what peer1 steals
// in one process it completes in another. Checked step for step against
// dwork's hub at 2ca92dc (SWITCHYARD_DWORK_HUB, below): 46 of 46, three
// of them the differences docs/dwork.md lists (switchyard answers a
// Lookup, where the hub answers Error, and lists back a completion of a
// task no host holds with NotFound, where the hub answers OK).
func dworkTranscript() []dworkStep {
	steal := func(loc string, n int, names ...string) dworkStep {
		want := "Transfer"
		if len(names) == 0 {
			want = "NotFound"
		}
		return dworkStep{req: pySteal(loc, n), want: want, tasks: names}
	}
	ok := func(req jsonMap) dworkStep { return dworkStep{req: req, want: "OK"} }
	exit := func(loc, want string) dworkStep {
		return dworkStep{req: jsonMap{"type": "Exit", "location": loc}, want: want}
	}
	lookup := func(name, loc string) dworkStep {
		return dworkStep{req: jsonMap{"type": "Lookup", "name": name}, want: "OK", loc: loc, hub: "Error"}
	}
	steps := []dworkStep{
		ok(pyCreate([]string{"chop"})),
		ok(pyCreate([]string{"cook", "chop"})),
		ok(pyCreate([]string{"plate", "cook"})),
		steal("peer1", 1, "chop"),
		steal("peer2", 1), // cook waits for chop
		ok(pyDone("peer1", "chop")),
		steal("peer2", 1, "cook"),
		exit("peer2", "OK"), // cook back
		steal("peer1", 1, "cook"),
		ok(pyDone("peer1", "cook")),
		lookup("cook", "peer1"),
		steal("peer3", 1, "plate"),
		ok(pyDone("peer3", "plate")),
		steal("peer3", 1),
		exit("peer3", "OK"), // it stole and completed: it was active
		exit("peer3", "NotFound"),
		exit("nobody", "NotFound"),
	}
	// A join: twenty tasks, one after them all, completed one process at a
	// time.
	var twenty [][]string
	join := []string{"join"}
	for i := 1; i <= 20; i++ {
		name := fmt.Sprintf("t%02d", i)
		twenty = append(twenty, []string{name})
		join = append(join, name)
	}
	steps = append(steps, ok(pyCreate(twenty...)), ok(pyCreate(join)), steal("w1", 20, join[1:]...))
	for _, name := range join[1:] {
		steps = append(steps, ok(pyDone("w1", name)))
	}
	steps = append(steps, steal("w2", 1, "join"), ok(pyDone("w2", "join")), steal("w2", 1), exit("w1", "OK"))
	// What no host holds: a completion lists it back, a Lookup finds
	// nothing (the hub answers OK and Error).
	return append(steps,
		dworkStep{req: pyDone("w2", "ghost"), want: "NotFound", tasks: []string{"ghost"}, hub: "OK"},
		dworkStep{req: jsonMap{"type": "Lookup", "name": "ghost"}, want: "NotFound", hub: "Error"})
}

// The transcript above, each command in a process of its own, against
// switchyard; with SWITCHYARD_DWORK_HUB=tcp://HOST:PORT, against that hub
// instead (a fresh dwork hub, dhub, built from dwork's source), where a
// step marked hub must get the hub's reply. Every step's result is
// logged; the test fails listing the steps that differ.
func TestE2EDworkTranscript(t *testing.T) {
	t.Parallel()
	pb := requirePyDwork(t)
	hub := os.Getenv("SWITCHYARD_DWORK_HUB")
	addr := strings.TrimPrefix(hub, "tcp://")
	if hub == "" {
		_, addr = startDwork(t)
	}
	host, _ := os.Hostname()
	steps := dworkTranscript()
	var bad []string
	for i, st := range steps {
		p := startPyDwork(t, pb, addr, fmt.Sprintf("step %d", i+1))
		r := p.do(st.req)
		p.exit()
		want, wantLoc := st.want, st.loc
		wantTasks := st.tasks
		if hub != "" && st.hub != "" {
			want, wantLoc, wantTasks = st.hub, "", nil
		}
		var names []string
		for _, tk := range r.Task {
			names = append(names, tk.Name)
			if r.Type == "Transfer" && (tk.Origin != host || len(tk.Log) != 1 || tk.Log[0].State != "Stolen") {
				bad = append(bad, fmt.Sprintf("step %d: stolen task %+v, want origin %q and one Stolen log entry", i+1, tk, host))
			}
		}
		var loc string
		if r.Location != nil {
			loc = *r.Location
		}
		req, _ := json.Marshal(st.req)
		match := r.Type == want && slices.Equal(names, wantTasks) && loc == wantLoc
		t.Logf("step %2d %-5v %s -> %s %v %s", i+1, match, req, r.Type, names, loc)
		if !match {
			bad = append(bad, fmt.Sprintf("step %d: %s: got %s %v %q, want %s %v %q", i+1, req, r.Type, names, loc, want, wantTasks, wantLoc))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d steps match:\n%s", len(steps)-len(bad), len(steps), strings.Join(bad, "\n"))
	}
}

// --dwork-host-timeout: a host killed while it holds a task (its pyzmq
// process, SIGKILL) keeps it until it has been silent for the timeout,
// never sooner; then its task, back at the head of the queue, goes to
// another host, the log says why, and /api/connections, which listed it
// with how long it had been silent, no longer does.
func TestE2EDworkHostTimeout(t *testing.T) {
	t.Parallel()
	pb := requirePyDwork(t)
	const timeout = time.Second
	srv, others := startServerPorts(t, 3, "--dwork-listen", "tcp://127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--dwork-host-timeout", timeout.String())
	addr, maddr := splitMetrics(t, others)
	h1 := startPyDwork(t, pb, addr, "host 1")
	h1.want("create", pyCreate([]string{"a"}, []string{"b"}, []string{"c", "a"}), "OK")
	h1.steal("h1", 1, "a")
	stolen := time.Now()
	var page struct {
		Connections []struct {
			Protocol  string   `json:"protocol"`
			ID        string   `json:"id"`
			SilentFor *float64 `json:"silent_for"`
		} `json:"connections"`
	}
	apiJSON(t, "http://"+maddr+"/api/connections?q=h1", &page)
	if len(page.Connections) != 1 || page.Connections[0].Protocol != "dwork" || page.Connections[0].SilentFor == nil {
		t.Fatalf("/api/connections?q=h1: %+v, want host h1 with silent_for", page)
	}
	h1.kill()
	waitUntil(t, e2eWaitTimeout, "h1 taken as exited, a back in the queue", func() (bool, string) {
		m, raw := adminStatus(t, srv.addr)
		return m["dwork"] == funcStatus{3, 0, 0}, raw
	})
	if held := time.Since(stolen); held < timeout {
		t.Fatalf("h1's task went back %v after it stole it, before the %v timeout", held, timeout)
	}
	if !strings.Contains(srv.stderr.String(), `taken as exited, its tasks back in the queue	{"location": "h1", "tasks": 1`) {
		t.Errorf("no log line says h1 was taken as exited:\n%s", srv.stderr.String())
	}
	apiJSON(t, "http://"+maddr+"/api/connections?q=h1", &page)
	if len(page.Connections) != 0 {
		t.Fatalf("/api/connections?q=h1 after the timeout: %+v", page)
	}
	h2 := startPyDwork(t, pb, addr, "host 2")
	h2.steal("h2", 1, "a")
	h2.want("a done", pyDone("h2", "a"), "OK")
	h2.steal("h2", 2, "b", "c")
}

// apiJSON reads an operator endpoint's JSON into v.
func apiJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := opstest.Get(t, url)
	if code != 200 {
		t.Fatalf("%s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%s: %v\n%s", url, err, body)
	}
}

// Without --dwork-host-timeout (the default, as with dwork's hub), a host
// killed while it holds a task keeps it: an Exit naming it gives it back.
func TestE2EDworkHostKilledKeeps(t *testing.T) {
	t.Parallel()
	pb := requirePyDwork(t)
	srv, addr := startDwork(t, "--dwork-keep-on-close") // accepted, with a warning
	h1 := startPyDwork(t, pb, addr, "host 1")
	h1.want("create", pyCreate([]string{"a"}), "OK")
	h1.steal("h1", 1, "a")
	h1.kill()
	h2 := startPyDwork(t, pb, addr, "host 2")
	h2.steal("h2", 1) // a is h1's: nothing to steal
	if m, raw := adminStatus(t, srv.addr); m["dwork"] != (funcStatus{1, 1, 2}) {
		t.Fatalf("status after h1 was killed:\n%swant dwork 1 1 2 (h1 holds a; h2 is known)", raw)
	}
	h2.want("h1 exits", jsonMap{"type": "Exit", "location": "h1"}, "OK")
	h2.steal("h2", 1, "a")
	if !strings.Contains(srv.stderr.String(), "ignoring --dwork-keep-on-close") {
		t.Errorf("no warning about --dwork-keep-on-close:\n%s", srv.stderr.String())
	}
}
