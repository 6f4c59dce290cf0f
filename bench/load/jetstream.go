package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamPublisher publishes to a JetStream stream on one connection of
// its own, keeping InFlight publishes waiting for their acks, with
// nats.go's asynchronous publish: the peer of a background Client. A
// message counts when the stream's ack arrives, which is when the
// stream's leader has it stored on a majority of its replicas, and its
// latency is publish to ack.
type JetStreamPublisher struct {
	URL      string
	Subject  string
	Payload  []byte
	InFlight int
}

// jsSlot is one of a publisher's InFlight messages: the message nats.go
// hands back with its ack, and when it was published.
type jsSlot struct {
	msg  *nats.Msg
	sent time.Time
}

// Run connects and publishes until the phase ends or its budget is spent,
// then waits for outstanding acks for up to the phase's grace period.
func (p *JetStreamPublisher) Run(ctx context.Context, ph *Phase) (ClientResult, error) {
	res := ClientResult{Latency: NewLatencyHistogram()}
	if p.InFlight < 1 {
		return res, fmt.Errorf("jetstream: InFlight %d < 1", p.InFlight)
	}
	nc, err := nats.Connect(p.URL, nats.NoReconnect(), nats.Name("switchyard-bench"))
	if err != nil {
		return res, err
	}
	defer nc.Close()

	// The ack and error handlers run on the connection's one delivery
	// goroutine, and give the slot back to the publishing loop below.
	slots := make([]jsSlot, p.InFlight)
	index := make(map[*nats.Msg]int, p.InFlight)
	free := make(chan int, p.InFlight)
	for i := range slots {
		slots[i].msg = &nats.Msg{Subject: p.Subject, Data: p.Payload}
		index[slots[i].msg] = i
		free <- i
	}
	var mu sync.Mutex // guards res and firstErr against the handlers
	var firstErr error
	done := func(m *nats.Msg, err error) {
		now := time.Now()
		i, ok := index[m]
		if !ok {
			return
		}
		mu.Lock()
		if err != nil {
			res.Failed++
			if firstErr == nil {
				firstErr = err
			}
		} else {
			res.Finished++
			ph.Progress.Add(1)
			if ph.measured(now) {
				res.Measured++
				recordLatency(res.Latency, now.Sub(slots[i].sent))
			}
		}
		mu.Unlock()
		free <- i
	}
	js, err := jetstream.New(nc,
		// Never stalled by nats.go: the slots bound what is in flight.
		jetstream.WithPublishAsyncMaxPending(p.InFlight+1),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) { done(m, nil) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { done(m, err) }))
	if err != nil {
		return res, err
	}

	var endC <-chan time.Time
	if !ph.End.IsZero() {
		t := time.NewTimer(time.Until(ph.End))
		defer t.Stop()
		endC = t.C
	}
	published := 0
publishing:
	for {
		var i int
		select {
		case i = <-free:
		case <-endC:
			break publishing
		case <-ctx.Done():
			break publishing
		}
		if (!ph.End.IsZero() && !time.Now().Before(ph.End)) || !ph.Budget.Take() {
			free <- i
			break
		}
		slots[i].sent = time.Now()
		if _, err := js.PublishMsgAsync(slots[i].msg); err != nil {
			return p.result(&res, &mu, published), fmt.Errorf("jetstream: publish: %w", err)
		}
		published++
	}

	// Wait for the outstanding acks: every slot back in free.
	grace := time.NewTimer(ph.Grace)
	defer grace.Stop()
waiting:
	for back := 0; back < p.InFlight; back++ {
		select {
		case <-free:
		case <-grace.C:
			break waiting
		case <-ctx.Done():
			break waiting
		}
	}
	out := p.result(&res, &mu, published)
	mu.Lock()
	err = firstErr
	mu.Unlock()
	if err != nil {
		return out, fmt.Errorf("jetstream: %d publishes failed, the first: %w", out.Failed, err)
	}
	return out, nil
}

// result is a copy of res, taken under mu, with what was published and
// what is still waiting for its ack.
func (p *JetStreamPublisher) result(res *ClientResult, mu *sync.Mutex, published int) ClientResult {
	mu.Lock()
	defer mu.Unlock()
	out := *res
	out.Latency = res.Latency
	out.Submitted = int64(published)
	out.Abandoned = max(out.Submitted-out.Finished-out.Failed, 0)
	return out
}

// CreateStream makes a stream of file storage with the given replicas
// for subjects, retrying while JetStream's cluster is still forming (no
// meta leader yet, or not every server its peer), then waits until the
// stream has a leader and every replica, for at most timeout in all; it
// returns the name of the server that leads the stream.
func CreateStream(ctx context.Context, url, name string, subjects []string, replicas int, timeout time.Duration) (leader string, err error) {
	nc, err := nats.Connect(url, nats.NoReconnect(), nats.Name("switchyard-bench"))
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg := jetstream.StreamConfig{Name: name, Subjects: subjects, Replicas: replicas, Storage: jetstream.FileStorage}
	created := false
	tick := time.NewTicker(100 * time.Millisecond) // polling a forming cluster
	defer tick.Stop()
	for {
		// Each request bounded on its own: one that reaches no meta
		// leader yet gets no answer at all.
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		if !created {
			_, err = js.CreateStream(attempt, cfg)
			// A create whose answer was lost may have made it.
			created = err == nil || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse)
		}
		if created {
			leader, err = streamLeader(attempt, js, name, replicas)
		}
		cancelAttempt()
		if created && err == nil {
			return leader, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("jetstream: creating stream %s with %d replicas: %w (the last error: %v)", name, replicas, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// streamLeader returns the stream's leader once it has one and every
// replica is current.
func streamLeader(ctx context.Context, js jetstream.JetStream, name string, replicas int) (string, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return "", err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", err
	}
	c := info.Cluster
	if c == nil || c.Leader == "" || len(c.Replicas) != replicas-1 {
		return "", fmt.Errorf("stream %s: no leader with %d replicas yet", name, replicas-1)
	}
	for _, r := range c.Replicas {
		if !r.Current {
			return "", fmt.Errorf("stream %s: replica %s is not current", name, r.Name)
		}
	}
	return c.Leader, nil
}

// StreamMessages returns how many messages the stream holds.
func StreamMessages(ctx context.Context, url, name string) (uint64, error) {
	nc, err := nats.Connect(url, nats.NoReconnect(), nats.Name("switchyard-bench"))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}
