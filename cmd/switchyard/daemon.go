package main

// Process helpers for main: pid file, file descriptor limit, user switch and
// daemonizing, each as gearmand 1.1.20 does it. Linux only.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// writePidFile writes "<pid>\n" to path (mode 0644, replacing any previous
// content). An empty path is a no-op.
func writePidFile(path string) error {
	if path == "" {
		return nil
	}
	// Written aside and renamed into place: a reader sees the whole pid
	// or no file, never an empty one.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// removePidFile removes the pid file if it still holds this process's pid,
// so that a second instance that failed to start does not remove the pid
// file of the one that runs. Errors are ignored; "" is a no-op.
func removePidFile(path string) {
	if path == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		return
	}
	os.Remove(path)
}

// setFileLimit sets the soft RLIMIT_NOFILE to n, raising the hard limit too
// when it is lower (which needs privilege), as gearmand's -f does. n == 0 is
// a no-op.
func setFileLimit(n int) error {
	if n == 0 {
		return nil
	}
	if n < 0 {
		return fmt.Errorf("invalid file descriptor limit %d", n)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("Could not get file descriptor limit (%w)", err)
	}
	rl.Cur = uint64(n)
	if rl.Max < rl.Cur {
		rl.Max = rl.Cur
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("Failed to set limit for the number of file descriptors.  Try running as root or giving a smaller value to -f. (%w)", err)
	}
	return nil
}

// dropPrivileges switches to user (a name, or failing that a numeric uid):
// supplementary groups, then gid, then uid. Go applies these to every thread
// of the process on Linux. As in gearmand, only root may switch. "" is a
// no-op.
func dropPrivileges(name string) error {
	if name == "" {
		return nil
	}
	if os.Getuid() != 0 && os.Geteuid() != 0 {
		return errors.New("Must be root to switch users.")
	}
	u, err := user.Lookup(name)
	if err != nil {
		if _, numErr := strconv.Atoi(name); numErr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return fmt.Errorf("Could not find user : %s", name)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("Could not find user : %s (uid %q, gid %q)", name, u.Uid, u.Gid)
	}
	groups := []int{gid}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && g != gid {
				groups = append(groups, g)
			}
		}
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("Could not switch to user : %s (setgroups: %w)", name, err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("Could not switch to user : %s (setgid: %w)", name, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("Could not switch to user : %s (setuid: %w)", name, err)
	}
	return nil
}

// daemonEnv marks the re-executed child; its value is the number of the file
// descriptor on which the child reports that it is ready.
const daemonEnv = "SWITCHYARD_DAEMON_READY_FD"

// daemonReadyTimeout: a child that has not called daemonReady by then is
// taken as ready, so that a parent never waits forever. (A variable for the
// tests.)
var daemonReadyTimeout = 10 * time.Second

var (
	daemonReadyPipe *os.File // in the child: where to report readiness
	daemonReadyOnce sync.Once
	daemonReadyErr  error
)

// daemonError is daemonize's error when the child exited before it was
// ready; ExitCode is the child's exit status, for the parent to exit with (as
// gearmand's parent does).
type daemonError struct{ code int }

func (e *daemonError) Error() string {
	return fmt.Sprintf("the daemon exited with status %d before it was ready", e.code)
}

func (e *daemonError) ExitCode() int { return e.code }

// daemonize detaches the process the way gearmand -d does, by re-executing
// the program with args (os.Args[1:]) in a new session (setsid), with stdin
// on /dev/null and the working directory unchanged (gearmand does not chdir).
//
// In the parent, it waits until the child is ready and returns child=false:
// the parent should then exit 0. If the child exits first, the error is a
// *daemonError carrying its exit status (the child will have printed why on
// the inherited stderr).
//
// In the re-executed child, it returns child=true at once. The child keeps
// the parent's stdout and stderr so that startup errors reach the terminal;
// main should call daemonReady once it serves (listening, pid file written),
// which releases the parent and points stdout and stderr to /dev/null. A
// child that never calls it is taken as ready after daemonReadyTimeout.
func daemonize(args []string) (child bool, err error) {
	if v, ok := os.LookupEnv(daemonEnv); ok {
		os.Unsetenv(daemonEnv)
		if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
			daemonReadyPipe = os.NewFile(uintptr(fd), "daemon-ready")
			syscall.CloseOnExec(fd)
			time.AfterFunc(daemonReadyTimeout, func() { daemonReady() })
		}
		return true, nil
	}

	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return false, err
	}
	defer devNull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return false, err
	}
	defer r.Close()

	cmd := exec.Command(exe, args...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), daemonEnv+"=3") // ExtraFiles[0] is fd 3
	cmd.Stdin = devNull
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	w.Close()
	if err != nil {
		return false, err
	}

	// The child writes one byte when ready; EOF means it exited (or closed
	// the pipe) without being ready.
	var b [1]byte
	if n, _ := r.Read(b[:]); n == 1 {
		cmd.Process.Release()
		return false, nil
	}
	code := 1
	if state, err := cmd.Process.Wait(); err == nil && state.Exited() {
		code = state.ExitCode()
	}
	if code == 0 {
		code = 1 // exited "successfully" but never served
	}
	return false, &daemonError{code: code}
}

// daemonReady points stdin, stdout and stderr to /dev/null, then tells the
// waiting parent that the daemonized child serves. Outside a daemonized
// child, and after the first call, it does nothing.
func daemonReady() error {
	if daemonReadyPipe == nil {
		return nil
	}
	daemonReadyOnce.Do(func() {
		// Detach from the terminal first, so that the parent's exit means
		// the daemon no longer holds its stdout and stderr.
		daemonReadyErr = redirectStdio()
		if _, err := daemonReadyPipe.Write([]byte{'R'}); err != nil && daemonReadyErr == nil {
			daemonReadyErr = err
		}
		daemonReadyPipe.Close()
	})
	return daemonReadyErr
}

func redirectStdio() error {
	f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var errs []error
	for fd := 0; fd <= 2; fd++ {
		if err := syscall.Dup3(int(f.Fd()), fd, 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
