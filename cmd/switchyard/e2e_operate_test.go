package main

// What an operator meets on day one: signals as gearmand takes them, one
// listen rule for every protocol, servers side by side on one machine, and
// start-up failures that leave nothing behind.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/bench/harness"
)

// alive tells whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...: the comm may hold spaces, the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// readPid reads a pid file, waiting for it to be written.
func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	waitUntil(t, e2eWaitTimeout, "the pid file "+path, func() (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0, string(b)
	})
	return pid
}

// killAtCleanup makes sure a daemon the test started is gone when it ends.
func killAtCleanup(t *testing.T, pid int) {
	t.Cleanup(func() {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// listenLine waits for the "listening" line in text read by read and returns
// it.
func listenLine(t *testing.T, read func() string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\S+\s+notice\s+listening\s+\{.*$`)
	var line string
	waitUntil(t, e2eWaitTimeout, "the listening line", func() (bool, string) {
		out := read()
		line = re.FindString(out)
		return line != "", out
	})
	return line
}

// listedAddr is the first address the listening line gives protocol.
func listedAddr(t *testing.T, line, protocol string) string {
	t.Helper()
	m := regexp.MustCompile(`"` + protocol + `": \["([^"]+)"`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s in %q", protocol, line)
	}
	return m[1]
}

// With -d -l FILE -P PIDFILE, as Debian's unit runs gearmand: logrotate
// renames the log and sends SIGHUP; the daemon lives on and writes to a
// new file at the path. SIGUSR1 and SIGUSR2 are ignored, as by gearmand.
// SIGTERM then stops it and removes the pid file.
func TestE2EDaemonSighup(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("switchyard's log lines")
	}
	dir := t.TempDir()
	logPath, pidPath := filepath.Join(dir, "switchyard.log"), filepath.Join(dir, "switchyard.pid")
	mustRun(t, "", serverBinary(t), "-d", "-l", logPath, "-P", pidPath, "-L", "127.0.0.1", "-p", "0",
		"--data-dir", filepath.Join(dir, "data"), "--periodic-listen", "off", "--controller-socket", "off",
		"--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off")
	pid := readPid(t, pidPath)
	killAtCleanup(t, pid)
	read := func(path string) func() string {
		return func() string { b, _ := os.ReadFile(path); return string(b) }
	}
	addr := listedAddr(t, listenLine(t, read(logPath)), "gearman")
	getpid := func() error {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		got, err := harness.Getpid(c, 2*time.Second)
		if err == nil && got != pid {
			err = fmt.Errorf("getpid %d, want %d", got, pid)
		}
		return err
	}

	rotated := logPath + ".1"
	if err := os.Rename(logPath, rotated); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, e2eWaitTimeout, "a new log file", func() (bool, string) {
		out := read(logPath)()
		return strings.Contains(out, "log file reopened"), out
	})
	if old := read(rotated)(); !strings.Contains(old, "notice\tSIGHUP, reopening log file") {
		t.Errorf("the rotated log does not note the SIGHUP:\n%s", old)
	}
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2} {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	// Served after the signals: a signal is delivered before the next
	// system call returns, so a killed process could not answer.
	if err := getpid(); err != nil {
		t.Fatalf("after SIGHUP, SIGUSR1, SIGUSR2: %v", err)
	}

	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, e2eWaitTimeout, "the daemon gone", func() (bool, string) { return !alive(pid), "" })
	if out := read(logPath)(); !strings.Contains(out, "shutdown complete") {
		t.Errorf("the new log file misses the shutdown:\n%s", out)
	}
	if _, err := os.Stat(pidPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after SIGTERM: %v", err)
	}
}

// -L is the address of every TCP listener whose address is not given:
// with a loopback -L, no socket of the process listens anywhere else, with
// every protocol on its default port. A default port another process holds
// turns its protocol off instead (and says so); the check holds either way.
//
// Not parallel: the tests of this package that run at the same time would
// otherwise hold the default ports (TestE2ETwoInstancesDefaults does).
func TestE2EListenLoopbackOnly(t *testing.T) {
	if isGearmand(t) {
		t.Skip("switchyard's protocols")
	}
	for _, listen := range []string{"-L127.0.0.1", "--listen=localhost"} {
		t.Run(listen, func(t *testing.T) {
			dir := t.TempDir()
			p := startProc(t, "", serverBinary(t), listen, "-p", "0", "-r", "http",
				"--data-dir", filepath.Join(dir, "data"), "--controller-socket", filepath.Join(dir, "ctl", "controller.sock"))
			line := listenLine(t, p.stderr.String)
			for _, name := range []string{"periodic", "dwork", "memodb", "http", "metrics"} {
				if strings.Contains(line, `"`+name+`": [`) {
					continue
				}
				off := regexp.MustCompile(`(?m)^\S+\s+notice\s+` + name + ` is off: .*address already in use`)
				if !off.MatchString(p.stderr.String()) {
					t.Errorf("%s neither listens nor says its default port is taken:\n%s", name, p.stderr.String())
				}
				t.Logf("%s: its default port is taken on this machine", name)
			}
			addrs, err := harness.Listening(p.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if len(addrs) < 2 {
				t.Fatalf("listening on %v: too few", addrs)
			}
			for _, a := range addrs {
				if !a.Addr().IsLoopback() {
					t.Errorf("listens on %v, not loopback (all: %v)", a, addrs)
				}
			}
		})
	}
}

// Two servers with default flags in one working directory, each on its own
// -p port: both run, each with its own data directory; the second turns
// off, at the default log level, what the first holds. A third on the
// first's data directory is refused, naming the holder.
//
// Not parallel, as TestE2EListenLoopbackOnly.
func TestE2ETwoInstancesDefaults(t *testing.T) {
	if isGearmand(t) {
		t.Skip("switchyard's protocols")
	}
	dir := t.TempDir()
	// Default flags but the ports: -p 0, and a data directory each.
	start := func(data string) *bgProc {
		return startProcIn(t, dir, serverBinary(t), "-p", "0", "--data-dir", filepath.Join(dir, data))
	}
	first := start("switchyard-data/a")
	firstLine := listenLine(t, first.stderr.String)
	second := start("switchyard-data/b")
	secondLine := listenLine(t, second.stderr.String)
	listedAddr(t, secondLine, "gearman")
	for _, name := range []string{"periodic", "controller", "dwork", "memodb", "metrics"} {
		if !strings.Contains(firstLine, `"`+name+`": [`) {
			t.Logf("%s: off in the first server too (its default is taken here)", name)
			continue
		}
		if strings.Contains(secondLine, `"`+name+`": [`) {
			t.Errorf("the second server listens on %s too: %s", name, secondLine)
		}
		off := regexp.MustCompile(`(?m)^\S+\s+notice\s+` + name + ` is off: its default address cannot be used`)
		if !off.MatchString(second.stderr.String()) {
			t.Errorf("the second server does not say %s is off:\n%s", name, second.stderr.String())
		}
	}

	third := runCmd(t, e2eCmdTimeout, "", serverBinary(t), "-p", "0", "--data-dir", filepath.Join(dir, "switchyard-data/a"),
		"--periodic-listen", "off", "--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off")
	want := fmt.Sprintf("data directory %s is held by another switchyard (pid %d)", filepath.Join(dir, "switchyard-data/a"), first.cmd.Process.Pid)
	if third.code != 1 || !strings.Contains(third.stderr, want) {
		t.Errorf("a third server on the first's data directory: %v\nwant exit 1 and %q", third, want)
	}
}

// Without --data-dir, the queue lives in switchyard-data/PORT of the
// working directory, named in the log at the default level; the lock file
// there names the holder.
func TestE2EDefaultDataDir(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("switchyard's data directory")
	}
	dir := t.TempDir()
	p := startProcIn(t, dir, serverBinary(t), "-L", "127.0.0.1", "-p", "0",
		"--periodic-listen", "off", "--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off")
	listenLine(t, p.stderr.String)
	want := filepath.Join(dir, "switchyard-data", "0")
	if !strings.Contains(p.stderr.String(), `notice	job store	{"queue": "durable", "dir": "`+want+`"`) {
		t.Errorf("no notice naming %s:\n%s", want, p.stderr.String())
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(want, lockName))); got != strconv.Itoa(p.cmd.Process.Pid) {
		t.Errorf("lock file holds %q, want the pid %d", got, p.cmd.Process.Pid)
	}
}

// An address given that cannot be bound stops the start, after other
// frontends have started: everything started is stopped again (the
// Periodic unix socket file is removed), no pid file is left, and the data
// directory is free for the next server.
func TestE2EStartFailureStopsWhatStarted(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("switchyard's protocols")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	sock, pidPath, data := filepath.Join(dir, "periodic.sock"), filepath.Join(dir, "s.pid"), filepath.Join(dir, "data")
	args := []string{"-L", "127.0.0.1", "-p", "0", "-P", pidPath, "--data-dir", data,
		"--periodic-listen", "unix://" + sock, "--controller-socket", "off", "--memodb-listen", "off", "--metrics-listen", "off"}
	r := runCmd(t, e2eCmdTimeout, "", serverBinary(t), append(args, "--dwork-listen", "tcp://"+taken.Addr().String())...)
	if r.code != 1 || !strings.Contains(r.stderr, "cannot start") || !strings.Contains(r.stderr, "address already in use") {
		t.Fatalf("a taken --dwork-listen: %v", r)
	}
	if !strings.Contains(r.stderr, "dwork") {
		t.Errorf("the error does not name dwork: %v", r)
	}
	for _, p := range []string{sock, pidPath} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after a failed start: %v", p, err)
		}
	}
	// The same server with dwork off starts on the same directory and
	// socket path.
	p := startProc(t, "", serverBinary(t), append(args, "--dwork-listen", "off")...)
	line := listenLine(t, p.stderr.String)
	if got := listedAddr(t, line, "periodic"); got != sock {
		t.Errorf("periodic on %q, want %q", got, sock)
	}
	if _, err := netip.ParseAddrPort(listedAddr(t, line, "gearman")); err != nil {
		t.Error(err)
	}
}
