// Command cnprofile measures where a switchyard cluster's CPU goes per
// acknowledged background submit, node by node, against one durable
// server's: every server process in a CPU cgroup of its own (the same
// quota each), the load generator (this process) outside them, unique
// background submits to 12 functions. While the load runs it takes a CPU
// profile of every process from its /debug/pprof/profile.
//
//	go run . -switchyard /path/to/switchyard -quota 0.3 -out /tmp/prof
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/load"
)

type options struct {
	bin      string
	quota    float64
	funcs    int
	inflight int
	warmup   time.Duration
	measure  time.Duration
	out      string
	modes    string
	payload  int
}

func main() {
	var o options
	flag.StringVar(&o.bin, "switchyard", "bin/switchyard", "switchyard binary")
	flag.Float64Var(&o.quota, "quota", 0.3, "CPUs each server process may use (cgroup quota); 0 for none")
	flag.IntVar(&o.funcs, "funcs", 12, "functions, one client connection each")
	flag.IntVar(&o.inflight, "inflight", 64, "submits each client keeps outstanding")
	flag.IntVar(&o.payload, "payload", 64, "payload bytes")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "load before the measured time")
	flag.DurationVar(&o.measure, "measure", 10*time.Second, "measured (and profiled) time")
	flag.StringVar(&o.out, "out", "", "directory for the profiles (none if empty)")
	flag.StringVar(&o.modes, "modes", "durable,cluster-leader,cluster-all", "what to run, in order")
	flag.Parse()
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			fatal(err)
		}
	}
	fmt.Printf("%-16s %9s %9s  %s\n", "mode", "jobs/s", "cpu µs/job", "per process: µs/job (throttled share of the time)")
	for _, m := range splitComma(o.modes) {
		r, err := run(o, m)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", m, err))
		}
		fmt.Println(r)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "cnprofile:", err)
	os.Exit(1)
}

func splitComma(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != ',' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

// proc is one server process under measure.
type proc struct {
	name    string
	pid     int
	metrics string // host:port of /debug/pprof
	gearman string
	cg      *cgroup
}

var offListeners = []string{"--periodic-listen", "off", "--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off"}

func run(o options, mode string) (string, error) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "symr-cn-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	// The metrics listener (and with it the scheduler's latency
	// histograms) only when profiling: it costs CPU of its own.
	metrics, listeners := "off", 1
	if o.out != "" {
		metrics, listeners = "127.0.0.1:0", 2
	}
	args := append([]string{"-L", "127.0.0.1", "-p", "0", "--metrics-listen", metrics}, offListeners...)
	var procs []*proc
	// The processes stop before their cgroups go, which cannot while
	// they hold a process.
	stop := func() {}
	defer func() {
		stop()
		for _, p := range procs {
			if p.cg != nil {
				if err := p.cg.remove(); err != nil {
					fmt.Fprintln(os.Stderr, "cnprofile:", err)
				}
			}
		}
	}()
	var targets []string // where the clients go
	switch mode {
	case "durable":
		s, err := harness.Start(ctx, harness.Config{Name: "durable", Path: o.bin, Listeners: listeners,
			Args: append(args, "-l", "stderr", "-q", "durable", "--data-dir", dir)})
		if err != nil {
			return "", err
		}
		stop = func() { s.Stop() }
		p := &proc{name: "single", pid: s.PID(), gearman: s.Addr}
		if len(s.Others) > 0 {
			p.metrics = s.Others[0]
		}
		procs = append(procs, p)
		targets = []string{s.Addr}
	case "cluster-leader", "cluster-all":
		c, err := harness.StartCluster(ctx, harness.ClusterConfig{Path: o.bin, Nodes: 3, Args: args, Dir: dir})
		if err != nil {
			return "", err
		}
		stop = func() { c.Stop() }
		l, err := c.Leader(ctx)
		if err != nil {
			return "", err
		}
		procs = append(procs, &proc{name: "leader " + l.ID, pid: l.PID(), metrics: l.Addr("metrics"), gearman: l.Addr("gearman")})
		for _, f := range c.Followers(l) {
			procs = append(procs, &proc{name: "follower " + f.ID, pid: f.PID(), metrics: f.Addr("metrics"), gearman: f.Addr("gearman")})
		}
		for _, p := range procs {
			if mode == "cluster-all" || p.pid == l.PID() {
				targets = append(targets, p.gearman)
			}
		}
	default:
		return "", fmt.Errorf("no mode %q", mode)
	}
	if o.quota > 0 {
		for i, p := range procs {
			if p.cg, err = newCgroup(fmt.Sprintf("symr-%d-%s-%d", os.Getpid(), mode, i), o.quota); err != nil {
				return "", err
			}
			if err := p.cg.add(p.pid); err != nil {
				return "", err
			}
		}
	}
	begin := time.Now()
	start := begin.Add(o.warmup)
	end := start.Add(o.measure)
	ph := &load.Phase{Start: start, End: end, Grace: 5 * time.Second}
	payload := make([]byte, o.payload)
	for i := range payload {
		payload[i] = 'x'
	}
	var mu sync.Mutex
	var measured int64
	var wg sync.WaitGroup
	var runErr error
	for i := range o.funcs {
		cl := load.Client{Addr: targets[i%len(targets)], Function: fmt.Sprintf("f%02d", i), Payload: payload, InFlight: o.inflight, Background: true}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := cl.Run(ctx, ph)
			mu.Lock()
			measured += r.Measured
			if err != nil && runErr == nil {
				runErr = err
			}
			mu.Unlock()
		}()
	}
	time.Sleep(time.Until(start)) // the warm-up: the load runs by itself
	cpu0 := make([]time.Duration, len(procs))
	thr0 := make([]time.Duration, len(procs))
	for i, p := range procs {
		u, err := harness.ReadUsage(p.pid)
		if err != nil {
			return "", err
		}
		cpu0[i] = u.CPU
		if p.cg != nil {
			thr0[i] = p.cg.throttled()
		}
	}
	var pw sync.WaitGroup
	if o.out != "" {
		for _, p := range procs {
			pw.Add(1)
			go func() {
				defer pw.Done()
				if err := profile(p, o.measure, filepath.Join(o.out, fmt.Sprintf("%s-%s.pprof", mode, p.name[:1]+p.name[len(p.name)-1:]))); err != nil {
					fmt.Fprintln(os.Stderr, "profile", p.name, err)
				}
			}()
		}
	}
	time.Sleep(time.Until(end))
	took := time.Since(start)
	cpu := make([]time.Duration, len(procs))
	thr := make([]time.Duration, len(procs))
	for i, p := range procs {
		u, err := harness.ReadUsage(p.pid)
		if err != nil {
			return "", err
		}
		cpu[i] = u.CPU - cpu0[i]
		if p.cg != nil {
			thr[i] = p.cg.throttled() - thr0[i]
		}
	}
	wg.Wait()
	pw.Wait()
	if runErr != nil {
		return "", runErr
	}
	if measured == 0 {
		return "", fmt.Errorf("no job acknowledged")
	}
	var total time.Duration
	line := ""
	for i, p := range procs {
		total += cpu[i]
		line += fmt.Sprintf("  %s %.1f (%.0f%%)", p.name, us(cpu[i])/float64(measured), 100*thr[i].Seconds()/took.Seconds())
	}
	return fmt.Sprintf("%-16s %9.0f %9.1f %s", mode, float64(measured)/took.Seconds(), us(total)/float64(measured), line), nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// profile takes a CPU profile of p for d.
func profile(p *proc, d time.Duration, file string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.metrics, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}
