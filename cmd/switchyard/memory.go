package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"switchyard/engine/budget"
)

// After a burst the Go heap shrinks at the next collection, but an idle
// server has no next collection, and the runtime hands pages back to the
// kernel only slowly: RSS stays at its peak for minutes. gearmand users
// know that pain. So the server watches what it holds for others (queued
// jobs, the memory budget's bytes) and, each time that has halved since a
// peak worth the trouble, collects and returns the free pages at once.

// halving decides when to give memory back: once a quantity that peaked at
// min or more has fallen to half its level, and again at each further
// halving, down to a sixty-fourth of min, where the episode ends and a new
// peak of min is needed. A busy server whose queue swings between 10k and
// 5k jobs is never made to collect by it.
type halving struct {
	min      int64
	level    int64 // the peak, then the level at the last release
	draining bool  // released since the last peak of min or more
}

// observe takes the current value and reports whether to release memory.
func (h *halving) observe(n int64) bool {
	if n > h.level {
		h.level = n
		return false
	}
	if h.level < h.min && !h.draining {
		h.level = n // no peak worth a release: follow the value down
		return false
	}
	if n > h.level/2 {
		return false
	}
	h.level = n
	h.draining = n >= h.min/64
	return true
}

// Thresholds of the release: a queue of 100k jobs, or 64 MiB held by
// peers, is worth a collection when it is gone.
const (
	releaseJobs  = 100_000
	releaseBytes = 64 << 20
)

// returnMemory polls the job count and the budget's bytes every interval
// until ctx ends, and releases memory when either has halved.
// held is the most held since its last call, then what is held now.
func returnMemory(ctx context.Context, jobs func() int, held func() (peak, now int64), interval time.Duration) {
	j := halving{min: releaseJobs}
	b := halving{min: releaseBytes}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Both watches see every sample, so each keeps its level.
			peak, now := held()
			b.observe(peak) // a burst between two samples is a peak too
			rj, rb := j.observe(int64(jobs())), b.observe(now)
			if rj || rb {
				release()
			}
		}
	}
}

// release collects twice, so that what sync.Pools held through the first
// collection (gnet's buffers of closed connections among them) is free
// too, then returns the free pages to the kernel.
func release() {
	runtime.GC()
	debug.FreeOSMemory()
}

// memoryLimits is the machine's memory (MemTotal) and the cgroup's limit
// on this process (the smallest of cgroup v2's memory.max along its path,
// or cgroup v1's memory.limit_in_bytes), 0 when unknown or unlimited.
// root is "/" but for tests.
func memoryLimits(root string) (machine, cgroup int64) {
	if b, err := os.ReadFile(path.Join(root, "proc/meminfo")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					machine = kb << 10
				}
			}
		}
	}
	lower := func(v int64) {
		if v > 0 && (cgroup == 0 || v < cgroup) {
			cgroup = v
		}
	}
	if b, err := os.ReadFile(path.Join(root, "proc/self/cgroup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok { // cgroup v2
				for dir := path.Clean("/" + p); ; dir = path.Dir(dir) {
					lower(readLimit(path.Join(root, "sys/fs/cgroup", dir, "memory.max")))
					if dir == "/" {
						break
					}
				}
			}
		}
	}
	lower(readLimit(path.Join(root, "sys/fs/cgroup/memory/memory.limit_in_bytes"))) // cgroup v1
	if machine > 0 && cgroup >= machine {
		cgroup = 0 // v1 writes "no limit" as a huge number
	}
	return machine, cgroup
}

// readLimit reads a cgroup memory limit file: bytes, or 0 for "max", a
// missing file or anything else.
func readLimit(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// autoBudget is --max-memory's default: a quarter of the machine's memory
// or of the cgroup's limit, whichever is smaller; 1 GiB when neither is
// known. The rest is for the queued jobs, the store and the runtime.
func autoBudget(machine, cgroup int64) int64 {
	m := machine
	if cgroup > 0 && (m == 0 || cgroup < m) {
		m = cgroup
	}
	if m <= 0 {
		return 1 << 30
	}
	return m / 4
}

// memoryBudget makes the server's memory budget from --max-memory (-1:
// autoBudget) and says what it is. Under a cgroup limit, and unless
// GOMEMLIMIT says otherwise, the Go runtime is also told to collect harder
// as the process nears nine tenths of that limit, rather than be killed at
// it.
func memoryBudget(maxMemory int64, log *zap.Logger) *budget.Budget {
	machine, cgroup := memoryLimits("/")
	limit := maxMemory
	if limit < 0 {
		limit = autoBudget(machine, cgroup)
	}
	fields := []zap.Field{zap.Int64("max_memory", limit), zap.Int64("machine", machine)}
	if cgroup > 0 {
		fields = append(fields, zap.Int64("cgroup_limit", cgroup))
		if os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(cgroup / 10 * 9)
			fields = append(fields, zap.Int64("go_memory_limit", cgroup/10*9))
		}
	}
	if limit == 0 {
		fields[0] = zap.String("max_memory", "0 (counted, not enforced)")
	}
	notice(log, "memory budget", fields...)
	b := budget.New(limit)
	b.OnPressure(collectSooner())
	return b
}

// pressureGC is the collector's GOGC while the budget is past half spent.
// What peers make the server hold is mostly thrown away soon (a large
// packet's buffer outgrown, a cut connection's replies), and at the
// default 100 the heap may grow by as much again as is live before it is
// collected: 40 connections each sending 8 MiB of a packet took a server
// with a 128 MiB budget to 310 MiB of RSS; at 25 it stays near the budget.
const pressureGC = 25

// collectSooner is the budget's pressure hook: GOGC pressureGC while
// pressed, what it was before after. A GOGC below it (or off) is left as
// it is. Calls come in order, pressed and not by turns.
func collectSooner() func(pressed bool) {
	before := 0
	return func(pressed bool) {
		if pressed {
			before = debug.SetGCPercent(pressureGC)
			if before < pressureGC { // lower already, or off (-1)
				debug.SetGCPercent(before)
			}
			return
		}
		debug.SetGCPercent(before)
	}
}
