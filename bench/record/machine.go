package record

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// DetectMachine describes the machine the process runs on.
func DetectMachine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		m.CPUModel = cpuModel(f)
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		m.MemoryMB = memTotalMB(f)
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// LoadAvg returns the 1-minute load average of /proc/loadavg, or -1.
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	return parseLoadAvg(string(b))
}

// parseLoadAvg returns the first field of /proc/loadavg, or -1.
func parseLoadAvg(s string) float64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// cpuModel returns the first "model name" of /proc/cpuinfo.
func cpuModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return ""
}

// memTotalMB returns MemTotal of /proc/meminfo in MiB.
func memTotalMB(r io.Reader) int64 {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb >> 10
		}
	}
	return 0
}

// GitCommit returns the short commit of HEAD in dir, with "-dirty" when the
// work tree has changes outside the results directory (a run's own results
// must not make the next run dirty), or "unknown" outside a repository.
func GitCommit(dir, resultsDir string) string {
	git := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	commit, err := git("rev-parse", "--short", "HEAD")
	if err != nil || commit == "" {
		return "unknown"
	}
	args := []string{"status", "--porcelain", "--", "."}
	// A results directory outside the tree (--out /tmp/x) is nothing to
	// exclude, and git refuses such a pathspec.
	if inside(dir, resultsDir) {
		args = append(args, ":(exclude)"+resultsDir)
	}
	if status, err := git(args...); err != nil || status != "" {
		commit += "-dirty"
	}
	return commit
}

// inside reports whether path (relative to dir if not absolute) lies in dir.
func inside(dir, path string) bool {
	if path == "" {
		return false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	absDir, err1 := filepath.Abs(dir)
	absPath, err2 := filepath.Abs(path)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(absDir, absPath)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
