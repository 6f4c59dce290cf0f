package load

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
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
	URL     string
	Subject string
	// Subjects, when set, are published to in turn instead of Subject,
	// from the first.
	Subjects []string
	Payload  []byte
	InFlight int
	// Tag, when set, makes every message one the drain can check off,
	// as a Client's Tag does its jobs: the n-th message's data starts
	// with Tag-n and a space, and the result lists the n of each one
	// acknowledged.
	Tag string
}

// jsSlot is one of a publisher's InFlight messages: the message nats.go
// hands back with its ack, when it was published and, with a Tag, its
// number.
type jsSlot struct {
	msg  *nats.Msg
	sent time.Time
	seq  uint64
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
		if p.Tag != "" { // data of its own, written at each publish
			slots[i].msg.Data = make([]byte, 0, len(p.Payload)+len(p.Tag)+21)
		}
		index[slots[i].msg] = i
		free <- i
	}
	subjects := p.Subjects
	if len(subjects) == 0 {
		subjects = []string{p.Subject}
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
			if p.Tag != "" {
				res.AckedSeqs = append(res.AckedSeqs, slots[i].seq)
			}
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
		// The slot's message is this loop's until its ack or error
		// hands it back: its subject and data can be written over.
		m := slots[i].msg
		m.Subject = subjects[published%len(subjects)]
		if p.Tag != "" {
			slots[i].seq = uint64(published) + 1
			m.Data = tagged(m.Data[:0], p.Tag, slots[i].seq, p.Payload)
		}
		slots[i].sent = time.Now()
		if _, err := js.PublishMsgAsync(m); err != nil {
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

// tagged appends to dst a message's data with a Tag: Tag-n, a space and
// the rest of payload after as many bytes (Client.tag's layout).
func tagged(dst []byte, tag string, n uint64, payload []byte) []byte {
	dst = strconv.AppendUint(append(append(dst, tag...), '-'), n, 10)
	dst = append(dst, ' ')
	return append(dst, payload[min(len(dst), len(payload)):]...)
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
	return createStream(ctx, url, jetstream.StreamConfig{Name: name, Subjects: subjects, Replicas: replicas, Storage: jetstream.FileStorage}, timeout)
}

// CreateWorkQueue is CreateStream for a stream with work-queue retention:
// a message goes once a consumer acknowledges it, as a job goes once
// done.
func CreateWorkQueue(ctx context.Context, url, name string, subjects []string, replicas int, timeout time.Duration) (leader string, err error) {
	return createStream(ctx, url, jetstream.StreamConfig{Name: name, Subjects: subjects, Replicas: replicas, Storage: jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy}, timeout)
}

func createStream(ctx context.Context, url string, cfg jetstream.StreamConfig, timeout time.Duration) (leader string, err error) {
	name, replicas := cfg.Name, cfg.Replicas
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

// CreateConsumer makes a durable pull consumer named durable on stream,
// each message acknowledged one by one and redelivered only if not
// acknowledged within ackWait: the queue every JetStreamConsumer of that
// name shares.
func CreateConsumer(ctx context.Context, url, stream, durable string, ackWait time.Duration) error {
	nc, err := nats.Connect(url, nats.NoReconnect(), nats.Name("switchyard-bench"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	if err != nil {
		return fmt.Errorf("jetstream: consumer %s on %s: %w", durable, stream, err)
	}
	return nil
}

// JetStreamConsumer takes the messages of Streams through one connection
// of its own, from the durable pull consumer Durable of each
// (CreateConsumer), and acknowledges each one, until its context ends:
// the peer of a Worker draining a queue. As a worker's WORK_COMPLETE, an
// acknowledgement is sent and not waited for.
type JetStreamConsumer struct {
	URL     string
	Streams []string
	Durable string
	// Batch is how many messages each stream's pull asks for at once; 0
	// is nats.go's default.
	Batch int
	// Jobs, when set, is counted down once per message.
	Jobs *Countdown
	// Seen, when set, is called with each message's data (valid during
	// the call only), from a goroutine per stream.
	Seen func(data []byte)
}

// Run connects and consumes until ctx is done. Once it is, what did not
// start is no failure: a drain may end before its last consumer has
// begun.
func (c *JetStreamConsumer) Run(ctx context.Context) (WorkerResult, error) {
	res, err := c.run(ctx)
	if err != nil && ctx.Err() != nil {
		err = nil
	}
	return res, err
}

func (c *JetStreamConsumer) run(ctx context.Context) (WorkerResult, error) {
	nc, err := nats.Connect(c.URL, nats.NoReconnect(), nats.Name("switchyard-bench"))
	if err != nil {
		return WorkerResult{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return WorkerResult{}, err
	}
	var done atomic.Int64
	var opts []jetstream.PullConsumeOpt
	if c.Batch > 0 {
		opts = append(opts, jetstream.PullMaxMessages(c.Batch))
	}
	var consuming []jetstream.ConsumeContext
	defer func() {
		for _, cc := range consuming {
			cc.Stop()
		}
	}()
	for _, stream := range c.Streams {
		cons, err := js.Consumer(ctx, stream, c.Durable)
		if err != nil {
			return WorkerResult{}, fmt.Errorf("jetstream: consumer %s on %s: %w", c.Durable, stream, err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			if c.Seen != nil {
				c.Seen(m.Data())
			}
			if m.Ack() == nil {
				done.Add(1)
				c.Jobs.Dec()
			}
		}, opts...)
		if err != nil {
			return WorkerResult{}, fmt.Errorf("jetstream: consuming %s: %w", stream, err)
		}
		consuming = append(consuming, cc)
	}
	<-ctx.Done()
	for _, cc := range consuming {
		cc.Stop()
	}
	consuming = nil
	// The last acknowledgements leave before the connection closes.
	flushErr := nc.FlushTimeout(5 * time.Second)
	return WorkerResult{Jobs: done.Load()}, flushErr
}
