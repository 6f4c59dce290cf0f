package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type benchOptions struct {
	engines  []string
	nodes    []int
	groups   int
	quota    float64
	warmup   time.Duration
	measure  time.Duration
	clients  int
	inflight int
	entries  int // entries in flight per group
	replicas int
	payload  int
	rounds   int
	keep     bool
	profiles string
}

func runBench(args []string) error {
	var o benchOptions
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	engs := fs.String("engines", strings.Join(engines, ","), "engines to run ("+engSingle+" once a round, the others at each node count)")
	nodes := fs.String("nodes", "3,5", "cluster sizes")
	fs.IntVar(&o.groups, "groups", 12, "Raft groups (functions hash to one each)")
	fs.Float64Var(&o.quota, "quota", 0.3, "CPUs each node process may use (cgroup quota); 0 for none")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "load before the measured time")
	fs.DurationVar(&o.measure, "measure", 10*time.Second, "measured time")
	fs.IntVar(&o.clients, "clients", 2, "client connections to each node")
	fs.IntVar(&o.inflight, "inflight", 128, "submits each connection keeps outstanding")
	fs.IntVar(&o.entries, "entry-inflight", 1, "entries in flight per group (sched/replicated: 1)")
	fs.IntVar(&o.payload, "payload", 64, "payload bytes")
	fs.IntVar(&o.replicas, "replicas", 3, "nodes holding each group, its leader among them (0: all)")
	fs.IntVar(&o.rounds, "rounds", 1, "rounds, each running every configuration once")
	fs.BoolVar(&o.keep, "keep", false, "keep going after a configuration fails")
	fs.StringVar(&o.profiles, "profiles", "", "directory for each node's CPU profile of the measured time (ENGINE-NODES-ID.pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.engines = strings.Split(*engs, ",")
	for _, s := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("-nodes %q", *nodes)
		}
		o.nodes = append(o.nodes, n)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("# %d groups of %d replicas, quota %.2f CPU a node, %d clients x %d in flight a node, %d-byte payloads, %v measured after %v\n",
		o.groups, o.replicas, o.quota, o.clients, o.inflight, o.payload, o.measure, o.warmup)
	fmt.Printf("%-5s %-12s %5s %8s %6s %7s %7s %7s %6s  %s\n", "round", "engine", "nodes", "jobs/s", "xsingle", "µs/job", "jobs/e", "syncs/s", "idle", "per node: µs/job, CPU used, throttled")
	for round := 1; round <= o.rounds; round++ {
		var base float64
		for _, eng := range o.engines {
			sizes := o.nodes
			if eng == engSingle {
				sizes = []int{1}
			}
			for _, n := range sizes {
				r, err := benchOne(self, o, eng, n)
				if err != nil {
					err = fmt.Errorf("%s on %d nodes: %w", eng, n, err)
					if !o.keep {
						return err
					}
					fmt.Println("#", err)
					continue
				}
				if eng == engSingle {
					base = r.rate
				}
				x := "-"
				if base > 0 {
					x = fmt.Sprintf("%.2f", r.rate/base)
				}
				fmt.Printf("%-5d %-12s %5d %8.0f %6s %7.1f %7.1f %7.0f %6.3f  %s\n", round, eng, n, r.rate, x, r.cpuPerJob, r.jobsPerEntry, r.syncsPerSec, r.idle, r.perNode)
			}
		}
	}
	return nil
}

type benchResult struct {
	rate         float64 // acknowledged jobs a second
	cpuPerJob    float64 // µs, all nodes
	jobsPerEntry float64
	syncsPerSec  float64 // a node's, averaged
	perNode      string
	idle         float64 // CPUs a node uses with no load, averaged
}

// idleTime is how long the idle CPU is measured for.
const idleTime = 3 * time.Second

type benchNode struct {
	id     int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	client string
	peer   string
	cg     *cgroup
	led    []int
}

func benchOne(self string, o benchOptions, eng string, n int) (res benchResult, err error) {
	dir, err := os.MkdirTemp("", "symr-mraft-")
	if err != nil {
		return res, err
	}
	var nodes []*benchNode
	defer func() {
		for _, bn := range nodes {
			bn.stop()
		}
		for _, bn := range nodes {
			if bn.cg != nil {
				if cerr := bn.cg.remove(); cerr != nil && err == nil {
					err = cerr
				}
			}
		}
		os.RemoveAll(dir)
	}()
	// dragonboat cannot listen on a port the kernel picks: its nodes get
	// an address of their own in 127/8, from this process's id.
	pid := os.Getpid()
	for i := 1; i <= n; i++ {
		args := []string{"node", "-engine", eng, "-id", strconv.Itoa(i), "-groups", strconv.Itoa(o.groups),
			"-inflight", strconv.Itoa(o.entries), "-replicas", strconv.Itoa(o.replicas), "-dir", filepath.Join(dir, strconv.Itoa(i))}
		if o.profiles != "" {
			args = append(args, "-cpuprofile", filepath.Join(o.profiles, fmt.Sprintf("%s-%d-%d.pprof", eng, n, i)))
		}
		if eng == engDragonboat {
			args = append(args, "-raft-addr", fmt.Sprintf("127.91.%d.%d:%d", pid%250, i, 20000+pid%20000))
		}
		bn, err := startNode(self, args)
		if err != nil {
			return res, err
		}
		bn.id = i
		nodes = append(nodes, bn)
		if o.quota > 0 {
			if bn.cg, err = newCgroup(fmt.Sprintf("symr-%d-%s-%d-%d", pid, eng, n, i), o.quota); err != nil {
				return res, err
			}
			if err := bn.cg.add(bn.cmd.Process.Pid); err != nil {
				return res, err
			}
		}
	}
	var peers []string
	for _, bn := range nodes {
		peers = append(peers, bn.peer)
	}
	for _, bn := range nodes {
		if _, err := fmt.Fprintf(bn.stdin, "peers %s\n", strings.Join(peers, ",")); err != nil {
			return res, err
		}
	}
	for _, bn := range nodes {
		if err := bn.expect("started", 60*time.Second); err != nil {
			return res, err
		}
	}
	if err := placed(nodes, o.groups, 60*time.Second); err != nil {
		return res, err
	}

	// What the groups cost with nothing to do: heartbeats, ticks.
	idle0, err := sample(nodes)
	if err != nil {
		return res, err
	}
	time.Sleep(idleTime)
	idle1, err := sample(nodes)
	if err != nil {
		return res, err
	}
	for i := range nodes {
		res.idle += (idle1[i].cpu - idle0[i].cpu).Seconds() / idleTime.Seconds() / float64(n)
	}

	var acked atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, n*o.clients)
	payload := []byte(strings.Repeat("x", o.payload))
	for _, bn := range nodes {
		for c := range o.clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := submit(bn.client, uint64(bn.id)<<48|uint64(c)<<40, bn.led, o.inflight, payload, &acked, stop); err != nil {
					errs <- err
				}
			}()
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	time.Sleep(o.warmup) // the load runs by itself meanwhile
	before, err := sample(nodes)
	if err != nil {
		return res, err
	}
	profiles := func(req byte) {
		if o.profiles != "" {
			for _, bn := range nodes {
				ask(bn.client, req, 1)
			}
		}
	}
	profiles(reqProfile)
	a0 := acked.Load()
	start := time.Now()
	time.Sleep(o.measure)
	a1 := acked.Load()
	took := time.Since(start)
	profiles(reqStopProf)
	after, err := sample(nodes)
	if err != nil {
		return res, err
	}
	select {
	case err := <-errs:
		return res, err
	default:
	}
	jobs := float64(a1 - a0)
	if jobs == 0 {
		return res, errors.New("no job acknowledged")
	}
	res.rate = jobs / took.Seconds()
	var cpu time.Duration
	var entries, applied, syncs float64
	var per []string
	for i := range nodes {
		d := after[i].cpu - before[i].cpu
		cpu += d
		entries += float64(after[i].entries - before[i].entries)
		applied += float64(after[i].jobs - before[i].jobs)
		syncs += float64(after[i].syncs - before[i].syncs)
		per = append(per, fmt.Sprintf("%.1f %.2f %.0f%%", us(d)/jobs, d.Seconds()/took.Seconds(),
			100*(after[i].throttled-before[i].throttled).Seconds()/took.Seconds()))
	}
	res.cpuPerJob = us(cpu) / jobs
	if entries > 0 {
		res.jobsPerEntry = applied / entries
	}
	res.syncsPerSec = syncs / float64(n) / took.Seconds()
	res.perNode = strings.Join(per, " | ")
	return res, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func startNode(self string, args []string) (*benchNode, error) {
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	bn := &benchNode{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	if !bn.lines.Scan() {
		bn.stop()
		return nil, fmt.Errorf("node %v: no ready line", args)
	}
	for _, f := range strings.Fields(bn.lines.Text())[1:] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "client":
			bn.client = v
		case "peer":
			bn.peer = v
		}
	}
	return bn, nil
}

// expect waits for a line from the node.
func (bn *benchNode) expect(line string, timeout time.Duration) error {
	got := make(chan bool, 1)
	go func() { got <- bn.lines.Scan() && bn.lines.Text() == line }()
	select {
	case ok := <-got:
		if !ok {
			return fmt.Errorf("node %d: did not say %q", bn.id, line)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("node %d: no %q in %v", bn.id, line, timeout)
	}
}

// stop ends the node's input, which stops it; killed if it takes long.
func (bn *benchNode) stop() {
	if bn.cmd.ProcessState != nil {
		return
	}
	bn.stdin.Close()
	done := make(chan struct{})
	go func() {
		bn.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		bn.cmd.Process.Kill()
		<-done
	}
}

// ask sends one request to a node's client port and reads n bytes back.
func ask(addr string, req byte, n int) ([]byte, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{req}); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	_, err = io.ReadFull(c, b)
	return b, err
}

// placed waits until every group has one leader, the node placement
// wants, and notes which groups each node leads.
func placed(nodes []*benchNode, groups int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ok := true
		var note []string
		for _, bn := range nodes {
			b, err := ask(bn.client, reqLeaders, 9)
			if err != nil {
				return err
			}
			bits := binary.BigEndian.Uint64(b[1:])
			bn.led = bn.led[:0]
			for g := range groups {
				if bits&(1<<g) != 0 {
					bn.led = append(bn.led, g)
				}
			}
			note = append(note, fmt.Sprintf("%d leads %v", bn.id, bn.led))
		}
		for g := range groups {
			want := int(preferred(g, len(nodes)))
			if len(nodes) == 1 {
				want = 1
			}
			for _, bn := range nodes {
				has := false
				for _, x := range bn.led {
					has = has || x == g
				}
				if has != (bn.id == want) {
					ok = false
				}
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leaders not placed in %v: %s", timeout, strings.Join(note, "; "))
		}
		time.Sleep(100 * time.Millisecond) // polling processes, not synchronising
	}
}

type nodeSample struct {
	cpu, throttled       time.Duration
	entries, jobs, syncs uint64
}

func sample(nodes []*benchNode) ([]nodeSample, error) {
	out := make([]nodeSample, len(nodes))
	for i, bn := range nodes {
		cpu, err := procCPU(bn.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		b, err := ask(bn.client, reqStats, 25)
		if err != nil {
			return nil, err
		}
		out[i] = nodeSample{cpu: cpu, entries: binary.BigEndian.Uint64(b[1:]), jobs: binary.BigEndian.Uint64(b[9:]), syncs: binary.BigEndian.Uint64(b[17:])}
		if bn.cg != nil {
			out[i].throttled = bn.cg.throttled()
		}
	}
	return out, nil
}

// procCPU is a process's user and system time so far (/proc/PID/stat).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100, nil // USER_HZ
}

// submit keeps inflight submits outstanding on one connection, to the
// groups given in turn, and counts each acknowledgement.
func submit(addr string, idBase uint64, groups []int, inflight int, payload []byte, acked *atomic.Int64, stop <-chan struct{}) error {
	if len(groups) == 0 {
		return nil
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	tokens := make(chan struct{}, inflight)
	for range inflight {
		tokens <- struct{}{}
	}
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(c, 64<<10)
		var a [9]byte
		for {
			if _, err := io.ReadFull(r, a[:]); err != nil {
				readErr <- err
				return
			}
			acked.Add(1)
			tokens <- struct{}{}
		}
	}()
	w := bufio.NewWriterSize(c, 64<<10)
	frame := make([]byte, submitHdr+len(payload))
	frame[0] = reqSubmit
	binary.BigEndian.PutUint16(frame[10:12], uint16(len(payload)))
	copy(frame[submitHdr:], payload)
	var seq uint64
	for {
		select {
		case <-tokens:
		default:
			if err := w.Flush(); err != nil {
				return err
			}
			select {
			case <-tokens:
			case <-stop:
				c.Close()
				return nil
			case err := <-readErr:
				return err
			}
		}
		seq++
		frame[1] = byte(groups[seq%uint64(len(groups))])
		binary.BigEndian.PutUint64(frame[2:10], idBase|seq)
		w.Write(frame)
	}
}
