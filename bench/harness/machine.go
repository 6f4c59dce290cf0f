package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MachineCPU is what all of a machine's CPUs have done so far, from
// /proc/stat: between two readings, the wall time times CPUs is what the
// machine could have run, Busy grew by what every process on it ran (and
// the kernel for them), and Idle by what nothing wanted. The rest is time
// the machine did not have at all: on a virtual machine, time its host
// gave to others without saying so in the steal column.
type MachineCPU struct {
	At   time.Time     // when it was read
	CPUs int           // the cpuN lines
	Busy time.Duration // user, nice, system, irq, softirq, steal
	Idle time.Duration // idle, iowait
}

// ReadMachineCPU reads /proc/stat.
func ReadMachineCPU() (MachineCPU, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return MachineCPU{}, err
	}
	defer f.Close()
	m, err := parseMachineCPU(f)
	if err != nil {
		return m, fmt.Errorf("/proc/stat: %w", err)
	}
	m.At = time.Now()
	return m, nil
}

// parseMachineCPU reads the "cpu" line (user nice system idle iowait irq
// softirq steal, in USER_HZ ticks, then guest and guest_nice, which user
// and nice count already) and counts the cpuN lines.
func parseMachineCPU(r io.Reader) (MachineCPU, error) {
	var m MachineCPU
	sc := bufio.NewScanner(r)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return m, err
		}
		return m, io.ErrUnexpectedEOF
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return m, fmt.Errorf("first line %q, want cpu and 8 times", sc.Text())
	}
	for i, f := range fields[1:9] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return m, err
		}
		d := time.Duration(n) * time.Second / clockTicks
		if i == 3 || i == 4 { // idle, iowait
			m.Idle += d
		} else {
			m.Busy += d
		}
	}
	for sc.Scan() {
		if name, _, _ := strings.Cut(sc.Text(), " "); len(name) > 3 && name[:3] == "cpu" {
			m.CPUs++
		}
	}
	if m.CPUs == 0 {
		return m, fmt.Errorf("no cpuN line")
	}
	return m, sc.Err()
}

// OthersShare is the share of what the machine could have run from a to
// b that went neither to our processes, which ran for ours, nor unused:
// what other processes took, and what the machine did not have. 0 on a
// machine that runs nothing else, near 1 on one others keep busy. A
// process of ours that a test times waits for theirs, so a time bound on
// it, measured on an idle machine, is held against Stretch of itself.
// Busy and Idle count 10 ms ticks: the result is clamped to [0, 1].
func OthersShare(a, b MachineCPU, ours time.Duration) float64 {
	could := b.At.Sub(a.At) * time.Duration(b.CPUs)
	if could <= 0 {
		return 0
	}
	s := 1 - float64(ours+b.Idle-a.Idle)/float64(could)
	return min(1, max(0, s))
}

// MaxShare is the most of the machine Stretch takes others to have had:
// past it, a bound stops growing, at 50 times itself. (Beside other
// builds, others have been seen to have 96% of this 2-core machine.)
const MaxShare = 0.98

// Stretch is bound, a time that a test allows on a machine that runs
// nothing else, held against one of which others had share: what slows
// a process in proportion to the CPU it gets (a loop's turn, a due job's
// delivery, an election) takes bound/(1-share). On an idle machine it is
// bound itself, so a regression that an absolute bound caught there, it
// catches; on a busy one, a regression that doubles the time doubles it
// against a bound that grew only with the machine's load.
func Stretch(bound time.Duration, share float64) time.Duration {
	d := time.Duration(float64(bound) / (1 - min(MaxShare, max(0, share))))
	return d.Round(time.Microsecond)
}

// Load measures, from its start, the share of the machine others had
// (OthersShare). Ours are the processes it is told of; one that exits
// keeps the CPU time it was last read with.
type Load struct {
	mu    sync.Mutex
	start MachineCPU
	spent map[int][2]time.Duration // by pid: CPU time when it became ours, and when last read
}

// NewLoad starts measuring, with pids as ours.
func NewLoad(pids ...int) (*Load, error) {
	m, err := ReadMachineCPU()
	if err != nil {
		return nil, err
	}
	l := &Load{start: m, spent: map[int][2]time.Duration{}}
	for _, pid := range pids {
		l.Add(pid)
	}
	return l, nil
}

// Add makes pid ours from now on: its CPU time from now counts as ours.
func (l *Load) Add(pid int) {
	var cpu time.Duration
	if u, err := ReadUsage(pid); err == nil {
		cpu = u.CPU
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.spent[pid]; !ok {
		l.spent[pid] = [2]time.Duration{cpu, cpu}
	}
}

// Share is the share of the machine others had since the start, or 0 if
// /proc/stat cannot be read.
func (l *Load) Share() float64 {
	m, err := ReadMachineCPU()
	if err != nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var ours time.Duration
	for pid, s := range l.spent {
		if u, err := ReadUsage(pid); err == nil {
			s[1] = u.CPU
			l.spent[pid] = s
		}
		ours += s[1] - s[0]
	}
	return OthersShare(l.start, m, ours)
}
