package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The dwork scenarios speak dwork's hub protocol (frobnitzem/dwork: ZeroMQ
// REQ sockets, one protobuf QueryMsg a message) to switchyard's dwork
// listener: switchyard alone, as gearmand has no such protocol. Each
// creates a whole DAG with one client and then runs it with hosts that
// steal tasks and report them done, and checks that every task was handed
// out once and never before its ancestors were reported done.

var dworkWide = &Scenario{
	Name: "dwork-wide",
	About: "dwork: one client creates a wide DAG (a root, the job count of tasks after it, a sink after them all), then workers hosts " +
		"steal up to grab tasks at a time and report each batch done in one Transfer until the sink is done: jobs/s is tasks run per second " +
		"(first Steal to last completion), latency a Steal's round trip; rss bytes per task is the server's RSS with the DAG created " +
		"and not yet run, less its idle RSS, over the tasks",
	Uses:  []string{"jobs", "workers", "grab", "timeout"},
	Dwork: true,
	Full:  Params{Jobs: 100_000, Workers: 4, Grab: 64, Timeout: 120 * time.Second},
	Quick: Params{Jobs: 10_000, Workers: 4, Grab: 64, Timeout: 30 * time.Second},
	run:   runDworkWide,
}

var dworkChain = &Scenario{
	Name: "dwork-chain",
	About: "dwork: one client creates a chain of the job count of tasks, each after the one before, then one host steals " +
		"and completes them one by one (two round trips a task, nothing to batch): jobs/s is tasks run per second, latency a Steal's round trip",
	Uses:  []string{"jobs", "timeout"},
	Dwork: true,
	Full:  Params{Jobs: 20_000, Timeout: 120 * time.Second},
	Quick: Params{Jobs: 2_000, Timeout: 30 * time.Second},
	run:   runDworkChain,
}

// dworkFunction is what dwork tasks are jobs of: switchyard's default
// --dwork-func.
const dworkFunction = "dwork"

// runDworkWide: a root, a wide middle and a sink, with several hosts.
func runDworkWide(ctx context.Context, t Target, p Params, out *record.Run) error {
	if p.Jobs < 1 {
		return fmt.Errorf("jobs %d: want at least one task between the root and the sink", p.Jobs)
	}
	if p.Grab < 1 {
		return fmt.Errorf("grab %d: want at least one task a Steal", p.Grab)
	}
	return runDwork(ctx, t, p, out, load.WideDAG("w-", p.Jobs), p.Workers, int32(p.Grab), true)
}

// runDworkChain: a chain, one host.
func runDworkChain(ctx context.Context, t Target, p Params, out *record.Run) error {
	if p.Jobs < 1 {
		return fmt.Errorf("jobs %d: want at least one task", p.Jobs)
	}
	return runDwork(ctx, t, p, out, load.ChainDAG("c-", p.Jobs), 1, 1, false)
}

// runDwork creates dag with one client, then runs it with hosts stealing
// up to steal at a time; memory says whether to record RSS per task.
func runDwork(ctx context.Context, t Target, p Params, out *record.Run, dag *load.DworkDAG, hosts int, steal int32, memory bool) error {
	if t.DworkAddr == "" {
		return errors.New("the server has no dwork listener")
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	idle, idleErr := t.Usage()

	creator, err := load.DialDwork(ctx, t.DworkAddr)
	if err != nil {
		return err
	}
	begin := time.Now()
	creates, err := dag.Create(creator)
	createTook := time.Since(begin)
	creator.Close()
	if err != nil {
		return fmt.Errorf("%w (after %v)", err, createTook.Round(time.Millisecond))
	}
	setExtra(out, "create_jobs_per_s", float64(dag.Total)/createTook.Seconds())
	setExtra(out, "creates", float64(creates))
	if created, err := t.Usage(); err == nil && memory {
		setExtra(out, "rss_created_mb", megabytes(created.RSS))
		if idleErr == nil {
			setExtra(out, "rss_idle_mb", megabytes(idle.RSS))
			setExtra(out, "rss_bytes_per_task", float64(created.RSS-idle.RSS)/float64(dag.Total))
		}
	}

	cpu := startCPU(t)
	res, runErr := load.DworkHosts{Addr: t.DworkAddr, Hosts: hosts, Steal: steal, Name: "host"}.Run(ctx, dag)
	cpu.perJob(out, res.Done)
	out.Jobs = res.Done
	out.Latency = record.Summarize(res.StealLatency)
	if !res.End.IsZero() {
		took := res.End.Sub(res.Start)
		out.Seconds = took.Seconds()
		out.JobsPerSec = float64(res.Done) / took.Seconds()
	}
	setExtra(out, "steals", float64(res.Steals))
	if res.Empty > 0 {
		setExtra(out, "empty_steals", float64(res.Empty))
	}
	if res.Steals > 0 {
		setExtra(out, "tasks_per_steal", float64(res.Done)/float64(res.Steals))
	}
	if res.DoneLatency.TotalCount() > 0 {
		setExtra(out, "done_p99_ms", float64(res.DoneLatency.ValueAtQuantile(99))/1e3)
	}
	if runErr != nil {
		return runErr
	}
	// Every task ran: the server holds none of the function.
	left, err := load.QueuedJobs(ctx, t.Addr, dworkFunction)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if left != 0 {
		return fmt.Errorf("every task done, and status counts %d jobs of %s", left, dworkFunction)
	}
	return nil
}
