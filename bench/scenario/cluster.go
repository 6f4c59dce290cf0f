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
	About: "kill -9 of a three-node cluster's leader while background submits of unique jobs flow through every node (`clients` connections on each, `inflight` submits in flight on each, and on each a client that opens a connection a submit and gives up on an answer after 250 ms), round after round: " +
		"its latency is the time from the kill to the first acknowledgement of a submit written after it through a surviving node (p99 of 20 rounds is their max), and its notes the longest time without any acknowledgement; " +
		"the killed node is restarted and added back (its new Raft address given through the operator API), and the round's jobs drained, every one acknowledged among them, before the next round",
	Uses:     []string{"kills", "clients", "inflight", "payload", "warmup", "workers", "grab", "timeout", "duration"},
	Cluster:  true,
	Restarts: true,
	Via:      ViaLeader,
	Full:     Params{Kills: 20, Clients: 1, InFlight: 8, Payload: 64, Warmup: time.Second, Workers: 2, Grab: 1, Timeout: 30 * time.Second, Duration: 10 * time.Minute},
	Quick:    Params{Kills: 5, Clients: 1, InFlight: 8, Payload: 64, Warmup: 500 * time.Millisecond, Workers: 2, Grab: 1, Timeout: 30 * time.Second, Duration: 3 * time.Minute},
	run:      runFailover(faultKill),
}

var clusterFailoverCut = &Scenario{
	Name: "cluster-failover-cut",
	About: "cluster-failover with the leader cut off from the other two nodes (iptables, each node in a network namespace of its own, the clients in a fourth, which still reach the leader) instead of killed, for `hold`, then healed: " +
		"its latency is the longest time without any acknowledged submit through any node (p99 of 20 rounds is their max), and its notes the time from the cut to the first acknowledgement through a surviving node and to the new leader's election; " +
		"the round's jobs are drained, every one acknowledged among them, before the next round. Needs root",
	Uses:    []string{"cuts", "hold", "clients", "inflight", "payload", "warmup", "workers", "grab", "timeout", "duration"},
	Cluster: true,
	Netns:   true,
	Via:     ViaLeader,
	Full:    Params{Cuts: 20, Hold: 8 * time.Second, Clients: 2, InFlight: 8, Payload: 64, Warmup: time.Second, Workers: 2, Grab: 1, Timeout: 30 * time.Second, Duration: 15 * time.Minute},
	Quick:   Params{Cuts: 5, Hold: 3 * time.Second, Clients: 2, InFlight: 8, Payload: 64, Warmup: 500 * time.Millisecond, Workers: 2, Grab: 1, Timeout: 30 * time.Second, Duration: 5 * time.Minute},
	run:     runFailover(faultCut),
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

// How a failover round takes the leader away.
type fault int

const (
	faultKill fault = iota // SIGKILL, then a restart
	faultCut               // cut off from the other nodes, then healed
)

func (f fault) String() string { return [...]string{"killed", "cut off"}[f] }

// failoverRound is what one round measured.
type failoverRound struct {
	leader string
	at     time.Time // of the kill or the cut
	// first is the time from the fault to the first acknowledgement of a
	// submit written after it, through any surviving node; every to the
	// moment each surviving node had acknowledged one.
	first, every time.Duration
	// gap is the longest time without any acknowledgement, through any
	// node, while the round's submits flowed.
	gap time.Duration
	// elected is the time from the fault to the new leader's "elected"
	// line (0 if not known).
	elected time.Duration
	// back is how long the killed node took to serve again once
	// restarted and to catch up, or the node cut off once healed.
	back   time.Duration
	counts load.StreamCounts // every stream's, summed
	queued int64             // the round's jobs the cluster held after it
	flow   time.Duration     // how long the submits flowed
}

// runFailover takes the leader away p.Kills (p.Cuts) times, or until
// p.Duration has passed. A kill round's latency is its first (µs); a
// cut's, its gap. The notes have the others.
func runFailover(how fault) func(ctx context.Context, t Target, p Params, out *record.Run) error {
	return func(ctx context.Context, t Target, p Params, out *record.Run) error {
		c := t.Cluster
		if c == nil {
			return errors.New("cluster-failover runs against a switchyard cluster")
		}
		rounds := p.Kills
		if how == faultCut {
			rounds = p.Cuts
		}
		deadline := time.Now().Add(p.Duration)
		lat := load.NewLatencyHistogram()
		var firsts, everys, gaps, electeds, backs []time.Duration
		var sum load.StreamCounts
		var queued int64
		var flow time.Duration
		var errs []error
		for k := 1; k <= rounds && time.Now().Before(deadline) && ctx.Err() == nil; k++ {
			r, err := failover(ctx, c, p, how, fmt.Sprintf("bench-failover-%d", k))
			sum.Acked += r.counts.Acked
			sum.Errors += r.counts.Errors
			sum.Conns += r.counts.Conns
			queued += r.queued
			flow += r.flow
			if r.first > 0 {
				firsts = append(firsts, r.first)
				everys = append(everys, r.every)
				gaps = append(gaps, r.gap)
				if how == faultKill {
					_ = lat.RecordValue(r.first.Microseconds())
				} else {
					_ = lat.RecordValue(r.gap.Microseconds())
				}
			}
			if r.elected > 0 {
				electeds = append(electeds, r.elected)
			}
			if r.back > 0 {
				backs = append(backs, r.back)
			}
			if t.Note != nil {
				t.Note("%s round %d: %s %s at %s; elected after %v; a submit acknowledged again after %v, through every other node after %v; "+
					"longest without one %v; %d acknowledged, %d queued; %s back in %v",
					map[fault]string{faultKill: "cluster-failover", faultCut: "cluster-failover-cut"}[how], k, r.leader, how,
					r.at.UTC().Format("15:04:05.000"), r.elected.Round(time.Millisecond), r.first.Round(time.Millisecond),
					r.every.Round(time.Millisecond), r.gap.Round(time.Millisecond), r.counts.Acked, r.queued, r.leader,
					r.back.Round(time.Millisecond))
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("round %d: %w", k, err))
				break // the cluster is in no known state
			}
		}
		out.Latency = record.Summarize(lat)
		out.Jobs = sum.Acked
		out.Seconds = flow.Seconds()
		if flow > 0 {
			out.JobsPerSec = float64(sum.Acked) / flow.Seconds()
		}
		setExtra(out, map[fault]string{faultKill: "kills", faultCut: "cuts"}[how], float64(lat.TotalCount()))
		if len(firsts) > 0 {
			setExtra(out, "failover_min_s", slices.Min(firsts).Seconds())
			setExtra(out, "failover_p50_s", median(firsts).Seconds())
			setExtra(out, "failover_every_node_p50_s", median(everys).Seconds())
			setExtra(out, "failover_every_node_max_s", slices.Max(everys).Seconds())
			setExtra(out, "gap_p50_s", median(gaps).Seconds())
			setExtra(out, "gap_max_s", slices.Max(gaps).Seconds())
		}
		if len(electeds) > 0 {
			setExtra(out, "elected_p50_s", median(electeds).Seconds())
			setExtra(out, "elected_max_s", slices.Max(electeds).Seconds())
		}
		if len(backs) > 0 {
			// A killed node's restart and catch-up; a cut one's return
			// to serving once healed.
			setExtra(out, map[fault]string{faultKill: "restart_p50_s", faultCut: "healed_p50_s"}[how], median(backs).Seconds())
		}
		if sum.Errors > 0 {
			setExtra(out, "submit_errors", float64(sum.Errors))
		}
		if int64(lat.TotalCount()) < int64(rounds) && len(errs) == 0 {
			errs = append(errs, fmt.Errorf("%d of %d rounds in %v", lat.TotalCount(), rounds, p.Duration))
		}
		return errors.Join(errs...)
	}
}

// shortIdle is how long a failover round's short-lived clients wait for
// an answer before they try again on a new connection.
const shortIdle = 250 * time.Millisecond

// failover runs one round: unique submits flowing through every node,
// the leader killed or cut off, the time until submits are acknowledged
// again; then the cut healed (after p.Hold) or the killed node restarted,
// and the round's jobs drained, every one acknowledged among them.
func failover(ctx context.Context, c *harness.Cluster, p Params, how fault, function string) (failoverRound, error) {
	var r failoverRound
	leader, err := c.Leader(ctx)
	if err != nil {
		return r, err
	}
	r.leader = leader.ID

	// The flow: p.Clients streams through each node.
	flowCtx, stopFlow := context.WithCancel(ctx)
	var wg sync.WaitGroup
	type nodeStream struct {
		node   *harness.ClusterNode
		stream *load.Stream
	}
	gaps := &load.AckGaps{}
	var streams []nodeStream
	for _, n := range c.Nodes {
		if n.Alive() != nil {
			continue
		}
		// p.Clients connections that last, and a short-lived client
		// (a connection a submit, as a script that submits a job and
		// exits, which gives up on an answer after shortIdle and
		// tries again): the connections a relay opens to the leader
		// as it is lost.
		for i := range p.Clients + 1 {
			s := &load.Stream{Addr: func() string { return n.Addr("gearman") }, Function: function,
				Payload: payloadOf(p.Payload), InFlight: p.InFlight, Dial: c.Dial, Gaps: gaps,
				Unique: fmt.Sprintf("%s-%s-%d", function, n.ID, i)}
			if i == p.Clients {
				s.InFlight, s.PerConn, s.Idle = 1, 1, shortIdle
			}
			streams = append(streams, nodeStream{n, s})
			wg.Go(func() { s.Run(flowCtx) })
		}
	}
	flowStart := time.Now()
	gaps.Start(flowStart)
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stopFlow()
		wg.Wait()
		r.flow = time.Since(flowStart)
		r.gap, _, _ = gaps.Longest()
		for _, ns := range streams {
			cs := ns.stream.Counts()
			r.counts.Acked += cs.Acked
			r.counts.Errors += cs.Errors
			r.counts.Conns += cs.Conns
		}
	}
	defer stop()
	if err := waitUntil(ctx, p.Timeout, func() bool {
		for _, ns := range streams {
			if ns.stream.Counts().Acked == 0 {
				return false
			}
		}
		return true
	}); err != nil {
		return r, fmt.Errorf("submits through every node: %w", err)
	}
	select { // the flow before the fault, not a synchronisation
	case <-time.After(p.Warmup):
	case <-ctx.Done():
	}

	r.at = time.Now()
	switch how {
	case faultKill:
		err = c.Kill(leader)
	case faultCut:
		err = c.Cut(leader)
	}
	if err != nil {
		return r, err
	}
	after := time.Now() // only submits written from here on count
	var survivors []*load.Stream
	for _, ns := range streams {
		if ns.node != leader {
			ns.stream.Mark(after)
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
			d := at.Sub(r.at)
			if r.first == 0 || d < r.first {
				r.first = d
			}
			r.every = max(r.every, d)
		}
	}
	if err != nil {
		return r, fmt.Errorf("%s %s: no submit acknowledged through every other node: %w", leader.ID, how, err)
	}
	nl, err := c.Leader(ctx)
	if err != nil {
		return r, err
	}
	if at, ok := nl.NoticeTime("elected"); ok && at.After(r.at) {
		r.elected = at.Sub(r.at)
	}

	switch how {
	case faultKill:
		stop()
		back := time.Now()
		if err := c.Restart(ctx, leader); err != nil {
			return r, err
		}
		if err := c.WaitCaughtUp(ctx, leader); err != nil {
			return r, err
		}
		r.back = time.Since(back)
	case faultCut:
		select { // the cut lasts p.Hold, its clients still at it
		case <-time.After(time.Until(r.at.Add(p.Hold))):
		case <-ctx.Done():
			return r, ctx.Err()
		}
		if err := c.Heal(); err != nil {
			return r, err
		}
		back := time.Now()
		if err := c.WaitServing(ctx, leader); err != nil {
			return r, err
		}
		r.back = time.Since(back)
		stop()
	}

	// Every job acknowledged is held (more may be: a submit whose answer
	// was lost with its connection can still have been committed), and
	// runs.
	l, err := c.Leader(ctx)
	if err != nil {
		return r, err
	}
	if r.queued, err = load.QueuedJobsVia(ctx, c.Dial, l.Addr("gearman"), function); err != nil {
		return r, err
	}
	if r.queued < r.counts.Acked {
		return r, fmt.Errorf("%d jobs acknowledged, %d queued after %s was %s", r.counts.Acked, r.queued, leader.ID, how)
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	if err := drainJobs(ctx, c.Dial, l.Addr("gearman"), function, r.queued, p, func(payload []byte) {
		mu.Lock()
		seen[load.UniqueOf(payload)] = true
		mu.Unlock()
	}); err != nil {
		return r, err
	}
	lost := 0
	for _, ns := range streams {
		for _, u := range ns.stream.Acked() {
			if !seen[u] {
				lost++
			}
		}
	}
	if lost > 0 {
		return r, fmt.Errorf("%d of %d acknowledged jobs lost after %s was %s", lost, r.counts.Acked, leader.ID, how)
	}
	return r, nil
}

// drainJobs runs workers of function until want jobs are done, each
// job's payload handed to seen.
func drainJobs(ctx context.Context, dial harness.Dialer, addr, function string, want int64, p Params, seen func([]byte)) error {
	if want == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	countdown := load.NewCountdown(want, cancel)
	workers := startWorkers(ctx, addr, function, p, load.Worker{Jobs: countdown, Dial: dial, Seen: seen})
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
