package main

// End-to-end harness: the tests named TestE2E* start the built server binary
// and drive it with the real Gearman clients Debian ships (gearman,
// gearadmin, libgearman, Perl Gearman::Client) and with a few raw-protocol
// connections written here.
//
// The expectations are gearmand 1.1.20's. Check them against the real thing
// with
//
//	SWITCHYARD_BIN=/usr/sbin/gearmand go test ./cmd/switchyard/ -run E2E -v
//
// Without SWITCHYARD_BIN the tests build switchyard (once, on first use)
// into a temporary directory. A test whose client is not installed skips,
// naming the apt-get command, unless SWITCHYARD_E2E_REQUIRED=1 (set by
// .ci/run), in which case it fails.
//
// Synchronisation is always on an observable condition (a process exiting,
// a line of output, an admin listing) polled with a deadline, never on a
// sleep. Every process runs under a context deadline.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/bench/harness"
)

const (
	// e2eCmdTimeout bounds one short client command (gearman, gearadmin,
	// a compiled client, a Perl script).
	e2eCmdTimeout = 20 * time.Second
	// e2eWaitTimeout bounds polling for a condition.
	e2eWaitTimeout = 15 * time.Second
	// e2eProcTimeout bounds a background process (a worker, a waiting
	// client, the server itself) however the test goes.
	e2eProcTimeout = 60 * time.Second

	// e2eInstallCmd is what to run when a client is missing.
	e2eInstallCmd = "apt-get install -y gearman-tools gearman-job-server libgearman-dev libgearman-client-perl gcc openssl python3-zmq python3-protobuf protobuf-compiler nng-utils curl chromium groff-base systemd"
)

var (
	e2eTmpDir   string // where switchyard is built; removed by TestMain
	e2eBinOnce  sync.Once
	e2eBinPath  string
	e2eBinError error
)

// TestMain removes the directory switchyard was built into, if it was.
func TestMain(m *testing.M) {
	code := m.Run()
	if e2eTmpDir != "" {
		os.RemoveAll(e2eTmpDir)
	}
	os.Exit(code)
}

// serverBinary returns the server under test: $SWITCHYARD_BIN, or switchyard
// built from this module the first time it is needed (so the package's unit
// tests do not pay for a build they do not use).
func serverBinary(t *testing.T) string {
	t.Helper()
	e2eBinOnce.Do(func() {
		if bin := os.Getenv("SWITCHYARD_BIN"); bin != "" {
			p, err := exec.LookPath(bin)
			if err != nil {
				e2eBinError = fmt.Errorf("SWITCHYARD_BIN=%s: %v", bin, err)
				return
			}
			e2eBinPath, _ = filepath.Abs(p)
			return
		}
		dir, err := os.MkdirTemp("", "switchyard-e2e-")
		if err != nil {
			e2eBinError = err
			return
		}
		e2eTmpDir = dir
		out := filepath.Join(dir, "switchyard")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// The commit stamped as make build stamps it (see gitRevision).
		cmd := exec.CommandContext(ctx, goTool(), "build", "-ldflags", "-X main.revision="+revisionOfTree(), "-o", out, "switchyard/cmd/switchyard")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build: no C
		if b, err := cmd.CombinedOutput(); err != nil {
			e2eBinError = fmt.Errorf("go build switchyard/cmd/switchyard: %v\n%s", err, b)
			return
		}
		e2eBinPath = out
	})
	if e2eBinError != nil {
		t.Fatal(e2eBinError)
	}
	return e2eBinPath
}

// goTool is the go command: the one on PATH, else the running toolchain's.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// isGearmand tells whether the server under test is the real gearmand.
func isGearmand(t *testing.T) bool {
	return filepath.Base(serverBinary(t)) == "gearmand"
}

// e2eRequired: a missing client fails the test instead of skipping it.
func e2eRequired() bool { return os.Getenv("SWITCHYARD_E2E_REQUIRED") == "1" }

// missing skips (or, under SWITCHYARD_E2E_REQUIRED=1, fails) the test.
func missing(t *testing.T, what string) {
	t.Helper()
	cmd := e2eInstallCmd
	if os.Geteuid() != 0 {
		cmd = "sudo " + cmd
	}
	if e2eRequired() {
		t.Fatalf("%s is missing and SWITCHYARD_E2E_REQUIRED=1; install it with: %s", what, cmd)
	}
	t.Skipf("%s is missing; install it with: %s", what, cmd)
}

// requireTool returns the path of an executable, or skips/fails the test.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		missing(t, name)
	}
	return p
}

// hostHandleRE matches the default job handles, H:<hostname>:<N>. The number
// is not asserted: switchyard's numbering differs from gearmand's.
func hostHandleRE(t *testing.T) *regexp.Regexp {
	t.Helper()
	return regexp.MustCompile(`^` + hostHandlePattern(t) + `$`)
}

// hostHandlePattern is the unanchored regular expression of hostHandleRE.
func hostHandlePattern(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return `H:` + regexp.QuoteMeta(host) + `:\d+`
}

// ---------------------------------------------------------------------------
// Output capture

// syncBuffer is a bytes.Buffer safe for a process writing while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns at most the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "...\n" + s[len(s)-n:]
}

// ---------------------------------------------------------------------------
// The server

type serverProc struct {
	addr    string
	port    int
	dir     string // the server's scratch directory (pid file)
	pidFile string
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	stderr  *syncBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done
	once    sync.Once
}

// startServer starts the server under test on 127.0.0.1 with gearmand's
// flags, plus extraArgs, on a port the kernel picks (-p 0), and returns once
// it accepts connections. stop sends SIGTERM and waits; it also runs at
// cleanup.
func startServer(t *testing.T, extraArgs ...string) (addr string, port int, stop func()) {
	t.Helper()
	s := startServerProc(t, extraArgs...)
	return s.addr, s.port, s.stop
}

// startServerProc launches the server under test and returns once its one
// port, read back from /proc, answers getpid with the server's pid.
func startServerProc(t *testing.T, extraArgs ...string) *serverProc {
	t.Helper()
	s, _ := startServerPorts(t, 1, extraArgs...)
	return s
}

// startServerPorts launches the server under test, waits until it listens on
// n TCP addresses (read back from /proc), and returns once the one that
// answers getpid with the server's pid, its Gearman port, does. The other
// n-1 addresses (the Periodic listeners) are returned, sorted.
func startServerPorts(t *testing.T, n int, extraArgs ...string) (*serverProc, []string) {
	t.Helper()
	return startBinaryPorts(t, serverBinary(t), n, extraArgs...)
}

// startBinaryPorts is startServerPorts for the server binary bin.
func startBinaryPorts(t *testing.T, bin string, n int, extraArgs ...string) (*serverProc, []string) {
	t.Helper()
	s := launchServer(t, bin, extraArgs...)
	cmd := s.cmd

	fail := func(format string, a ...any) {
		t.Helper()
		s.stop()
		t.Fatalf("server did not start: %s\n%s", fmt.Sprintf(format, a...), tail(s.stderr.String(), 8<<10))
	}
	wait, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	// The listeners need not open at once: poll until all n are there.
	var addrs []netip.AddrPort
	for {
		var err error
		addrs, err = harness.WaitListening(wait, cmd.Process.Pid, s.done)
		switch {
		case errors.Is(err, harness.ErrExited):
			fail("exited early (%v)", s.waitErr)
		case err != nil:
			fail("%v", err)
		case len(addrs) > n:
			fail("listens on %v, want %d address(es)", addrs, n)
		}
		if len(addrs) == n {
			break
		}
		select {
		case <-wait.Done():
			fail("listens on %v after 10s, want %d address(es)", addrs, n)
		case <-time.After(10 * time.Millisecond): // polling a starting process, not synchronising
		}
	}

	// Wait until one answers, and make sure the listener is this process:
	// getpid over the admin protocol must name it. (The others, which
	// speak another protocol, just close the connection.)
	for {
		for i, a := range addrs {
			c, err := net.DialTimeout("tcp", a.String(), 200*time.Millisecond)
			if err != nil {
				continue
			}
			pid, perr := harness.Getpid(c, 2*time.Second)
			c.Close()
			if perr == nil && pid == cmd.Process.Pid {
				s.addr, s.port = a.String(), int(a.Port())
				var others []string
				for j, o := range addrs {
					if j != i {
						others = append(others, o.String())
					}
				}
				return s, others
			}
			if perr == nil {
				fail("port %d answered with pid %d, not %d", a.Port(), pid, cmd.Process.Pid)
			}
		}
		select {
		case <-s.done:
			fail("exited early (%v)", s.waitErr)
		case <-wait.Done():
			fail("none of %v answering getpid after 10s", addrs)
		case <-time.After(20 * time.Millisecond): // polling for the port, not synchronising
		}
	}
}

// launchServer starts bin listening on 127.0.0.1 with -p 0 and extraArgs
// (and, for switchyard, no Periodic, Worker-Controller, dwork or MemoDB listener
// unless extraArgs name one),
// logging to the returned serverProc's stderr buffer, and stops it when the
// test ends (printing its output if the test failed).
func launchServer(t *testing.T, bin string, extraArgs ...string) *serverProc {
	t.Helper()
	dir := t.TempDir()
	s := &serverProc{
		dir:     dir,
		pidFile: filepath.Join(dir, "server.pid"),
		stderr:  &syncBuffer{},
		done:    make(chan struct{}),
	}
	// -p 0: the kernel picks the port and it is read back from /proc, so
	// there is no moment in which another process could take it first.
	// gearmand needs nothing more to run as root here: it does not insist on
	// dropping privileges, and the pid file (default /var/gearmand.pid)
	// goes to the test's directory. -l stderr keeps it off
	// /var/log/gearmand.log.
	args := []string{
		"-L", "127.0.0.1", "-p", "0",
		"-l", "stderr", "--verbose", "INFO",
		"--pid-file", s.pidFile,
	}
	args = append(args, extraArgs...)
	// switchyard also serves Periodic, by default on tcp://0.0.0.0:5000: a
	// test that does not ask for it gets none, so that parallel servers do
	// not contend for that port.
	if filepath.Base(bin) != "gearmand" && !hasPeriodicListen(extraArgs) {
		args = append(args, "--periodic-listen", "off")
	}
	// Nor the Worker-Controller socket, by default in /run/switchyard.
	if filepath.Base(bin) != "gearmand" && !slices.ContainsFunc(extraArgs, func(a string) bool { return strings.HasPrefix(a, "--controller-socket") }) {
		args = append(args, "--controller-socket", "off")
	}
	// Nor dwork, by default on tcp://*:6125.
	if filepath.Base(bin) != "gearmand" && !slices.ContainsFunc(extraArgs, func(a string) bool { return strings.HasPrefix(a, "--dwork-listen") }) {
		args = append(args, "--dwork-listen", "off")
	}
	// Nor MemoDB, by default on tcp://127.0.0.1:12703.
	if filepath.Base(bin) != "gearmand" && !slices.ContainsFunc(extraArgs, func(a string) bool { return strings.HasPrefix(a, "--memodb-listen") }) {
		args = append(args, "--memodb-listen", "off")
	}
	// Nor the metrics endpoints, by default on 127.0.0.1:9418.
	if filepath.Base(bin) != "gearmand" && !slices.ContainsFunc(extraArgs, func(a string) bool { return strings.HasPrefix(a, "--metrics-listen") }) {
		args = append(args, "--metrics-listen", "off")
	}
	// The durable queue, switchyard's default, in the test's directory
	// unless the test names one.
	if filepath.Base(bin) != "gearmand" && !slices.ContainsFunc(extraArgs, func(a string) bool { return strings.HasPrefix(a, "--data-dir") }) {
		args = append(args, "--data-dir", filepath.Join(dir, "data"))
	}
	// The server lives until the test's cleanup stops it, or go test's
	// -timeout ends the test binary, which Pdeathsig passes on. A fixed
	// lifetime would be wrong: under load, parallel subtests can wait for
	// a slot for minutes and then find their server already stopped (seen
	// with a 2-minute bound: every subtest's dial refused).
	ctx, cancel := context.WithCancel(context.Background())
	if deadline, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), deadline)
	}
	s.cancel = cancel
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second // then SIGKILL
	s.cmd = cmd
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("server %s %s, output:\n%s", bin, strings.Join(args, " "), tail(s.stderr.String(), 24<<10))
		}
	})
	return s
}

// hasPeriodicListen tells whether args set --periodic-listen.
func hasPeriodicListen(args []string) bool {
	for _, a := range args {
		if a == "--periodic-listen" || strings.HasPrefix(a, "--periodic-listen=") {
			return true
		}
	}
	return false
}

// stop terminates the server (SIGTERM, SIGKILL after WaitDelay) and waits.
func (s *serverProc) stop() {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
}

// exited waits up to d for the server to exit on its own.
func (s *serverProc) exited(d time.Duration) (exitCode int, ok bool) {
	select {
	case <-s.done:
		return s.cmd.ProcessState.ExitCode(), true
	case <-time.After(d):
		return 0, false
	}
}

// ---------------------------------------------------------------------------
// Processes

type cmdResult struct {
	stdout, stderr string
	code           int // exit code; -1 if killed or not started
	timedOut       bool
}

func (r cmdResult) String() string {
	return fmt.Sprintf("exit %d (timed out: %v)\nstdout: %q\nstderr: %q", r.code, r.timedOut, r.stdout, r.stderr)
}

// runCmd runs a command to completion under a timeout, feeding it stdin.
func runCmd(t *testing.T, timeout time.Duration, stdin string, name string, args ...string) cmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout = &out
	cmd.Stderr = &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	r := cmdResult{stdout: out.String(), stderr: errb.String(), code: -1}
	if cmd.ProcessState != nil {
		r.code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		r.timedOut = true
	} else if err != nil && cmd.ProcessState == nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return r
}

// mustRun runs a command that must exit 0 within e2eCmdTimeout and returns
// its stdout.
func mustRun(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	r := runCmd(t, e2eCmdTimeout, stdin, name, args...)
	if r.code != 0 || r.timedOut {
		t.Fatalf("%s %s: %s", name, strings.Join(args, " "), r)
	}
	return r.stdout
}

// bgProc is a process running in the background (a worker, a client that
// waits for its result). It runs in its own process group: kill takes its
// children (a worker's job command) with it.
type bgProc struct {
	name    string
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	stdout  *syncBuffer
	stderr  *syncBuffer
	done    chan struct{}
	waitErr error
}

func startProc(t *testing.T, stdin string, name string, args ...string) *bgProc {
	t.Helper()
	return startProcDir(t, "", stdin, name, args...)
}

// startProcIn is startProc in the working directory dir, with no input.
func startProcIn(t *testing.T, dir string, name string, args ...string) *bgProc {
	t.Helper()
	return startProcDir(t, dir, "", name, args...)
}

func startProcDir(t *testing.T, dir, stdin string, name string, args ...string) *bgProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e2eProcTimeout)
	p := &bgProc{
		name:   name + " " + strings.Join(args, " "),
		cancel: cancel,
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
		done:   make(chan struct{}),
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout = p.stdout
	cmd.Stderr = p.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s: %v\nstdout: %q\nstderr: %q", p.name, p.waitErr, tail(p.stdout.String(), 4096), tail(p.stderr.String(), 4096))
		}
	})
	return p
}

// kill sends SIGKILL to the process group (a no-op once it has exited).
func (p *bgProc) kill() {
	select {
	case <-p.done:
	default:
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	p.cancel()
}

// wait waits for the process to exit and returns its exit code; the test
// fails if it is still running after d.
func (p *bgProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("%s still running after %v\nstdout: %q\nstderr: %q", p.name, d, p.stdout.String(), p.stderr.String())
		return -1
	}
}

// running tells whether the process has not exited yet.
func (p *bgProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// waitUntil polls cond until it holds, failing the test after timeout (on
// a machine that runs nothing else: see harness.Within) with the last
// state cond described.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	waitWithin(t, timeout, what, nil, cond)
}

// waitWithin is waitUntil for a bound on the processes pids (this one's
// with them): cond must hold within bound, stretched by the share of the
// machine that others had meanwhile.
func waitWithin(t *testing.T, bound time.Duration, what string, pids []int, cond func() (bool, string)) {
	t.Helper()
	w := harness.NewWithin(bound, pids...)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if w.Over() {
			t.Fatalf("timed out after %v waiting for %s; last state:\n%s", w, what, last)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
}

// ---------------------------------------------------------------------------
// Admin protocol (text, on the job port), for synchronisation and checks.

// adminCmd sends one admin command and returns the raw reply: up to and
// including ".\n" for listings, else one line.
func adminCmd(t *testing.T, addr, command string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("admin %q: %v", command, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, command+"\r\n"); err != nil {
		t.Fatalf("admin %q: %v", command, err)
	}
	listing := false
	switch strings.Fields(command)[0] {
	case "status", "workers", "prioritystatus", "show":
		listing = true
	}
	r := bufio.NewReader(c)
	var out strings.Builder
	for {
		line, err := r.ReadString('\n')
		out.WriteString(line)
		if err != nil {
			t.Fatalf("admin %q: %v after %q", command, err, out.String())
		}
		if !listing || line == ".\n" || strings.HasPrefix(line, "ERR ") {
			return out.String()
		}
	}
}

// funcStatus is one line of "status".
type funcStatus struct{ queued, running, workers int }

// adminStatus parses "status" into function -> counts.
func adminStatus(t *testing.T, addr string) (map[string]funcStatus, string) {
	t.Helper()
	raw := adminCmd(t, addr, "status")
	m := map[string]funcStatus{}
	for _, line := range strings.Split(strings.TrimSuffix(raw, ".\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			continue
		}
		q, _ := strconv.Atoi(f[1])
		r, _ := strconv.Atoi(f[2])
		w, _ := strconv.Atoi(f[3])
		m[f[0]] = funcStatus{q, r, w}
	}
	return m, raw
}

// waitStatus polls "status" until fn's line satisfies ok.
func waitStatus(t *testing.T, addr, fn string, what string, ok func(funcStatus) bool) {
	t.Helper()
	waitUntil(t, e2eWaitTimeout, fmt.Sprintf("%s: %s", fn, what), func() (bool, string) {
		m, raw := adminStatus(t, addr)
		st, found := m[fn]
		return found && ok(st), raw
	})
}

// waitWorkers waits until at least n workers can do fn.
func waitWorkers(t *testing.T, addr, fn string, n int) {
	t.Helper()
	waitStatus(t, addr, fn, fmt.Sprintf("%d worker(s)", n), func(s funcStatus) bool { return s.workers >= n })
}

// sortedLines splits a listing (without its ".\n") into sorted lines.
func sortedLines(s string) []string {
	s = strings.TrimSuffix(s, ".\n")
	if s == "" {
		return nil
	}
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(l)
	return l
}

// ---------------------------------------------------------------------------
// Binary protocol, for what the stock clients cannot do on demand (a worker
// that dies holding a job, exceptions, exact packets).

const (
	pCanDo          = 1
	pPreSleep       = 4
	pNoop           = 6
	pSubmitJob      = 7
	pJobCreated     = 8
	pGrabJob        = 9
	pNoJob          = 10
	pJobAssign      = 11
	pWorkComplete   = 13
	pWorkFail       = 14
	pEchoReq        = 16
	pEchoRes        = 17
	pSubmitJobBg    = 18
	pError          = 19
	pSetClientID    = 22
	pWorkException  = 25
	pOptionReq      = 26
	pOptionRes      = 27
	pWorkData       = 28
	pGrabJobUniq    = 30
	pJobAssignUniq  = 31
	pSubmitJobHigh  = 21
	pSubmitJobLow   = 33
	pGetStatus      = 15
	pStatusRes      = 20
	pSubmitJobLowBg = 34
)

type packet struct {
	magic string // "\x00REQ" or "\x00RES"
	typ   uint32
	body  []byte
}

func (p packet) args() []string { return strings.Split(string(p.body), "\x00") }

func (p packet) String() string { return fmt.Sprintf("%q type %d %q", p.magic, p.typ, p.body) }

type gearConn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	name string
}

func dialGear(t *testing.T, addr, name string) *gearConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", name, addr, err)
	}
	g := &gearConn{t: t, c: c, r: bufio.NewReader(c), name: name}
	t.Cleanup(func() { c.Close() })
	return g
}

// send writes one request packet whose arguments are joined by NUL.
func (g *gearConn) send(typ uint32, args ...string) {
	g.t.Helper()
	body := strings.Join(args, "\x00")
	b := make([]byte, 12, 12+len(body))
	copy(b, "\x00REQ")
	binary.BigEndian.PutUint32(b[4:], typ)
	binary.BigEndian.PutUint32(b[8:], uint32(len(body)))
	b = append(b, body...)
	g.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := g.c.Write(b); err != nil {
		g.t.Fatalf("%s: send type %d: %v", g.name, typ, err)
	}
}

// recv reads one packet, failing the test after timeout.
func (g *gearConn) recv(timeout time.Duration) packet {
	g.t.Helper()
	p, err := g.tryRecv(timeout)
	if err != nil {
		g.t.Fatalf("%s: receive: %v", g.name, err)
	}
	return p
}

func (g *gearConn) tryRecv(timeout time.Duration) (packet, error) {
	g.c.SetReadDeadline(time.Now().Add(timeout))
	var h [12]byte
	if _, err := io.ReadFull(g.r, h[:]); err != nil {
		return packet{}, err
	}
	if h[0] != 0 {
		return packet{}, fmt.Errorf("bad magic %q", h[:4])
	}
	n := binary.BigEndian.Uint32(h[8:])
	if n > 16<<20 { // the largest payload a test sends is 4 MiB
		return packet{}, fmt.Errorf("packet of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(g.r, body); err != nil {
		return packet{}, err
	}
	return packet{magic: string(h[:4]), typ: binary.BigEndian.Uint32(h[4:]), body: body}, nil
}

// expect reads one packet and checks its magic, type and body.
func (g *gearConn) expect(typ uint32, body string) packet {
	g.t.Helper()
	p := g.recv(10 * time.Second)
	if p.magic != "\x00RES" || p.typ != typ || string(p.body) != body {
		g.t.Fatalf("%s: got %v, want \"\\x00RES\" type %d %q", g.name, p, typ, body)
	}
	return p
}

// grabJob registers nothing; it grabs until a job comes, sleeping between
// tries (GRAB_JOB, NO_JOB, PRE_SLEEP, NOOP, ...), and returns JOB_ASSIGN's
// arguments: handle, function, workload.
func (g *gearConn) grabJob(timeout time.Duration) []string {
	g.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		g.send(pGrabJob)
		p := g.recv(time.Until(deadline))
		switch p.typ {
		case pJobAssign:
			a := strings.SplitN(string(p.body), "\x00", 3)
			if len(a) != 3 {
				g.t.Fatalf("%s: JOB_ASSIGN %q", g.name, p.body)
			}
			return a
		case pNoJob:
			g.send(pPreSleep)
			for {
				p := g.recv(time.Until(deadline))
				if p.typ == pNoop {
					break
				}
				g.t.Fatalf("%s: asleep, got %v", g.name, p)
			}
		default:
			g.t.Fatalf("%s: GRAB_JOB answered %v", g.name, p)
		}
	}
}

// submit sends a SUBMIT_JOB* packet and returns the handle of JOB_CREATED.
func (g *gearConn) submit(typ uint32, fn, unique, data string) string {
	g.t.Helper()
	g.send(typ, fn, unique, data)
	p := g.recv(10 * time.Second)
	if p.typ != pJobCreated {
		g.t.Fatalf("%s: submit answered %v", g.name, p)
	}
	return string(p.body)
}

// waitClosed waits until the server closes the connection.
func (g *gearConn) waitClosed(timeout time.Duration) error {
	g.c.SetReadDeadline(time.Now().Add(timeout))
	_, err := g.r.ReadByte()
	if err == io.EOF || errors.Is(err, syscall.ECONNRESET) {
		return nil
	}
	if err == nil {
		return errors.New("got data")
	}
	return err
}

// ---------------------------------------------------------------------------
// The server process itself

// With -p 0 the kernel picks the port, and the "listening" line names the
// one bound (gearmand 1.1.20 logs "Listening on 127.0.0.1:0" instead), so
// that whoever starts switchyard that way can find it without /proc.
func TestE2EListeningLineNamesPort(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand logs the port it was given, 0")
	}
	srv := startServerProc(t) // with -p 0
	if srv.port == 0 {
		t.Fatalf("listening on %s", srv.addr)
	}
	// The line comes after the port opens; poll for it.
	re := regexp.MustCompile(`\snotice\s+listening\s+\{"gearman": \["` + regexp.QuoteMeta(srv.addr) + `"\]`)
	waitUntil(t, e2eWaitTimeout, "a listening line naming "+srv.addr, func() (bool, string) {
		out := srv.stderr.String()
		return re.MatchString(out), out
	})
}

// SIGTERM with a worker connected and a job queued: the server exits 0,
// closes the connections and removes its pid file, which held its pid.
func TestE2ESigtermPidFile(t *testing.T) {
	t.Parallel()
	srv := startServerProc(t)
	pid := srv.cmd.Process.Pid
	b, err := os.ReadFile(srv.pidFile)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	if got, want := string(b), strconv.Itoa(pid)+"\n"; got != want {
		t.Errorf("pid file holds %q, want %q", got, want)
	}

	w := dialGear(t, srv.addr, "worker")
	w.send(pCanDo, "f")
	w.send(pEchoReq, "sync")
	w.expect(pEchoRes, "sync")
	c := dialGear(t, srv.addr, "client")
	c.submit(pSubmitJobBg, "f2", "", "queued")

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, ok := srv.exited(10 * time.Second)
	if !ok {
		t.Fatal("server still running 10s after SIGTERM")
	}
	if code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	if _, err := os.Stat(srv.pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after exit: %v, want it removed", err)
	}
	for _, g := range []*gearConn{w, c} {
		if err := g.waitClosed(5 * time.Second); err != nil {
			t.Errorf("%s: connection after exit: %v", g.name, err)
		}
	}
}
