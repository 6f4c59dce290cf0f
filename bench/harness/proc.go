// Package harness runs a job server under test: it starts the binary on a
// loopback port the kernel picks, finds that port in /proc and waits until
// it accepts, reads the process's memory and CPU use from /proc, and stops
// it. The end-to-end tests of cmd/switchyard use its Listening too, and
// every test that times something holds its bound with Within against
// what the machine's other processes take of it.
package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times. It is 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// Usage is a process's resource use at one moment.
type Usage struct {
	RSS     int64         // resident set size, bytes (VmRSS)
	PeakRSS int64         // high-water mark of RSS, bytes (VmHWM)
	Threads int           // number of threads
	CPU     time.Duration // user + system time of all threads so far
}

// ReadUsage reads /proc/PID/status and /proc/PID/stat.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer f.Close()
	if u, err = parseStatus(f); err != nil {
		return u, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	if u.CPU, err = parseStatCPU(string(stat)); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return u, nil
}

// parseStatus reads VmRSS, VmHWM and Threads from /proc/PID/status. A
// zombie has no Vm lines; its memory reads as 0.
func parseStatus(r io.Reader) (Usage, error) {
	var u Usage
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &u.RSS
		case "VmHWM":
			dst = &u.PeakRSS
		case "Threads":
			n, err := strconv.Atoi(fields[0])
			if err != nil {
				return u, fmt.Errorf("Threads: %w", err)
			}
			u.Threads = n
			continue
		default:
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return u, fmt.Errorf("%s: %w", key, err)
		}
		if len(fields) < 2 || fields[1] != "kB" {
			return u, fmt.Errorf("%s: unit is not kB: %q", key, value)
		}
		*dst = n << 10
	}
	return u, sc.Err()
}

// parseStatCPU returns utime+stime from the text of /proc/PID/stat. The
// command name (field 2) is in parentheses and may contain spaces and
// parentheses itself, so fields are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no ')' in %q", stat)
	}
	// After ") " come field 3 (state) onwards; utime and stime are fields
	// 14 and 15.
	fields := strings.Fields(stat[end+1:])
	const utime = 14 - 3
	if len(fields) <= utime+1 {
		return 0, fmt.Errorf("only %d fields after the command name", len(fields))
	}
	var ticks int64
	for _, f := range fields[utime : utime+2] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
