package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/bench/harness"
)

func TestWritePidFile(t *testing.T) {
	if err := writePidFile(""); err != nil {
		t.Errorf(`writePidFile(""): %v`, err)
	}
	path := filepath.Join(t.TempDir(), "g.pid")
	if err := os.WriteFile(path, []byte("some much longer previous content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writePidFile(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(os.Getpid()) + "\n"; string(data) != want {
		t.Errorf("pid file holds %q, want %q", data, want)
	}
	if err := writePidFile(filepath.Join(t.TempDir(), "no", "such", "dir", "g.pid")); err == nil {
		t.Error("writePidFile into a missing directory succeeded")
	}
}

func TestRemovePidFile(t *testing.T) {
	removePidFile("")                                        // no-op
	removePidFile(filepath.Join(t.TempDir(), "missing.pid")) // no panic

	path := filepath.Join(t.TempDir(), "g.pid")
	if err := writePidFile(path); err != nil {
		t.Fatal(err)
	}
	removePidFile(path)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file still there: %v", err)
	}

	// Another process's pid file is left alone.
	other := filepath.Join(t.TempDir(), "other.pid")
	if err := os.WriteFile(other, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	removePidFile(other)
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another process's pid file was removed: %v", err)
	}
}

func TestSetFileLimit(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
			t.Errorf("restoring the limit: %v", err)
		}
	})
	get := func() syscall.Rlimit {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatal(err)
		}
		return rl
	}

	if err := setFileLimit(0); err != nil {
		t.Errorf("setFileLimit(0): %v", err)
	}
	if got := get(); got != orig {
		t.Errorf("setFileLimit(0) changed the limit: %+v -> %+v", orig, got)
	}

	target := int(min(orig.Cur, 4096)) - 1
	if err := setFileLimit(target); err != nil {
		t.Fatalf("setFileLimit(%d): %v", target, err)
	}
	if got := get(); got.Cur != uint64(target) || got.Max != orig.Max {
		t.Errorf("after setFileLimit(%d): %+v (hard was %d)", target, got, orig.Max)
	}

	if err := setFileLimit(-1); err == nil {
		t.Error("setFileLimit(-1) succeeded")
	}

	// Above the hard limit: only a privileged process may raise it.
	above := int(orig.Max) + 1
	err := setFileLimit(above)
	switch {
	case os.Geteuid() != 0:
		if err == nil || !strings.HasPrefix(err.Error(), "Failed to set limit for the number of file descriptors.") {
			t.Errorf("unprivileged setFileLimit(%d): %v", above, err)
		}
	case err == nil:
		if got := get(); got.Cur != uint64(above) || got.Max != uint64(above) {
			t.Errorf("after setFileLimit(%d) as root: %+v", above, got)
		}
	default:
		t.Logf("setFileLimit(%d) as root: %v (hard limit at fs.nr_open?)", above, err)
	}
}

func TestDropPrivilegesNoop(t *testing.T) {
	if err := dropPrivileges(""); err != nil {
		t.Errorf(`dropPrivileges(""): %v`, err)
	}
	uid := os.Getuid()
	err := dropPrivileges("no-such-user-switchyard")
	if err == nil {
		t.Fatal("dropPrivileges(unknown user) succeeded")
	}
	want := "Could not find user : no-such-user-switchyard"
	if uid != 0 && os.Geteuid() != 0 {
		want = "Must be root to switch users."
	}
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if os.Getuid() != uid {
		t.Fatal("uid changed")
	}
}

// The helper process: the test binary re-executed by the tests below. It does
// nothing in a normal run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("SWITCHYARD_TEST_HELPER")
	if mode == "" {
		t.Skip("helper process for other tests")
	}
	dir := os.Getenv("SWITCHYARD_TEST_DIR")
	switch mode {
	case "drop":
		if err := dropPrivileges(os.Getenv("SWITCHYARD_TEST_USER")); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		groups, _ := syscall.Getgroups()
		fmt.Printf("uid=%d euid=%d gid=%d egid=%d groups=%v\n", os.Getuid(), os.Geteuid(), os.Getgid(), os.Getegid(), groups)
		// Every thread must have switched, not only this one.
		for _, task := range listTasks() {
			status, _ := os.ReadFile("/proc/self/task/" + task + "/status")
			for _, line := range strings.Split(string(status), "\n") {
				if strings.HasPrefix(line, "Uid:") || strings.HasPrefix(line, "Gid:") {
					fmt.Printf("task %s %s\n", task, strings.Join(strings.Fields(line), " "))
				}
			}
		}
		os.Exit(0)

	case "daemon-ready", "daemon-fail", "daemon-silent":
		if mode == "daemon-silent" {
			daemonReadyTimeout = 200 * time.Millisecond
		}
		child, err := daemonize([]string{"should-not-be-used"})
		if err != nil || !child {
			fmt.Fprintln(os.Stderr, "helper: daemonize:", child, err)
			os.Exit(5)
		}
		if _, ok := os.LookupEnv(daemonEnv); ok {
			os.Exit(6) // the marker must not leak to what the daemon runs
		}
		if mode == "daemon-fail" {
			os.Exit(3)
		}
		if err := writePidFile(filepath.Join(dir, "pid")); err != nil {
			os.Exit(7)
		}
		if mode == "daemon-ready" {
			if err := daemonReady(); err != nil {
				os.Exit(8)
			}
			if err := daemonReady(); err != nil { // a second call is harmless
				os.Exit(9)
			}
		}
		time.Sleep(60 * time.Second) // until the test kills it
		os.Exit(0)
	}
	t.Fatalf("unknown helper mode %q", mode)
}

func listTasks() []string {
	entries, _ := os.ReadDir("/proc/self/task")
	var tasks []string
	for _, e := range entries {
		tasks = append(tasks, e.Name())
	}
	return tasks
}

func TestDropPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	for _, name := range []string{"nobody", u.Uid} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), "SWITCHYARD_TEST_HELPER=drop", "SWITCHYARD_TEST_USER="+name)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		want := fmt.Sprintf("uid=%s euid=%s gid=%s egid=%s groups=[", u.Uid, u.Uid, u.Gid, u.Gid)
		if !strings.Contains(string(out), want) {
			t.Errorf("dropPrivileges(%q):\n%s\nwant %q", name, out, want)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "task ") {
				continue
			}
			f := strings.Fields(line) // task N Uid: real eff saved fs
			for _, id := range f[3:] {
				if id != u.Uid && id != u.Gid {
					t.Errorf("a thread kept a privileged id: %s", line)
				}
			}
		}
	}
}

// startDaemon runs daemonize in this process (the parent side) with the
// helper as the child.
func startDaemon(t *testing.T, mode string) (dir string, err error) {
	t.Helper()
	if _, ok := os.LookupEnv(daemonEnv); ok {
		t.Fatalf("%s set in the test's environment", daemonEnv)
	}
	dir = t.TempDir()
	t.Setenv("SWITCHYARD_TEST_HELPER", mode)
	t.Setenv("SWITCHYARD_TEST_DIR", dir)
	child, err := daemonize([]string{"-test.run=^TestHelperProcess$"})
	if child {
		t.Fatal("daemonize returned child=true in the parent")
	}
	return dir, err
}

// daemonPid reads the pid the helper daemon wrote and arranges its end.
func daemonPid(t *testing.T, dir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatalf("the daemon wrote no pid file before it was ready: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		t.Fatalf("pid file %q", data)
	}
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil) // it is our child: reap it
	})
	return pid
}

func TestDaemonize(t *testing.T) {
	dir, err := startDaemon(t, "daemon-ready")
	if err != nil {
		t.Fatal(err)
	}
	pid := daemonPid(t, dir)
	if pid == os.Getpid() {
		t.Fatal("the daemon is this process")
	}
	// A new session, led by the daemon.
	if sid, err := procStatField(pid, 6); err != nil || sid != strconv.Itoa(pid) {
		t.Errorf("daemon session %q (%v), want %d", sid, err, pid)
	}
	// Same working directory (gearmand does not chdir).
	cwd, _ := os.Getwd()
	if got, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || got != cwd {
		t.Errorf("daemon cwd %q (%v), want %q", got, err, cwd)
	}
	// Once ready, its standard streams are /dev/null.
	for fd := 0; fd <= 2; fd++ {
		if got, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); err != nil || got != os.DevNull {
			t.Errorf("daemon fd %d -> %q (%v), want /dev/null", fd, got, err)
		}
	}
}

func TestDaemonizeChildFails(t *testing.T) {
	_, err := startDaemon(t, "daemon-fail")
	var de *daemonError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T), want a *daemonError", err, err)
	}
	if de.ExitCode() != 3 {
		t.Errorf("exit code %d, want 3", de.ExitCode())
	}
	if want := "the daemon exited with status 3 before it was ready"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestDaemonizeReadyTimeout(t *testing.T) {
	w := harness.NewWithin(5 * time.Second) // for a readiness timeout of 200 ms
	dir, err := startDaemon(t, "daemon-silent")
	if err != nil {
		t.Fatal(err)
	}
	daemonPid(t, dir)
	if d := time.Since(w.Start); w.Exceeds(d) {
		t.Errorf("the parent waited %v for a daemon that never called daemonReady, want at most %v", d, w)
	}
}

func TestDaemonReadyOutsideDaemon(t *testing.T) {
	if err := daemonReady(); err != nil {
		t.Errorf("daemonReady in a process that is no daemon: %v", err)
	}
}

// procStatField returns field n (1-based, as in proc(5)) of /proc/<pid>/stat.
func procStatField(pid, n int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	// The command (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(data, ')')
	fields := strings.Fields(string(data[i+1:]))
	if i < 0 || n < 3 || n-3 >= len(fields) {
		return "", fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	return fields[n-3], nil
}
