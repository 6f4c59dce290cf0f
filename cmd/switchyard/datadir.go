package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockName is the file in the data directory that one switchyard at a time
// holds (flock) for as long as it runs, with its pid in it, so that a second
// one is told who holds the directory instead of the store's "resource
// temporarily unavailable".
const lockName = "switchyard.lock"

// dataDirPath is --data-dir made absolute. Its default is derived from the
// Gearman port, so that servers started in one directory on different
// ports, as test suites start gearmand, never share a store, and one server
// finds its store again after a restart.
func dataDirPath(o *options) (string, error) {
	dir := o.DataDir
	if dir == "" {
		dir = filepath.Join(defaultDataDir, o.Port)
	}
	return filepath.Abs(dir)
}

// dirLock is a held data directory.
type dirLock struct{ f *os.File }

// lockDataDir makes dir if need be and takes its lock, writing our pid in
// the lock file. A directory another process holds is an error naming that
// process's pid, when the file tells it.
func lockDataDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is held by another switchyard (%s); give each server its own --data-dir", dir, holder(path))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &dirLock{f: f}, nil
}

// holder names the process in a lock file, for the error.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
		return "pid " + strconv.Itoa(pid)
	}
	return "pid unknown"
}

// unlock releases the directory. The file stays: only the lock means
// anything, and the kernel drops it when the process dies however it dies.
func (l *dirLock) unlock() {
	if l != nil {
		l.f.Close()
	}
}
