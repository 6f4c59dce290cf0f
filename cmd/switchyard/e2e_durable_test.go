package main

// The durable queue end to end: background jobs acknowledged by a real
// switchyard process survive a restart and a kill -9, under the handles
// they were given, and run once afterwards.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"switchyard/engine/ops/opstest"
)

// streamWindow bounds the submissions a stream has sent and not yet seen
// answered: enough to keep the store's group commit busy, few enough that
// draining what the server took but never acknowledged stays quick.
const streamWindow = 256

// pipeline sends requests 0 .. max-1 on c, written by req, with at most
// streamWindow of them unanswered, while reply reads the answer to each in
// turn. It returns when every answer has been read, or with the first
// error: the connection died, or reply refused an answer.
func pipeline(c net.Conn, max int, req func(w *bufio.Writer, i int), reply func(r *bufio.Reader, i int) error) error {
	window := make(chan struct{}, streamWindow)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		w := bufio.NewWriter(c)
		for i := 0; i < max; i++ {
			select {
			case window <- struct{}{}:
			default: // the window is full: send what is buffered, then wait
				if w.Flush() != nil {
					return
				}
				select {
				case window <- struct{}{}:
				case <-quit:
					return
				}
			}
			req(w, i)
		}
		w.Flush()
	}()
	r := bufio.NewReader(c)
	for i := 0; i < max; i++ {
		if err := reply(r, i); err != nil {
			return err
		}
		<-window
	}
	return nil
}

// badAnswer is a stream's answer that was not an acknowledgement: a bug,
// where a dead connection is what a kill -9 leaves.
type badAnswer struct{ error }

// streamSubmits pipelines SUBMIT_JOB_BG for uniques prefix0, prefix1, ...
// (at most max) and reports each acknowledged one on acked, in order, with
// its handle. It stops when the connection dies; the error is why.
func streamSubmits(addr, fn, prefix string, max int, acked chan<- [2]string) error {
	defer close(acked)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return pipeline(c, max, func(w *bufio.Writer, i int) {
		body := fn + "\x00" + fmt.Sprint(prefix, i) + "\x00payload"
		var h [12]byte
		copy(h[:], "\x00REQ")
		binary.BigEndian.PutUint32(h[4:], pSubmitJobBg)
		binary.BigEndian.PutUint32(h[8:], uint32(len(body)))
		w.Write(h[:])
		w.WriteString(body)
	}, func(r *bufio.Reader, i int) error {
		var h [12]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return err
		}
		body := make([]byte, binary.BigEndian.Uint32(h[8:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return err
		}
		if typ := binary.BigEndian.Uint32(h[4:]); typ != pJobCreated {
			return badAnswer{fmt.Errorf("submit %d answered type %d %q", i, typ, body)}
		}
		acked <- [2]string{fmt.Sprint(prefix, i), string(body)}
		return nil
	})
}

// streamPeriodicSubmits pipelines Periodic SUBMIT_JOBs of jobs named
// prefix0, prefix1, ... (at most max) and reports each one answered
// SUCCESS on acked, in order (Periodic gives no handle). It stops when the
// connection dies; the error is why.
func streamPeriodicSubmits(addr, fn, prefix string, max int, acked chan<- [2]string) error {
	defer close(acked)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write(perFrame(perReqMagic, []byte{perTypeClient})); err != nil {
		return err
	}
	return pipeline(c, max, func(w *bufio.Writer, i int) {
		job := perMarshalJob(perJob{Name: fmt.Sprint(prefix, i), Func: fn, Workload: "payload"})
		w.Write(perFrame(perReqMagic, perRequest(strconv.Itoa(i), perSubmitJob, job)))
	}, func(r *bufio.Reader, i int) error {
		payload, err := perReadFrame(r, perResMagic, perReadLimit)
		if err != nil {
			return err
		}
		rep, err := perParseReply(payload)
		if err != nil || rep.msgID != strconv.Itoa(i) || string(rep.body) != string([]byte{perSuccess}) {
			return badAnswer{fmt.Errorf("SUBMIT_JOB %d answered %v (%v)", i, rep, err)}
		}
		acked <- [2]string{fmt.Sprint(prefix, i), ""}
		return nil
	})
}

// drain runs every queued job of fn to completion and returns unique ->
// handle, failing on a job handed out twice.
func drain(t *testing.T, addr, fn string) map[string]string {
	t.Helper()
	w := dialGear(t, addr, "drainer")
	w.send(pCanDo, fn)
	got := map[string]string{}
	for {
		w.send(pGrabJobUniq)
		p := w.recv(10 * time.Second)
		if p.typ == pNoJob {
			return got
		}
		if p.typ != pJobAssignUniq {
			t.Fatalf("GRAB_JOB_UNIQ answered %v", p)
		}
		a := strings.SplitN(string(p.body), "\x00", 4)
		if _, dup := got[a[2]]; dup {
			t.Fatalf("job %s handed out twice", a[2])
		}
		got[a[2]] = a[0]
		w.send(pWorkComplete, a[0], "done")
	}
}

// drainPeriodic runs every queued Periodic job of fn to completion (a
// worker grabs as many as STATUS counts, pipelined, and WORK_DONEs each)
// and returns name -> job id, failing on a job handed out twice or on one
// left afterwards.
func drainPeriodic(t *testing.T, n perNet, fn string) map[string]string {
	t.Helper()
	c := dialPerClient(t, n)
	m, raw := c.status()
	if m[fn].processing != 0 {
		t.Fatalf("STATUS %q right after the start: jobs of %s running", raw, fn)
	}
	w := dialPerWorker(t, n, "drainer", fn)
	jobs := m[fn].jobs
	for i := range jobs {
		w.grab(fmt.Sprint("g", i))
	}
	got := map[string]string{}
	for range jobs {
		a := w.expectAssign(perReplyTimeout)
		if _, dup := got[a.job.Name]; dup {
			t.Fatalf("job %s handed out twice", a.job.Name)
		}
		got[a.job.Name] = a.handle
		w.workDone(a.handle)
	}
	w.ping()
	c.waitJobs(fn, 0, 0)
	return got
}

// A clean restart keeps every background job under its handle.
func TestE2EDurableRestart(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's builtin queue keeps nothing across a restart")
	}
	data := filepath.Join(t.TempDir(), "data")
	srv := startServerProc(t, "--data-dir", data)
	c := dialGear(t, srv.addr, "client")
	want := map[string]string{}
	for i := 0; i < 50; i++ {
		u := fmt.Sprint("u", i)
		want[u] = c.submit(pSubmitJobBg, "durable", u, "x")
	}
	srv.stop()
	srv = startServerProc(t, "--data-dir", data)
	got := drain(t, srv.addr, "durable")
	if len(got) != len(want) {
		t.Fatalf("%d jobs after the restart, want %d", len(got), len(want))
	}
	for u, h := range want {
		if got[u] != h {
			t.Fatalf("job %s: handle %q after the restart, %q before", u, got[u], h)
		}
	}
	srv.stop()
	srv = startServerProc(t, "--data-dir", data)
	if left := drain(t, srv.addr, "durable"); len(left) != 0 {
		t.Fatalf("%d finished jobs came back", len(left))
	}
}

// killServer is a server of the kill -9 loop: its Gearman address and,
// if it has one, its Periodic listener.
type killServer struct {
	*serverProc
	periodic perNet
}

// killSource is one stream of submissions in killLoop.
type killSource struct {
	name string
	// stream submits jobs named prefix0, prefix1, ... (at most max) and
	// reports each acknowledged one on acked, with its handle if the
	// protocol gives one, until the connection dies.
	stream func(srv *killServer, prefix string, max int, acked chan<- [2]string) error
	// drain runs every queued job to completion and returns name ->
	// handle, failing on a job handed out twice.
	drain func(t *testing.T, srv *killServer) map[string]string
}

var (
	gearmanKillSource = killSource{
		name: "gearman",
		stream: func(srv *killServer, prefix string, max int, acked chan<- [2]string) error {
			return streamSubmits(srv.addr, "kill9", prefix, max, acked)
		},
		drain: func(t *testing.T, srv *killServer) map[string]string { return drain(t, srv.addr, "kill9") },
	}
	periodicKillSource = killSource{
		name: "periodic",
		stream: func(srv *killServer, prefix string, max int, acked chan<- [2]string) error {
			return streamPeriodicSubmits(srv.periodic.addr, "pkill9", prefix, max, acked)
		},
		drain: func(t *testing.T, srv *killServer) map[string]string { return drainPeriodic(t, srv.periodic, "pkill9") },
	}
)

// killLoop kills the server with SIGKILL in the middle of the sources'
// streams of submissions, rounds times, each time after more
// acknowledgements (counted over every source), and restarts it with
// start: every job that was acknowledged runs exactly once afterwards,
// under its handle; jobs the server took but did not acknowledge may run
// too, but no job of an earlier round, which ran then, runs again.
func killLoop(t *testing.T, rounds int, start func() *killServer, sources ...killSource) {
	t.Helper()
	srv := start()
	for round := range rounds {
		prefixes := make([]string, len(sources))
		type ack struct {
			src       int
			name, hnd string
		}
		acks := make(chan ack, 1024)
		errs := make([]error, len(sources))
		var wg sync.WaitGroup
		for i, src := range sources {
			prefixes[i] = fmt.Sprintf("%s-r%d-", src.name, round)
			one := make(chan [2]string, 1024)
			wg.Add(2)
			go func() { defer wg.Done(); errs[i] = src.stream(srv, prefixes[i], 20000, one) }()
			go func() {
				defer wg.Done()
				for a := range one {
					acks <- ack{i, a[0], a[1]}
				}
			}()
		}
		go func() { wg.Wait(); close(acks) }()

		acked := make([]map[string]string, len(sources))
		for i := range acked {
			acked[i] = map[string]string{}
		}
		// The kill comes after killAt acknowledgements, and once every
		// source has had some.
		total, killed := 0, false
		killAt := 50 + round*37
		for a := range acks {
			acked[a.src][a.name] = a.hnd
			total++
			if !killed && total >= killAt && !slices.ContainsFunc(acked, func(m map[string]string) bool { return len(m) == 0 }) {
				srv.cmd.Process.Signal(syscall.SIGKILL)
				<-srv.done
				killed = true
			}
		}
		// acks is closed: every stream has ended, and errs is theirs.
		for i, err := range errs {
			if _, bad := err.(badAnswer); bad {
				t.Fatalf("round %d, %s: %v", round, sources[i].name, err)
			}
		}
		if !killed {
			t.Fatalf("round %d: the streams ended after %d acknowledgements, before the kill (%v)", round, total, errs)
		}

		srv = start()
		for i, src := range sources {
			got := src.drain(t, srv)
			for name, h := range acked[i] {
				if g, ok := got[name]; !ok || (h != "" && g != h) {
					t.Fatalf("round %d: acknowledged %s job %s (%q) came back as %q, %v", round, src.name, name, h, g, ok)
				}
			}
			for name := range got {
				if !strings.HasPrefix(name, prefixes[i]) {
					t.Fatalf("round %d: %s job %s of an earlier round ran again", round, src.name, name)
				}
			}
			t.Logf("round %d, %s: %d acknowledged, %d ran", round, src.name, len(acked[i]), len(got))
		}
	}
}

// kill -9 in the middle of a stream of Gearman background submissions, 20
// times: see killLoop.
func TestE2EDurableKill9(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's builtin queue keeps nothing across a restart")
	}
	data := filepath.Join(t.TempDir(), "data")
	killLoop(t, 20, func() *killServer {
		return &killServer{serverProc: startServerProc(t, "--data-dir", data)}
	}, gearmanKillSource)
}

// --fsync never keeps what it acknowledged across a kill -9 too: the
// kernel has it (a crash of the machine is what it may lose).
func TestE2EDurableKill9Never(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's builtin queue keeps nothing across a restart")
	}
	data := filepath.Join(t.TempDir(), "data")
	killLoop(t, 5, func() *killServer {
		return &killServer{serverProc: startServerProc(t, "--data-dir", data, "--fsync", "never")}
	}, gearmanKillSource)
}

// The same with Periodic SUBMIT_JOBs (acknowledged by SUCCESS) streamed
// beside the Gearman ones, into the same store: every job answered SUCCESS
// is grabbed by a Periodic worker, once, after the restart.
func TestE2EDurableKill9Periodic(t *testing.T) {
	t.Parallel()
	skipPeriodic(t)
	data := filepath.Join(t.TempDir(), "data")
	killLoop(t, 20, func() *killServer {
		srv, others := startServerPorts(t, 2, "--data-dir", data, "--periodic-listen", "tcp://127.0.0.1:0")
		ks := &killServer{serverProc: srv, periodic: perNet{"tcp", others[0]}}
		waitPeriodicUp(t, srv, ks.periodic)
		return ks
	}, periodicKillSource, gearmanKillSource)
}

// fullDisk is a way to make the server's disk writes fail.
type fullDisk struct {
	name string
	// dataDir returns the directory for the store, on the disk that
	// fill fills (or skips the test, saying why).
	dataDir func(t *testing.T) string
	// fill makes the running server's writes to dir fail; empty makes
	// them succeed again.
	fill, empty func(t *testing.T, srv *serverProc, dir string)
	errText     string // in the error the store reports
}

var fullDisks = []fullDisk{
	{
		// A real full file system: a 64 MB tmpfs, filled up by a file of
		// the test's. Needs the right to mount (root, outside a container
		// that forbids it).
		name: "tmpfs",
		dataDir: func(t *testing.T) string {
			mnt := t.TempDir()
			if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64m"); err != nil {
				if e2eRequired() {
					t.Fatalf("cannot mount a tmpfs on %s (%v) and SWITCHYARD_E2E_REQUIRED=1: this case needs root where mounts are allowed", mnt, err)
				}
				t.Skipf("cannot mount a tmpfs on %s (%v): this case needs root where mounts are allowed; rlimit-fsize covers the same path", mnt, err)
			}
			t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
			return filepath.Join(mnt, "data")
		},
		fill: func(t *testing.T, _ *serverProc, dir string) {
			f, err := os.Create(filepath.Join(filepath.Dir(dir), "filler"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 64<<10)
			for {
				if _, err := f.Write(buf); err != nil {
					if !errors.Is(err, syscall.ENOSPC) {
						t.Fatalf("filling the tmpfs: %v", err)
					}
					return
				}
			}
		},
		empty: func(t *testing.T, _ *serverProc, dir string) {
			if err := os.Remove(filepath.Join(filepath.Dir(dir), "filler")); err != nil {
				t.Fatal(err)
			}
		},
		errText: "no space left on device",
	},
	{
		// The server's RLIMIT_FSIZE set to 0: no file of its grows, and
		// writes fail with EFBIG (Go ignores SIGXFSZ). Works anywhere.
		name:    "rlimit-fsize",
		dataDir: func(t *testing.T) string { return filepath.Join(t.TempDir(), "data") },
		fill: func(t *testing.T, srv *serverProc, _ string) {
			setFileSizeLimit(t, srv, 0)
		},
		empty: func(t *testing.T, srv *serverProc, _ string) {
			setFileSizeLimit(t, srv, unix.RLIM_INFINITY)
		},
		errText: "file too large",
	},
}

// setFileSizeLimit sets the server's soft RLIMIT_FSIZE (bytes), under a
// hard limit of infinity (root may raise it; it is the default).
func setFileSizeLimit(t *testing.T, srv *serverProc, limit uint64) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Prlimit(srv.cmd.Process.Pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Prlimit(srv.cmd.Process.Pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: old.Max}, nil); err != nil {
		t.Fatalf("RLIMIT_FSIZE %d (hard %d): %v", limit, old.Max, err)
	}
}

// A full disk: submits that need it are refused with the protocol's error
// (Gearman: ERROR QUEUE_ERROR, Periodic: the error's text), nothing
// refused is acknowledged, and the server goes on serving. It says so:
// /healthz answers 503 with the reason, switchyard_store_up is 0, the
// write errors and the refused submits are counted, the status page's
// JSON has it, the log has it at the default level. Once the disk has
// room, the store takes writes again without a restart (/healthz 200 and
// a line in the log); after a kill -9 every job acknowledged, before the
// failure and after it, is there, once, and no refused one is.
func TestE2EDurableFullDisk(t *testing.T) {
	t.Parallel()
	skipPeriodic(t)
	for _, fd := range fullDisks {
		t.Run(fd.name, func(t *testing.T) {
			t.Parallel()
			data := fd.dataDir(t)
			start := func() (*serverProc, perNet, string) {
				srv, others := startServerPorts(t, 3, "--data-dir", data, "--periodic-listen", "tcp://127.0.0.1:0",
					"--metrics-listen", "127.0.0.1:0")
				pn, maddr := splitPeriodicMetrics(t, others)
				waitPeriodicUp(t, srv, pn)
				return srv, pn, maddr
			}
			srv, pn, maddr := start()
			c := dialGear(t, srv.addr, "client")
			pc := dialPerClient(t, pn)
			acked := map[string]string{}
			for i := range 5 {
				u := fmt.Sprint("before-", i)
				acked[u] = c.submit(pSubmitJobBg, "full", u, "x")
			}
			packed := []string{"pbefore-0", "pbefore-1"}
			for _, name := range packed {
				pc.submit(perJob{Name: name, Func: "pfull", Workload: "x"})
			}
			if code, body := opstest.Get(t, "http://"+maddr+"/healthz"); code != 200 {
				t.Fatalf("/healthz before the disk is full: %d %q", code, body)
			}

			fd.fill(t, srv, data)
			// Submits of 8 KiB until one is refused: a few may still fit
			// in what the store's files hold already.
			payload := strings.Repeat("p", 8<<10)
			var refused packet
			var refusedNames []string
			for i := 0; ; i++ {
				if i == 1000 {
					t.Fatalf("1000 submits of 8 KiB acknowledged on a full disk")
				}
				u := fmt.Sprint("full-", i)
				c.send(pSubmitJobBg, "full", u, payload)
				p := c.recv(10 * time.Second)
				if p.typ == pJobCreated {
					acked[u] = string(p.body)
					continue
				}
				refused = p
				refusedNames = append(refusedNames, u)
				break
			}
			wantError := func(what string, p packet, text ...string) {
				t.Helper()
				a := p.args()
				if p.typ != pError || len(a) != 2 || a[0] != "QUEUE_ERROR" {
					t.Fatalf("%s answered %v, want ERROR QUEUE_ERROR", what, p)
				}
				for _, s := range text {
					if !strings.Contains(a[1], s) {
						t.Errorf("%s: ERROR %q does not say %q", what, a[1], s)
					}
				}
			}
			wantError("the submit on a full disk", refused, fd.errText, data)
			t.Logf("%d submits acknowledged, then %q", len(acked), refused.args()[1])
			wantPeriodicError := func(what, name string) {
				t.Helper()
				r := pc.call(perSubmitJob, perMarshalJob(perJob{Name: name, Func: "pfull", Workload: "x"}))
				if string(r.body) == string([]byte{perSuccess}) || !strings.Contains(string(r.body), fd.errText) {
					t.Errorf("%s: SUBMIT_JOB answered %v, want the store's error", what, r)
				}
			}
			wantPeriodicError("Periodic on a full disk", "pfull-0")

			// The server goes on: a foreground job (which needs no disk)
			// runs, and the next background submit is refused in turn.
			w := dialGear(t, srv.addr, "worker")
			w.send(pCanDo, "fg")
			c.send(pSubmitJob, "fg", "", "in memory")
			if p := c.recv(10 * time.Second); p.typ != pJobCreated {
				t.Fatalf("a foreground submit answered %v", p)
			}
			a := w.grabJob(10 * time.Second)
			w.send(pWorkComplete, a[0], "done")
			c.expect(pWorkComplete, a[0]+"\x00done")
			c.send(pSubmitJobBg, "full", "after", "x")
			wantError("the next submit", c.recv(10*time.Second), fd.errText, "takes no writes")
			refusedNames = append(refusedNames, "after")

			// It says so: /healthz, the metrics, the status page's JSON, the log.
			code, body := opstest.Get(t, "http://"+maddr+"/healthz")
			if code != 503 || !strings.HasPrefix(body, "store failed: ") || !strings.Contains(body, fd.errText) {
				t.Errorf("/healthz on a full disk: %d %q, want 503 and the store's failure", code, body)
			}
			m := scrape(t, maddr)
			for _, c := range []struct {
				name   string
				labels []string
				least  float64
				most   float64
			}{
				{"switchyard_store_up", nil, 0, 0},
				{"switchyard_store_write_errors_total", nil, 1, 1e9},
				{"switchyard_submits_refused_total", []string{"reason=store"}, 3, 3}, // two Gearman, one Periodic
				{"switchyard_submits_refused_total", []string{"reason=queue_full"}, 0, 0},
			} {
				if v, ok := m.Value(c.name, c.labels...); !ok || v < c.least || v > c.most {
					t.Errorf("%s%v = %v (there: %v), want %v to %v", c.name, c.labels, v, ok, c.least, c.most)
				}
			}
			var overview struct {
				Store *struct {
					Up      bool
					Failure string
				}
			}
			_, js := opstest.Get(t, "http://"+maddr+"/api/overview")
			if err := json.Unmarshal([]byte(js), &overview); err != nil || overview.Store == nil || overview.Store.Up ||
				!strings.Contains(overview.Store.Failure, fd.errText) {
				t.Errorf("/api/overview's store on a full disk: %s (%v)", js, err)
			}
			if out := srv.stderr.String(); strings.Contains(out, "panic") {
				t.Fatalf("the server's log mentions a panic:\n%s", tail(out, 8<<10))
			}
			waitUntil(t, e2eWaitTimeout, "the store's failure in the log", func() (bool, string) {
				out := srv.stderr.String()
				return regexp.MustCompile(`error\s+the job store takes no writes.*` + regexp.QuoteMeta(fd.errText)).MatchString(out), out
			})

			// Room again: the store comes back by itself.
			fd.empty(t, srv, data)
			waitUntil(t, 90*time.Second, "/healthz 200 once the disk has room", func() (bool, string) {
				code, body := opstest.Get(t, "http://"+maddr+"/healthz")
				return code == 200, fmt.Sprint(code, " ", body)
			})
			waitUntil(t, e2eWaitTimeout, "the store's recovery in the log", func() (bool, string) {
				out := srv.stderr.String()
				return regexp.MustCompile(`error\s+the job store takes writes again`).MatchString(out), out
			})
			if v, ok := scrape(t, maddr).Value("switchyard_store_up"); !ok || v != 1 {
				t.Errorf("switchyard_store_up once back: %v (there: %v)", v, ok)
			}
			for i := range 5 {
				u := fmt.Sprint("room-", i)
				acked[u] = c.submit(pSubmitJobBg, "full", u, "x")
			}
			pc.submit(perJob{Name: "proom", Func: "pfull", Workload: "x"})
			packed = append(packed, "proom")

			// kill -9, and a start on what it left.
			srv.cmd.Process.Signal(syscall.SIGKILL)
			srv.exited(e2eWaitTimeout)
			srv, pn, _ = start()
			got := drain(t, srv.addr, "full")
			for u, h := range acked {
				if got[u] != h {
					t.Errorf("acknowledged job %s (%s) came back as %q", u, h, got[u])
				}
			}
			if len(got) != len(acked) {
				t.Errorf("%d jobs ran, %d were acknowledged", len(got), len(acked))
			}
			for _, u := range refusedNames {
				if h, ok := got[u]; ok {
					t.Errorf("refused job %s ran, as %s", u, h)
				}
			}
			pgot := drainPeriodic(t, pn, "pfull")
			for _, name := range packed {
				if _, ok := pgot[name]; !ok {
					t.Errorf("acknowledged Periodic job %s lost", name)
				}
			}
			if _, ok := pgot["pfull-0"]; ok {
				t.Errorf("refused Periodic job pfull-0 ran")
			}
		})
	}
}

// splitPeriodicMetrics tells the Periodic listener from the metrics one in
// addrs: the one that answers HTTP is the metrics'.
func splitPeriodicMetrics(t *testing.T, addrs []string) (perNet, string) {
	t.Helper()
	other, maddr := splitMetrics(t, addrs)
	return perNet{"tcp", other}, maddr
}

// splitMetrics tells the metrics listener from the other of two
// listeners: the one that answers HTTP.
func splitMetrics(t *testing.T, addrs []string) (other, metrics string) {
	t.Helper()
	if len(addrs) != 2 {
		t.Fatalf("listeners %v, want a protocol's and the metrics'", addrs)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	for i, a := range addrs {
		if resp, err := client.Get("http://" + a + "/healthz"); err == nil {
			resp.Body.Close()
			return addrs[1-i], a
		}
	}
	t.Fatalf("none of %v answers HTTP", addrs)
	return "", ""
}

// A damaged store stops the start: the server exits 1, before it listens,
// with an error naming the directory and what is wrong, at every start,
// and never comes up with an empty queue in its place. The jobs are in an
// sstable (the store was reopened once), as on a server that has run.
func TestE2EDurableCorruptStore(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's builtin queue keeps nothing across a restart")
	}
	// damage changes the files of the store in dir matching glob: f
	// returns the new content, or nil to remove the file.
	damage := func(glob string, f func([]byte) []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			names, _ := filepath.Glob(filepath.Join(dir, glob))
			if len(names) == 0 {
				t.Fatalf("no %s in %s", glob, dir)
			}
			for _, n := range names {
				b, err := os.ReadFile(n)
				if err == nil {
					if b = f(b); b == nil {
						err = os.Remove(n)
					} else {
						err = os.WriteFile(n, b, 0o644)
					}
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string // in the error, beside the directory
	}{
		{"manifest garbage", damage("MANIFEST-*", func([]byte) []byte { return []byte("not a manifest") }), "malformed manifest"},
		{"current lost", damage("CURRENT", func([]byte) []byte { return nil }), "no CURRENT file"},
		{"sstable truncated", damage("*.sst", func(b []byte) []byte { return b[:len(b)/2] }), ".sst"},
		{"sstable damaged", damage("*.sst", func(b []byte) []byte { b[len(b)/3] ^= 0xff; return b }), "checksum mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			srv := startServerProc(t, "--data-dir", data)
			c := dialGear(t, srv.addr, "client")
			for i := range 20 {
				c.submit(pSubmitJobBg, "corrupt", fmt.Sprint("u", i), "x")
			}
			srv.stop()
			startServerProc(t, "--data-dir", data).stop() // the log goes to an sstable
			tc.damage(t, data)
			for try := 1; try <= 2; try++ {
				s := launchServer(t, serverBinary(t), "--data-dir", data)
				code, ok := s.exited(e2eWaitTimeout)
				out := s.stderr.String()
				if !ok || code != 1 || !strings.Contains(out, data) || !strings.Contains(out, tc.want) {
					t.Fatalf("start %d on the damaged store: exited %v, status %d, output:\n%s\nwant status 1 and an error naming %s and %q",
						try, ok, code, out, data, tc.want)
				}
				if strings.Contains(out, "listening") {
					t.Fatalf("start %d: the server listened before it failed:\n%s", try, out)
				}
				if try == 1 {
					t.Logf("%s", out)
				}
			}
		})
	}
}

// Damage that loses acknowledged jobs stops the start, naming the file:
// the server exits 1 before it listens, at every start, whatever the
// damage to the store a kill -9 left, and never comes up with fewer jobs.
// With --recover it starts with the jobs that can be read, and its log
// says how many could not be: exactly the acknowledged jobs that do not
// run afterwards. The store holds 1,500 jobs from a first run (in an
// sstable since the second start) and 1,500 from a second, in the log.
func TestE2EDurableDamage(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's builtin queue keeps nothing across a restart")
	}
	const jobs = 3000
	data := filepath.Join(t.TempDir(), "data")
	acked := map[string]string{}
	var srv *serverProc
	for run := range 2 {
		srv = startServerProc(t, "--data-dir", data)
		acks := make(chan [2]string, 64)
		errc := make(chan error, 1)
		go func() { errc <- streamSubmits(srv.addr, "damaged", fmt.Sprint("r", run, "-"), jobs/2, acks) }()
		for a := range acks {
			acked[a[0]] = a[1]
		}
		if err := <-errc; err != nil || len(acked) != (run+1)*jobs/2 {
			t.Fatalf("%d of %d submits acknowledged: %v", len(acked), (run+1)*jobs/2, err)
		}
		if run == 0 {
			srv.stop()
		}
	}
	srv.cmd.Process.Signal(syscall.SIGKILL)
	if _, ok := srv.exited(e2eWaitTimeout); !ok {
		t.Fatal("no exit after SIGKILL")
	}

	// newestLog is the write-ahead log written last, and where its
	// records end (the rest of it is zeros).
	newestLog := func(t *testing.T, dir string) (string, int) {
		t.Helper()
		names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		slices.Sort(names)
		if len(names) == 0 {
			t.Fatalf("no log in %s", dir)
		}
		b, err := os.ReadFile(names[len(names)-1])
		if err != nil {
			t.Fatal(err)
		}
		end := len(b)
		for end > 0 && b[end-1] == 0 {
			end--
		}
		return names[len(names)-1], end
	}
	manifest := func(t *testing.T, dir string) string {
		t.Helper()
		cur, err := os.ReadFile(filepath.Join(dir, "CURRENT"))
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, strings.TrimSpace(string(cur)))
	}
	rewrite := func(path func(*testing.T, string) string, f func(b []byte) []byte) func(t *testing.T, dir string) string {
		return func(t *testing.T, dir string) string {
			p := path(t, dir)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if b = f(b); b == nil {
				err = os.Remove(p)
			} else {
				err = os.WriteFile(p, b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			return filepath.Base(p)
		}
	}
	logPath := func(t *testing.T, dir string) string { p, _ := newestLog(t, dir); return p }
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string) string // returns the name of the file damaged
		recover bool                                  // --recover then starts
	}{
		{"log byte flipped", func(t *testing.T, dir string) string {
			_, end := newestLog(t, dir)
			return rewrite(logPath, func(b []byte) []byte { b[end/2] ^= 0x40; return b })(t, dir)
		}, true},
		{"log zeroed", rewrite(logPath, func(b []byte) []byte { return make([]byte, len(b)) }), true},
		{"log missing", rewrite(logPath, func([]byte) []byte { return nil }), true},
		// The MANIFEST of the second start lists the first run's sstable
		// in its last edit: without it, Pebble opens the store without a
		// word, and 1,500 jobs short.
		{"manifest byte flipped", rewrite(manifest, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b }), true},
		{"manifest cut short", rewrite(manifest, func(b []byte) []byte { return b[:len(b)/2] }), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.CopyFS(dir, os.DirFS(data)); err != nil {
				t.Fatal(err)
			}
			file := tc.damage(t, dir)
			for try := 1; try <= 2; try++ {
				s := launchServer(t, serverBinary(t), "--data-dir", dir)
				code, ok := s.exited(e2eWaitTimeout)
				out := s.stderr.String()
				if !ok || code != 1 || !strings.Contains(out, dir) || !strings.Contains(out, file) {
					t.Fatalf("start %d on the damaged store: exited %v, status %d, output:\n%s\nwant status 1 and an error naming %s and %s",
						try, ok, code, out, dir, file)
				}
				if strings.Contains(out, "listening") {
					t.Fatalf("start %d: the server listened before it failed:\n%s", try, out)
				}
				if try == 1 {
					t.Logf("%s", out)
				}
			}
			if !tc.recover {
				return
			}
			s := startServerProc(t, "--data-dir", dir, "--recover")
			m := regexp.MustCompile(`error\s+started with --recover on a damaged job store.*"jobs_lost": (\d+)`).FindStringSubmatch(s.stderr.String())
			if m == nil {
				t.Fatalf("no line saying how many jobs were lost:\n%s", s.stderr.String())
			}
			lost, _ := strconv.Atoi(m[1])
			got := drain(t, s.addr, "damaged")
			for u, h := range got {
				if acked[u] != h {
					t.Errorf("job %s (%s) ran, never acknowledged as such", u, h)
				}
			}
			if lost == 0 || lost > jobs/2 || len(got)+lost != jobs {
				t.Errorf("%d jobs ran after --recover, and the log says %d were lost, of %d acknowledged", len(got), lost, jobs)
			}
			t.Logf("--recover: %d jobs ran, %d lost", len(got), lost)
			s.stop()
			// The next start, without --recover, takes the store as it now is.
			startServerProc(t, "--data-dir", dir).stop()
		})
	}
}
