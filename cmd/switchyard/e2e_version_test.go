package main

import (
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// gitRevision is what a binary built from this checkout reports as its
// revision: HEAD, "+dirty" when git status lists a change, as make build
// stamps it.
func gitRevision(t *testing.T) string {
	t.Helper()
	rev := revisionOfTree()
	if rev == "" {
		t.Skip("not in a git checkout")
	}
	return rev
}

// revisionOfTree is the Makefile's REVISION, "" outside git.
func revisionOfTree() string {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	rev := strings.TrimSpace(string(head))
	if status, err := exec.Command("git", "status", "--porcelain").Output(); err == nil && len(status) > 0 {
		rev += "+dirty"
	}
	return rev
}

// -V names the release, the commit the binary was built from and its Go.
func TestE2EVersion(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand's -V is its own")
	}
	out := mustRun(t, "", serverBinary(t), "-V")
	want := "switchyard " + version + " (commit " + gitRevision(t) + ", " + runtime.Version() + "; gearmand 1.1.20 compatible)\n"
	if out != want {
		t.Errorf("-V = %q, want %q", out, want)
	}
}
