package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"switchyard/bench/harness"
	"switchyard/bench/load"
	"switchyard/bench/record"
)

// The cluster scenarios: three switchyard nodes on this machine (every
// one with its Raft log on disk, a job acknowledged once two of three
// have it), against one switchyard's durable queue (bg-durable) and
// against NATS JetStream with three replicas, the peer users pick.

var clusterBg = &Scenario{
	Name: "cluster-bg",
	About: "bg-durable against a cluster of three switchyard nodes on this machine, clients on the leader: a submit is acknowledged once two nodes have it on disk; " +
		"and against NATS JetStream (three nats-server processes, a stream of replicas 3 and file storage), clients on the stream leader's server publishing asynchronously with as many in flight",
	Uses:    bgUses,
	Cluster: true,
	Peer:    true,
	Via:     ViaLeader,
	Single:  "bg-durable",
	Full:    bgDurable.Full,
	Quick:   bgDurable.Quick,
	run:     clusterBackground(ViaLeader),
}

var clusterBgTLS = &Scenario{
	Name:       "cluster-bg-tls",
	About:      "cluster-bg with mutual TLS 1.3 between the nodes (--cluster-tls-*): every Raft RPC encrypted and both ends verified; its tls_cost_pct is its jobs/s below cluster-bg's of the same round",
	Uses:       bgUses,
	Cluster:    true,
	ClusterTLS: true,
	Via:        ViaLeader,
	Single:     "bg-durable",
	Plain:      "cluster-bg",
	Full:       bgDurable.Full,
	Quick:      bgDurable.Quick,
	run:        clusterBackground(ViaLeader),
}

var clusterBgFollower = &Scenario{
	Name:    "cluster-bg-follower",
	About:   "cluster-bg with the clients (and the drain's workers) on a follower, which relays their connections to the leader; JetStream's on a server that does not lead the stream",
	Uses:    bgUses,
	Cluster: true,
	Peer:    true,
	Via:     ViaFollower,
	Single:  "bg-durable",
	Full:    bgDurable.Full,
	Quick:   bgDurable.Quick,
	run:     clusterBackground(ViaFollower),
}

var clusterFailover = &Scenario{
	Name: "cluster-failover",
	About: "kill -9 of a three-node cluster's leader while background submits flow through every node (`clients` connections on each, `inflight` submits in flight on each), round after round: " +
		"its latency is the time from the kill to the first acknowledgement of a submit written after it through a surviving node (p99 of 20 rounds is their max); " +
		"the killed node is restarted and added back (its new Raft address given through the operator API), and the round's jobs checked (acknowledged <= queued) and drained, before the next round",
	Uses:     []string{"kills", "clients", "inflight", "payload", "warmup", "workers", "grab", "timeout", "duration"},
	Cluster:  true,
	Restarts: true,
	Via:      ViaLeader,
	Full:     Params{Kills: 20, Clients: 1, InFlight: 8, Payload: 64, Warmup: time.Second, Workers: 2, Grab: 1, Timeout: 30 * time.Second, Duration: 10 * time.Minute},
	Quick:    Params{Kills: 5, Clients: 1, InFlight: 8, Payload: 64, Warmup: 500 * time.Millisecond, Workers: 2, Grab: 1, Timeout: 30 * time.Second, Duration: 3 * time.Minute},
	run:      runFailover,
}

// clusterBackground runs bg (a fill, then a drain) through the node via
// names, or the JetStream peer's publishers.
func clusterBackground(via string) func(ctx context.Context, t Target, p Params, out *record.Run) error {
	return func(ctx context.Context, t Target, p Params, out *record.Run) error {
		switch {
		case t.NATS != nil:
			return jetstreamBackground(ctx, t, p, via, out)
		case t.Cluster != nil:
			n, err := pickNode(ctx, t.Cluster, via)
			if err != nil {
				return err
			}
			t.Addr = n.Addr("gearman")
			return runBackground(ctx, t, p, out)
		}
		return errors.New("a cluster scenario runs against a cluster")
	}
}

// pickNode returns the cluster's leader, or one of its followers.
func pickNode(ctx context.Context, c *harness.Cluster, via string) (*harness.ClusterNode, error) {
	l, err := c.Leader(ctx)
	if err != nil || via == ViaLeader {
		return l, err
	}
	fs := c.Followers(l)
	if len(fs) == 0 {
		return nil, errors.New("the cluster has no follower")
	}
	return fs[0], nil
}

// The JetStream peer's stream and subject.
const (
	jsStream  = "BENCH"
	jsSubject = "bench.bg"
)

// jetstreamBackground creates a stream of replicas 3 and file storage,
// then publishes to it as bg's fill submits: as many publishers, as many
// messages in flight each, the same payload, for the duration or the job
// count. There is no drain. Its CPU and memory are the three servers'.
func jetstreamBackground(ctx context.Context, t Target, p Params, via string, out *record.Run) error {
	leader, err := load.CreateStream(ctx, t.NATS.Servers[0].ClientURL, jsStream, []string{"bench.>"}, len(t.NATS.Servers), p.Timeout)
	if err != nil {
		return err
	}
	var at *harness.NATSServer
	for _, s := range t.NATS.Servers {
		if (s.Name == leader) == (via == ViaLeader) {
			at = s
			break
		}
	}
	if at == nil {
		return fmt.Errorf("jetstream: no server for the clients (%s; the stream's leader is %q)", via, leader)
	}
	begin := time.Now()
	ph := &load.Phase{Start: begin, End: begin.Add(p.Duration), Budget: load.NewBudget(int64(p.Jobs)), Grace: grace}
	cpu := startCPU(t)
	pub := load.JetStreamPublisher{URL: at.ClientURL, Subject: jsSubject, Payload: payloadOf(p.Payload), InFlight: p.InFlight}
	res := clientsResult{latency: load.NewLatencyHistogram()}
	res.err = runAll(p.Clients, "publisher", func(int) (load.ClientResult, error) { return pub.Run(ctx, ph) }, res.add)
	took := time.Since(begin)
	cpu.perJob(out, res.finished)
	recordJobs(out, res.finished, took, res.latency)
	if u, err := t.Usage(); err == nil {
		out.RSSMB = megabytes(u.RSS)
	}
	if res.err != nil {
		return res.err
	}
	// Every message acknowledged is in the stream.
	stored, err := load.StreamMessages(ctx, at.ClientURL, jsStream)
	if err != nil {
		return err
	}
	if int64(stored) < res.finished {
		return fmt.Errorf("jetstream: the stream holds %d messages, %d were acknowledged", stored, res.finished)
	}
	return nil
}

// failoverRound is what one kill of the leader measured.
type failoverRound struct {
	killed   string
	killedAt time.Time
	// first is the time from the kill to the first acknowledgement of a
	// submit written after it, through any surviving node; every to the
	// moment each surviving node had acknowledged one.
	first, every time.Duration
	// back is how long the killed node took to serve again once
	// restarted, and to catch up.
	back   time.Duration
	counts load.StreamCounts // every stream's, summed
	queued int64             // the round's jobs the cluster held after it
	flow   time.Duration     // how long the submits flowed
}

// runFailover kills the leader p.Kills times, or until p.Duration has
// passed, and records the failover times as its latency (µs): the
// percentiles of first, and in its notes the lowest, and the median and
// highest of every.
func runFailover(ctx context.Context, t Target, p Params, out *record.Run) error {
	c := t.Cluster
	if c == nil {
		return errors.New("cluster-failover runs against a switchyard cluster")
	}
	deadline := time.Now().Add(p.Duration)
	first := load.NewLatencyHistogram()
	var everys, backs []time.Duration
	var minFirst time.Duration
	var sum load.StreamCounts
	var queued int64
	var flow time.Duration
	var errs []error
	for k := 1; k <= p.Kills && time.Now().Before(deadline) && ctx.Err() == nil; k++ {
		r, err := killLeader(ctx, c, p, fmt.Sprintf("bench-failover-%d", k))
		sum.Acked += r.counts.Acked
		sum.Errors += r.counts.Errors
		sum.Conns += r.counts.Conns
		queued += r.queued
		flow += r.flow
		if r.first > 0 {
			_ = first.RecordValue(r.first.Microseconds())
			if minFirst == 0 || r.first < minFirst {
				minFirst = r.first
			}
			everys = append(everys, r.every)
		}
		if r.back > 0 {
			backs = append(backs, r.back)
		}
		if t.Note != nil {
			t.Note("cluster-failover round %d: %s killed at %s; a submit acknowledged again after %v, through every other node after %v; %d acknowledged, %d queued; %s back in %v",
				k, r.killed, r.killedAt.UTC().Format("15:04:05.000"), r.first.Round(time.Millisecond), r.every.Round(time.Millisecond),
				r.counts.Acked, r.queued, r.killed, r.back.Round(time.Millisecond))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("round %d: %w", k, err))
			break // the cluster is in no known state
		}
	}
	out.Latency = record.Summarize(first)
	out.Jobs = sum.Acked
	out.Seconds = flow.Seconds()
	if flow > 0 {
		out.JobsPerSec = float64(sum.Acked) / flow.Seconds()
	}
	setExtra(out, "kills", float64(first.TotalCount()))
	if minFirst > 0 {
		setExtra(out, "failover_min_s", minFirst.Seconds())
		setExtra(out, "failover_every_node_p50_s", median(everys).Seconds())
		setExtra(out, "failover_every_node_max_s", slices.Max(everys).Seconds())
	}
	if len(backs) > 0 {
		setExtra(out, "restart_p50_s", median(backs).Seconds())
	}
	if sum.Errors > 0 {
		setExtra(out, "submit_errors", float64(sum.Errors))
	}
	if int64(first.TotalCount()) < int64(p.Kills) && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%d of %d kills in %v", first.TotalCount(), p.Kills, p.Duration))
	}
	return errors.Join(errs...)
}

// killLeader runs one round: submits flowing through every node, the
// leader killed, the time until submits are acknowledged again; then the
// round's jobs checked and drained, and the killed node restarted.
func killLeader(ctx context.Context, c *harness.Cluster, p Params, function string) (failoverRound, error) {
	var r failoverRound
	leader, err := c.Leader(ctx)
	if err != nil {
		return r, err
	}
	r.killed = leader.ID

	// The flow: p.Clients streams through each node.
	flowCtx, stopFlow := context.WithCancel(ctx)
	var wg sync.WaitGroup
	type nodeStream struct {
		node   *harness.ClusterNode
		stream *load.Stream
	}
	var streams []nodeStream
	for _, n := range c.Nodes {
		if n.Alive() != nil {
			continue
		}
		for range p.Clients {
			s := &load.Stream{Addr: func() string { return n.Addr("gearman") }, Function: function,
				Payload: payloadOf(p.Payload), InFlight: p.InFlight}
			streams = append(streams, nodeStream{n, s})
			wg.Go(func() { s.Run(flowCtx) })
		}
	}
	flowStart := time.Now()
	stop := func() {
		stopFlow()
		wg.Wait()
		r.flow = time.Since(flowStart)
		for _, ns := range streams {
			cs := ns.stream.Counts()
			r.counts.Acked += cs.Acked
			r.counts.Errors += cs.Errors
			r.counts.Conns += cs.Conns
		}
	}
	if err := waitUntil(ctx, p.Timeout, func() bool {
		for _, ns := range streams {
			if ns.stream.Counts().Acked == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		stop()
		return r, fmt.Errorf("submits through every node: %w", err)
	}
	select { // the flow before the kill, not a synchronisation
	case <-time.After(p.Warmup):
	case <-ctx.Done():
	}

	killedAt := time.Now()
	r.killedAt = killedAt
	if err := c.Kill(leader); err != nil {
		stop()
		return r, err
	}
	dead := time.Now() // only submits written from here on count
	var survivors []*load.Stream
	for _, ns := range streams {
		if ns.node != leader {
			ns.stream.Mark(dead)
			survivors = append(survivors, ns.stream)
		}
	}
	err = waitUntil(ctx, p.Timeout, func() bool {
		for _, s := range survivors {
			if _, ok := s.AckedSince(); !ok {
				return false
			}
		}
		return true
	})
	for _, s := range survivors {
		if at, ok := s.AckedSince(); ok {
			d := at.Sub(killedAt)
			if r.first == 0 || d < r.first {
				r.first = d
			}
			r.every = max(r.every, d)
		}
	}
	stop()
	if err != nil {
		return r, fmt.Errorf("%s killed: no submit acknowledged through every other node: %w", leader.ID, err)
	}

	// Every job acknowledged is held (more may be: a submit whose answer
	// was lost with its connection can still have been committed).
	l, err := c.Leader(ctx)
	if err != nil {
		return r, err
	}
	if r.queued, err = load.QueuedJobs(ctx, l.Addr("gearman"), function); err != nil {
		return r, err
	}
	if r.queued < r.counts.Acked {
		return r, fmt.Errorf("%d jobs acknowledged, %d queued after %s was killed", r.counts.Acked, r.queued, leader.ID)
	}

	back := time.Now()
	if err := c.Restart(ctx, leader); err != nil {
		return r, err
	}
	if err := c.WaitCaughtUp(ctx, leader); err != nil {
		return r, err
	}
	r.back = time.Since(back)
	if l, err = c.Leader(ctx); err != nil {
		return r, err
	}
	return r, drainJobs(ctx, l.Addr("gearman"), function, r.queued, p)
}

// drainJobs runs workers of function until want jobs are done.
func drainJobs(ctx context.Context, addr, function string, want int64, p Params) error {
	if want == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	countdown := load.NewCountdown(want, cancel)
	workers := startWorkers(ctx, addr, function, p, load.Worker{Jobs: countdown})
	select {
	case <-ctx.Done():
	case <-workers.exited(): // all failed
	}
	done, err := workers.stop()
	if done < want {
		err = errors.Join(err, fmt.Errorf("drain: %d of %d jobs done in %v", done, want, p.Timeout))
	}
	return err
}

// waitUntil polls cond until it holds, for at most timeout.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond) // polling; the streams time the acks themselves
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("not after %v: %w", timeout, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
