package scenario

import (
	"bufio"
	"context"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/load"
	"switchyard/bench/record"
)

func TestScenarioNamesAreTheIssues(t *testing.T) {
	want := []string{"fg", "fg-sync", "fg-many", "bg", "queue-1m", "payload-1m", "conns-10k", "fg-rate", "fg-curve", "bg-durable", "queue-1m-durable"}
	var gearman, echo, periodic, controller, dworks, memodb, https, mixes, clusters, fleets []string
	for _, s := range All {
		switch {
		case s.StartsOwn():
			fleets = append(fleets, s.Name)
		case s.Cluster:
			clusters = append(clusters, s.Name)
		case s.Mixed:
			mixes = append(mixes, s.Name)
		case s.Echo:
			echo = append(echo, s.Name)
		case s.Periodic:
			periodic = append(periodic, s.Name)
		case s.Controller:
			controller = append(controller, s.Name)
		case s.Dwork:
			dworks = append(dworks, s.Name)
		case s.Memodb:
			memodb = append(memodb, s.Name)
		case s.HTTP:
			https = append(https, s.Name)
		default:
			gearman = append(gearman, s.Name)
		}
	}
	if !reflect.DeepEqual(gearman, want) {
		t.Errorf("Gearman scenarios %q, want %q", gearman, want)
	}
	if want := []string{"ceiling", "ceiling-sync"}; !reflect.DeepEqual(echo, want) {
		t.Errorf("echo scenarios %q, want %q", echo, want)
	}
	if want := []string{"periodic-submit", "periodic-run", "periodic-due", "periodic-delayed-1m", "periodic-rate"}; !reflect.DeepEqual(periodic, want) {
		t.Errorf("Periodic scenarios %q, want %q", periodic, want)
	}
	if want := []string{"controller", "controller-pulses"}; !reflect.DeepEqual(controller, want) {
		t.Errorf("controller scenarios %q, want %q", controller, want)
	}
	if want := []string{"dwork-wide", "dwork-chain"}; !reflect.DeepEqual(dworks, want) {
		t.Errorf("dwork scenarios %q, want %q", dworks, want)
	}
	if want := []string{"memodb", "memodb-rate"}; !reflect.DeepEqual(memodb, want) {
		t.Errorf("MemoDB scenarios %q, want %q", memodb, want)
	}
	if want := []string{"http", "http-bg", "http-rate"}; !reflect.DeepEqual(https, want) {
		t.Errorf("HTTP scenarios %q, want %q", https, want)
	}
	if want := []string{"mixed"}; !reflect.DeepEqual(mixes, want) {
		t.Errorf("mixed scenarios %q, want %q", mixes, want)
	}
	if want := []string{"cluster-bg", "cluster-bg-tls", "cluster-bg-follower", "cluster-failover", "cluster-failover-cut"}; !reflect.DeepEqual(clusters, want) {
		t.Errorf("cluster scenarios %q, want %q", clusters, want)
	}
	if want := []string{"cluster-scale"}; !reflect.DeepEqual(fleets, want) {
		t.Errorf("scenarios that start their own servers %q, want %q", fleets, want)
	}
	// Only the cut needs network namespaces (and root).
	for _, s := range All {
		if s.Netns != (s.Name == "cluster-failover-cut") {
			t.Errorf("%s: netns %v", s.Name, s.Netns)
		}
	}
	// The cluster scenarios: the bg ones are set against bg-durable with
	// its very parameters, and have the JetStream peer, but for the TLS
	// one, which is set against its plain twin, cluster-bg, instead; each
	// names the node its clients use.
	for _, name := range clusters {
		s := All[slices.IndexFunc(All, func(s *Scenario) bool { return s.Name == name })]
		if s.Via != ViaLeader && s.Via != ViaFollower {
			t.Errorf("%s: via %q", s.Name, s.Via)
		}
		if s.Single == "" {
			continue
		}
		single, err := Lookup([]string{s.Single})
		if err != nil || single[0].Cluster || s.Peer == (s.Plain != "") {
			t.Errorf("%s: set against %q (%v), peer %v", s.Name, s.Single, err, s.Peer)
			continue
		}
		if s.Full != single[0].Full || s.Quick != single[0].Quick || !reflect.DeepEqual(s.Uses, single[0].Uses) {
			t.Errorf("%s: parameters %+v, %s's %+v", s.Name, s.Full, s.Single, single[0].Full)
		}
		if s.Plain == "" {
			continue
		}
		plain, err := Lookup([]string{s.Plain})
		if err != nil || !s.ClusterTLS || plain[0].ClusterTLS || plain[0].Full != s.Full || plain[0].Via != s.Via {
			t.Errorf("%s: TLS %v, set against %q (%v) with other parameters or TLS too", s.Name, s.ClusterTLS, s.Plain, err)
		}
	}
	// Each scenario with a ceiling names an echo scenario; only the
	// switchyard-only ones run on switchyard alone (the Gearman and HTTP
	// ones run on gearmand too).
	for _, s := range All {
		if s.Ceiling != "" {
			c, err := Lookup([]string{s.Ceiling})
			if err != nil || !c[0].Echo {
				t.Errorf("%s: ceiling %q is no echo scenario", s.Name, s.Ceiling)
			}
		}
		if want := !s.Echo && !s.HTTP && !s.Cluster && !s.StartsOwn() && !slices.Contains(gearman, s.Name); s.SwitchyardOnly() != want {
			t.Errorf("%s: SwitchyardOnly %v, want %v", s.Name, s.SwitchyardOnly(), want)
		}
	}
	if _, err := Lookup([]string{"fg", "nope"}); err == nil {
		t.Error("Lookup accepted an unknown scenario")
	}
}

func TestScenarioParams(t *testing.T) {
	for _, s := range All {
		t.Run(s.Name, func(t *testing.T) {
			for _, name := range s.Uses {
				if _, ok := LookupParam(name); !ok {
					t.Errorf("uses unknown param %q", name)
				}
			}
			// Quick is never heavier than full.
			if s.Quick.Duration > s.Full.Duration || s.Quick.Jobs > s.Full.Jobs || s.Quick.Timeout > s.Full.Timeout {
				t.Errorf("quick %+v is heavier than full %+v", s.Quick, s.Full)
			}
			kinds := 0
			for _, k := range []bool{s.Echo, s.Periodic, s.Controller, s.Dwork, s.Memodb, s.HTTP, s.Mixed, s.Cluster, s.StartsOwn()} {
				if k {
					kinds++
				}
			}
			if kinds > 1 {
				t.Error("of more than one kind: echo, Periodic, controller, dwork, MemoDB, HTTP, mixed, cluster, its own servers")
			}
		})
	}
}

func TestCopyParamAndStrings(t *testing.T) {
	dst := Params{Clients: 1, Duration: time.Second}
	src := Params{Clients: 64, Duration: 3 * time.Second, Jobs: 7}
	CopyParam("clients", &dst, &src)
	CopyParam("duration", &dst, &src)
	want := Params{Clients: 64, Duration: 3 * time.Second}
	if dst != want {
		t.Errorf("got %+v, want %+v", dst, want)
	}
	got := dst.Strings([]string{"clients", "duration", "jobs"})
	if want := map[string]string{"clients": "64", "duration": "3s", "jobs": "0"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Strings = %v, want %v", got, want)
	}
}

func TestTenthRates(t *testing.T) {
	tests := []struct {
		name        string
		total, done int64
		ok          bool
	}{
		{"complete", 1000, 1000, true},
		{"stopped at 55%", 1000, 550, true},
		{"too little to compare", 1000, 150, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := load.NewProgress(tt.total)
			for range tt.done {
				p.Add(1)
			}
			first, last, ok := tenthRates(p)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if ok && (first <= 0 || last <= 0) {
				t.Errorf("rates %v, %v", first, last)
			}
		})
	}
}

func TestStepRates(t *testing.T) {
	p := load.NewProgress(1000)
	for range 550 {
		p.Add(1)
	}
	if got := stepRates(p); len(got) != 5 || got[0] <= 0 || got[4] <= 0 {
		t.Errorf("stepRates after 55%% = %v, want 5 positive rates", got)
	}
}

func TestNextPulse(t *testing.T) {
	for pulse, want := range map[time.Duration]uint64{time.Second: 2, 200 * time.Millisecond: 1, 1500 * time.Millisecond: 3, time.Nanosecond: 1} {
		if got := nextPulse(pulse); got != want {
			t.Errorf("nextPulse(%v) = %d, want %d", pulse, got, want)
		}
	}
}

func TestWholeSeconds(t *testing.T) {
	if n, err := wholeSeconds(time.Hour); n != 3600 || err != nil {
		t.Errorf("an hour: %d, %v", n, err)
	}
	for _, bad := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond} {
		if _, err := wholeSeconds(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// buildSwitchyard builds the server into a temporary directory.
func buildSwitchyard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchyard")
	build := exec.Command("go", "build", "-o", bin, "switchyard/cmd/switchyard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startSwitchyard starts bin as the bench does, with the Periodic listener
// off or on a loopback port.
func startSwitchyard(ctx context.Context, t *testing.T, bin string, periodic bool) *harness.Server {
	t.Helper()
	cfg := harness.Config{
		Name: "switchyard",
		Path: bin,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-t", "0", "-l", "stderr", "-q", "builtin", "--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off", "--periodic-listen", "off"},
	}
	if periodic {
		cfg.Args[slices.Index(cfg.Args, "--periodic-listen")+1] = "tcp://127.0.0.1:0"
		cfg.Listeners = 2
	}
	srv, err := harness.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	return srv
}

// TestForegroundAgainstSwitchyard builds switchyard and runs the fg and bg
// scenarios against it for a moment with tiny counts. It checks that the
// harness and the load generators work end to end, not how fast.
func TestForegroundAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startSwitchyard(ctx, t, bin, false)
	target := Target{Addr: srv.Addr, Usage: srv.Usage}

	tests := []struct {
		scenario  *Scenario
		params    Params
		serverCPU bool // long and busy enough for the server to use a tick of /proc's (10 ms)
	}{
		{fg, Params{Clients: 2, Workers: 2, InFlight: 4, Grab: 1, Payload: 64, Duration: time.Second, Warmup: 100 * time.Millisecond}, true},
		{fg, Params{Clients: 1, Workers: 1, InFlight: 4, Grab: 4, Payload: 64, Duration: 500 * time.Millisecond}, false}, // pipelined worker
		// The count ends bg's fill; the duration only bounds it (500 in a
		// second would be a speed, which a busy machine can miss).
		{bg, Params{Clients: 2, InFlight: 8, Payload: 64, Duration: time.Minute, Jobs: 500, Workers: 2, Grab: 1, Timeout: time.Minute}, false},
		{conns10K, Params{Conns: 50, Clients: 1, Workers: 1, InFlight: 2, Grab: 1, Payload: 64, Duration: 300 * time.Millisecond}, false},
		{queue1M, Params{Clients: 2, InFlight: 8, Payload: 64, Unique: load.UUIDLen, Jobs: 3000, Workers: 2, Grab: 1, Timeout: time.Minute, Settle: 10 * time.Millisecond}, false},
	}
	for _, tt := range tests {
		t.Run(tt.scenario.Name, func(t *testing.T) {
			run := tt.scenario.Run(ctx, target, tt.params)
			if run.Error != "" {
				t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
			}
			if run.Jobs <= 0 || run.JobsPerSec <= 0 || run.Latency.Count != run.Jobs || run.Latency.P50 <= 0 ||
				run.Latency.Max < run.Latency.P99 || run.RSSMB <= 0 {
				t.Errorf("implausible run: %+v", run)
			}
			if run.LoadCPUPerJob <= 0 || (tt.serverCPU && run.ServerCPUPerJob <= 0) {
				t.Errorf("CPU per job: server %v µs, load generator %v µs", run.ServerCPUPerJob, run.LoadCPUPerJob)
			}
			if tt.scenario == bg && (run.Jobs != 500 || run.Extra["drain_jobs_per_s"] <= 0 || run.Extra["drain_load_cpu_us_per_job"] <= 0) {
				t.Errorf("bg queued %d of 500 jobs, extras %v", run.Jobs, run.Extra)
			}
			if tt.scenario == conns10K && run.Extra["idle_conns"] != 50 {
				t.Errorf("idle connections: %v", run.Extra)
			}
			// A queue's growth: its last tenth against its first, and what
			// a job added to the RSS (a few thousand jobs may add a page
			// or none, so only its presence is checked).
			if tt.scenario == queue1M {
				idle, full := run.Extra["rss_idle_mb"], run.Extra["rss_full_mb"]
				perJob := (full - idle) * (1 << 20) / float64(run.Jobs)
				if run.Jobs != 3000 || run.LastVsFirst10 <= 0 || idle <= 0 || full != run.RSSMB ||
					math.Abs(run.RSSBytesPerJob-perJob) > 0.01 || run.Extra["drain_jobs_per_s"] <= 0 {
					t.Errorf("queue-1m: %d jobs, last tenth against the first %v, RSS %v MB (%v B/job, want %v), extras %v",
						run.Jobs, run.LastVsFirst10, run.RSSMB, run.RSSBytesPerJob, perJob, run.Extra)
				}
			}
		})
	}
	if err := srv.Alive(); err != nil {
		t.Error(err)
	}
}

// TestPeriodicAgainstSwitchyard runs the Periodic scenarios against a
// switchyard with a Periodic listener for a moment with tiny counts: the
// harness finds both ports, and the load generators and checks work end
// to end.
func TestPeriodicAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := startSwitchyard(ctx, t, bin, true)
	if len(srv.Others) != 1 || srv.Others[0] == srv.Addr {
		t.Fatalf("Gearman at %s, others %v", srv.Addr, srv.Others)
	}
	target := Target{Addr: srv.Addr, PeriodicAddr: srv.Others[0], Usage: srv.Usage}

	tests := []struct {
		scenario *Scenario
		params   Params
		jobs     int64 // want exactly, when not 0
	}{
		{periodicSubmit, Params{Clients: 2, InFlight: 8, Payload: 64, Duration: time.Minute, Jobs: 500}, 500}, // the count ends it, as bg's
		{periodicRun, Params{Clients: 2, Workers: 2, InFlight: 4, Grab: 4, Payload: 64, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond}, 0},
		{periodicDue, Params{Clients: 1, Workers: 1, InFlight: 4, Grab: 8, Payload: 64, Duration: 500 * time.Millisecond, Jobs: 20, Delay: time.Second}, 20},
		{periodicDelayed1M, Params{Clients: 2, InFlight: 8, Payload: 64, Jobs: 2000, Delay: time.Hour, Timeout: time.Minute}, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.scenario.Name, func(t *testing.T) {
			run := tt.scenario.Run(ctx, target, tt.params)
			if run.Error != "" {
				t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
			}
			if run.Jobs <= 0 || run.JobsPerSec <= 0 || run.Latency.Count != run.Jobs || run.Latency.P50 <= 0 ||
				run.Latency.Max < run.Latency.P99 || run.RSSMB <= 0 {
				t.Errorf("implausible run: %+v", run)
			}
			// /proc counts the server's CPU in 10 ms ticks: a tiny run
			// may read 0. getrusage, this process's, is finer.
			if run.LoadCPUPerJob <= 0 {
				t.Errorf("no load generator CPU per job: %+v", run)
			}
			if tt.jobs != 0 && run.Jobs != tt.jobs {
				t.Errorf("%d jobs, want %d", run.Jobs, tt.jobs)
			}
			// RSS per job may be 0: 2,000 small jobs can fit in pages the
			// server's heap already held from the runs before. That both
			// ends were read is what is checked.
			if tt.scenario == periodicDelayed1M && (run.Extra["status_jobs"] != 2000 || run.Extra["submit_slowest_step_jobs_per_s"] <= 0 ||
				run.Extra["rss_idle_mb"] <= 0 || run.Extra["rss_full_mb"] <= 0 || run.LastVsFirst10 <= 0) {
				t.Errorf("RSS per job %v, last tenth against the first %v, extras %v", run.RSSBytesPerJob, run.LastVsFirst10, run.Extra)
			}
		})
	}
	if err := srv.Alive(); err != nil {
		t.Error(err)
	}
}

// TestControllerAgainstSwitchyard runs the Worker–Controller scenarios
// against a switchyard with a main socket for a moment with small counts:
// the workers register, run jobs and pulse against the real controller.
func TestControllerAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "syb-ctl-") // unix socket paths are short: not t.TempDir
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "main.sock")
	srv, err := harness.Start(ctx, harness.Config{
		Name: "switchyard",
		Path: bin,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-t", "0", "-l", "stderr", "-q", "builtin", "--periodic-listen", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off", "--controller-socket", sock},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	target := Target{Addr: srv.Addr, ControllerSocket: sock, Usage: srv.Usage}

	tests := []struct {
		scenario *Scenario
		params   Params
	}{
		{controllerRun, Params{Clients: 2, Workers: 8, InFlight: 4, Payload: 64, Duration: time.Second, Warmup: 100 * time.Millisecond, Pulse: 200 * time.Millisecond}},
		{controllerPulses, Params{Workers: 100, Duration: time.Second, Warmup: 200 * time.Millisecond, Pulse: 200 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario.Name, func(t *testing.T) {
			load, lerr := harness.NewLoad(os.Getpid(), srv.PID())
			run := tt.scenario.Run(ctx, target, tt.params)
			if run.Error != "" {
				t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
			}
			if run.Jobs <= 0 || run.JobsPerSec <= 0 || run.Latency.Count != run.Jobs || run.Latency.P50 <= 0 ||
				run.Latency.Max < run.Latency.P99 || run.RSSMB <= 0 || run.Extra["workers"] != float64(tt.params.Workers) {
				t.Errorf("implausible run: %+v", run)
			}
			if tt.scenario == controllerPulses {
				// 100 workers, 5 pulses a second each, for a second: at
				// least 450 on a machine that runs nothing else; a worker
				// that others keep from the CPU past its next pulse sends
				// one, not two, so on a busy machine the least is cut by
				// what others had of it (harness.Stretch).
				least, share := int64(450), 0.0
				if lerr == nil {
					share = load.Share()
					least = int64(450 * float64(time.Second) / float64(harness.Stretch(time.Second, share)))
				}
				if run.Jobs < least || run.Jobs > 550 {
					t.Errorf("%d pulses, want about 500 (at least %d: others had %.0f%% of the machine)", run.Jobs, least, 100*share)
				}
				if run.LoadCPUPerJob <= 0 {
					t.Errorf("no load generator CPU per pulse: %+v", run)
				}
			}
		})
	}
	// Every worker said SHUTDOWN: the server holds none.
	if out := adminWorkers(t, srv.Addr); strings.Contains(out, "unix:") {
		t.Errorf("controller workers left registered:\n%s", out)
	}
	if err := srv.Alive(); err != nil {
		t.Error(err)
	}
}

// TestDworkAgainstSwitchyard runs the dwork scenarios against a
// switchyard with a dwork listener, with small DAGs: the harness finds the
// dwork port beside Gearman's, and the DAGs run whole and in order.
func TestDworkAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := harness.Start(ctx, harness.Config{
		Name: "switchyard",
		Path: bin,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-t", "0", "-l", "stderr", "-q", "builtin",
			"--periodic-listen", "off", "--controller-socket", "off", "--memodb-listen", "off", "--metrics-listen", "off", "--dwork-listen", "tcp://127.0.0.1:0"},
		Listeners: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if len(srv.Others) != 1 || srv.Others[0] == srv.Addr {
		t.Fatalf("Gearman at %s, others %v", srv.Addr, srv.Others)
	}
	target := Target{Addr: srv.Addr, DworkAddr: srv.Others[0], Usage: srv.Usage}

	tests := []struct {
		scenario *Scenario
		params   Params
		tasks    int64
	}{
		{dworkWide, Params{Jobs: 5000, Workers: 3, Grab: 16, Timeout: time.Minute}, 5002},
		{dworkChain, Params{Jobs: 300, Timeout: time.Minute}, 300},
	}
	for _, tt := range tests {
		t.Run(tt.scenario.Name, func(t *testing.T) {
			run := tt.scenario.Run(ctx, target, tt.params)
			if run.Error != "" {
				t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
			}
			if run.Jobs != tt.tasks || run.JobsPerSec <= 0 || run.Latency.Count != int64(run.Extra["steals"]) ||
				run.Latency.P50 <= 0 || run.Latency.Max < run.Latency.P99 || run.RSSMB <= 0 || run.Extra["create_jobs_per_s"] <= 0 {
				t.Errorf("implausible run: %+v", run)
			}
			if tt.scenario == dworkWide && run.Extra["rss_bytes_per_task"] == 0 {
				t.Errorf("no RSS per task: %v", run.Extra)
			}
		})
	}
	if err := srv.Alive(); err != nil {
		t.Error(err)
	}
}

// adminWorkers returns the server's answer to the admin command "workers".
func adminWorkers(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("workers\n")); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("workers: %v after %q", err, out.String())
		}
		if line == ".\n" {
			return out.String()
		}
		out.WriteString(line)
	}
}

// TestMemodbAgainstSwitchyard runs the MemoDB scenario against a
// switchyard with a MemoDB listener for a moment with small counts.
func TestMemodbAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := harness.Start(ctx, harness.Config{
		Name:      "switchyard",
		Path:      bin,
		Listeners: 2,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-l", "stderr", "-q", "builtin", "--periodic-listen", "off",
			"--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "tcp://127.0.0.1:0", "--metrics-listen", "off"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	target := Target{Addr: srv.Addr, MemodbURL: "tcp://" + srv.Others[0], Usage: srv.Usage}
	p := Params{Clients: 2, Workers: 8, InFlight: 4, Payload: 64, Duration: time.Second, Warmup: 100 * time.Millisecond}
	run := memodbRun.Run(ctx, target, p)
	if run.Error != "" {
		t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
	}
	if run.Jobs <= 0 || run.JobsPerSec <= 0 || run.Latency.Count != run.Jobs || run.Latency.P50 <= 0 ||
		run.Latency.Max < run.Latency.P99 || run.Extra["contexts"] != 16 || run.ServerCPUPerJob <= 0 || run.LoadCPUPerJob <= 0 {
		t.Errorf("implausible run: %+v", run)
	}
	// Without a listener the scenario says so.
	if run := memodbRun.Run(ctx, Target{Addr: srv.Addr, Usage: srv.Usage}, p); run.Error == "" {
		t.Error("ran without a MemoDB listener")
	}
}

// TestHTTPAgainstServers runs the HTTP scenarios for a moment against
// switchyard and, when it is installed, gearmand, each started as the
// bench starts them (-r http --http-port 0): the harness finds both
// ports, and the client reuses switchyard's connections and reconnects
// to gearmand, which closes each.
func TestHTTPAgainstServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the servers; skipped with -short")
	}
	servers := []harness.Config{{
		Name: "switchyard", Path: buildSwitchyard(t), Listeners: 2,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-l", "stderr", "-q", "builtin", "--periodic-listen", "off",
			"--controller-socket", "off", "--dwork-listen", "off", "--memodb-listen", "off", "--metrics-listen", "off", "-r", "http", "--http-port", "0"},
	}}
	if _, err := os.Stat("/usr/sbin/gearmand"); err == nil {
		servers = append(servers, harness.Config{Name: "gearmand", Path: "/usr/sbin/gearmand", Listeners: 2,
			Args: []string{"-L", "127.0.0.1", "-p", "0", "-l", "none", "--pid-file", filepath.Join(t.TempDir(), "pid"), "-r", "http", "--http-port", "0"}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, cfg := range servers {
		t.Run(cfg.Name, func(t *testing.T) {
			srv, err := harness.Start(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := srv.Stop(); err != nil {
					t.Error(err)
				}
			}()
			target := Target{Addr: srv.Addr, HTTPAddr: srv.Others[0], Usage: srv.Usage}
			p := Params{Clients: 2, Workers: 2, Grab: 1, Payload: 64, Duration: time.Second, Warmup: 100 * time.Millisecond}
			for _, sc := range []*Scenario{httpFg, httpBg} {
				run := sc.Run(ctx, target, p)
				if run.Error != "" {
					t.Fatalf("%s: %s\nserver output:\n%s", sc.Name, run.Error, srv.Output())
				}
				if run.Jobs <= 0 || run.Latency.Count != run.Jobs || run.Extra["failed"] != 0 {
					t.Errorf("%s: implausible run: %+v", sc.Name, run)
				}
				// gearmand closes after each answer; switchyard keeps the
				// two clients' connections for hundreds of requests.
				if c := run.Extra["connects_per_job"]; (cfg.Name == "gearmand" && c != 1) || (cfg.Name == "switchyard" && (c <= 0 || c > 0.1)) {
					t.Errorf("%s: %v connections per request", sc.Name, c)
				}
			}
			// Without a listener the scenario says so.
			if run := httpFg.Run(ctx, Target{Addr: srv.Addr, Usage: srv.Usage}, p); run.Error == "" {
				t.Error("ran without an HTTP listener")
			}
		})
	}
}

// TestMixedAgainstSwitchyard runs the mixed scenario against a switchyard
// with every listener on, each TCP one on a loopback address of its own
// as the bench gives them, with tiny counts: every load runs alone and
// then with the others, and each shows in both.
func TestMixedAgainstSwitchyard(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server; skipped with -short")
	}
	bin := buildSwitchyard(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "syb-ctl-") // unix socket paths are short: not t.TempDir
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "main.sock")
	srv, err := harness.Start(ctx, harness.Config{
		Name:      "switchyard",
		Path:      bin,
		Listeners: 4,
		Args: []string{"-L", "127.0.0.1", "-p", "0", "-l", "stderr", "-q", "builtin", "--controller-socket", sock,
			"--periodic-listen", "tcp://127.0.0.2:0", "--dwork-listen", "tcp://127.0.0.3:0", "--memodb-listen", "tcp://127.0.0.4:0", "--metrics-listen", "off"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	target := Target{Addr: srv.Addr, ControllerSocket: sock, Usage: srv.Usage}
	for _, addr := range srv.Others {
		switch host, _, _ := net.SplitHostPort(addr); host {
		case "127.0.0.2":
			target.PeriodicAddr = addr
		case "127.0.0.3":
			target.DworkAddr = addr
		case "127.0.0.4":
			target.MemodbURL = "tcp://" + addr
		}
	}
	// Small DAGs, one after the other, grow and shrink a function's
	// (function, name) index again and again, as they did when an index
	// resize could fill its table and hang the server (sched's
	// TestKeyIndexChurn is that bug's test).
	p := Params{Clients: 1, Workers: 1, InFlight: 2, Grab: 16, Payload: 64, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond,
		Jobs: 50, Pulse: 200 * time.Millisecond, Timeout: time.Minute}
	run := mixed.Run(ctx, target, p)
	if run.Error != "" {
		t.Fatalf("run failed: %s\nserver output:\n%s", run.Error, srv.Output())
	}
	var names []string
	var jobs int64
	for _, part := range run.Parts {
		names = append(names, part.Name)
		jobs += part.Mixed.Jobs
		for phase, sh := range map[string]record.Share{"alone": part.Alone, "mixed": part.Mixed} {
			// dwork times its Steals, the others their jobs.
			if sh.Jobs <= 0 || sh.JobsPerSec <= 0 || sh.Latency.Count <= 0 || (part.Name != "dwork" && sh.Latency.Count != sh.Jobs) {
				t.Errorf("%s %s: %+v", part.Name, phase, sh)
			}
		}
		if part.Alone.LoadCPUPerJob <= 0 || part.Mixed.LoadCPUPerJob != 0 {
			t.Errorf("%s: load generator CPU per job %v alone, %v mixed; want it alone only", part.Name, part.Alone.LoadCPUPerJob, part.Mixed.LoadCPUPerJob)
		}
	}
	if want := []string{"gearman-fg", "gearman-bg", "periodic", "controller", "dwork", "memodb"}; !slices.Equal(names, want) {
		t.Errorf("parts %q, want %q", names, want)
	}
	if run.Jobs != jobs || run.JobsPerSec <= 0 || run.LoadCPUPerJob <= 0 || run.RSSMB <= 0 ||
		run.Extra["mixed_vs_alone_min_pct"] <= 0 || run.Extra["mixed_vs_alone_max_pct"] < run.Extra["mixed_vs_alone_min_pct"] {
		t.Errorf("implausible run: %+v", run)
	}
	// Without every listener the scenario says so.
	if run := mixed.Run(ctx, Target{Addr: srv.Addr, PeriodicAddr: target.PeriodicAddr, Usage: srv.Usage}, p); run.Error == "" {
		t.Error("ran without the dwork, MemoDB and controller listeners")
	}
	if err := srv.Alive(); err != nil {
		t.Error(err)
	}
}

func TestRSSPerJob(t *testing.T) {
	for _, tc := range []struct {
		idle, full, jobs int64
		want             float64
	}{
		{20 << 20, 20<<20 + 200_000_000, 1_000_000, 200},
		{0, 200 << 20, 1000, 0},    // no idle RSS read
		{20 << 20, 0, 1000, 0},     // no full RSS read
		{20 << 20, 30 << 20, 0, 0}, // nothing queued
	} {
		if got := rssPerJob(tc.idle, tc.full, tc.jobs); got != tc.want {
			t.Errorf("rssPerJob(%d, %d, %d) = %v, want %v", tc.idle, tc.full, tc.jobs, got, tc.want)
		}
	}
}
