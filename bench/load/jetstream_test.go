package load

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"switchyard/bench/harness"
)

// TestJetStreamPublisher publishes a bounded count to a stream of three
// replicas on three real nats-server processes: every message is
// acknowledged, timed and in the stream.
func TestJetStreamPublisher(t *testing.T) {
	const path = "/usr/sbin/nats-server"
	if _, err := os.Stat(path); err != nil {
		t.Skip("nats-server is not installed (make bench-deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := harness.StartNATS(ctx, harness.NATSConfig{Path: path, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			for _, s := range c.Servers {
				t.Logf("%s's output (end):\n%s", s.Name, s.Output())
			}
		}
	}()
	leader, err := CreateStream(ctx, c.Servers[0].ClientURL, "T", []string{"t.>"}, 3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	at := c.Find(leader)
	if at == nil {
		t.Fatalf("the stream's leader %q is none of the servers", leader)
	}
	tests := []struct {
		name     string
		url      string
		inflight int
		jobs     int64
	}{
		{"on the leader", at.ClientURL, 8, 300},
		{"one in flight", c.Servers[0].ClientURL, 1, 20},
	}
	var total int64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ph := &Phase{Start: time.Now(), End: time.Now().Add(time.Minute), Budget: NewBudget(tt.jobs), Grace: 5 * time.Second}
			p := JetStreamPublisher{URL: tt.url, Subject: "t.x", Payload: []byte("payload"), InFlight: tt.inflight}
			res, err := p.Run(ctx, ph)
			if err != nil {
				t.Fatal(err)
			}
			if res.Finished != tt.jobs || res.Submitted != tt.jobs || res.Measured != tt.jobs || res.Failed != 0 || res.Abandoned != 0 ||
				res.Latency.TotalCount() != tt.jobs || res.Latency.Min() <= 0 {
				t.Errorf("result %+v, %d latencies", res, res.Latency.TotalCount())
			}
			total += tt.jobs
		})
	}
	n, err := StreamMessages(ctx, at.ClientURL, "T")
	if err != nil || int64(n) != total {
		t.Errorf("the stream holds %d messages (%v), want %d", n, err, total)
	}
}

// TestJetStreamWorkQueues publishes tagged messages to three work-queue
// streams in turn, through two servers, then drains them with two
// consumers sharing each stream's durable consumer: every message
// acknowledged to the publishers is taken once or more, and the streams
// end empty.
func TestJetStreamWorkQueues(t *testing.T) {
	const path = "/usr/sbin/nats-server"
	if _, err := os.Stat(path); err != nil {
		t.Skip("nats-server is not installed (make bench-deps)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := harness.StartNATS(ctx, harness.NATSConfig{Path: path, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	}()
	streams := []string{"QA", "QB", "QC"}
	var subjects []string
	for i, st := range streams {
		subjects = append(subjects, "q."+st)
		if _, err := CreateWorkQueue(ctx, c.Servers[i].ClientURL, st, []string{"q." + st}, 3, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := CreateConsumer(ctx, c.Servers[i].ClientURL, st, "drain", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	const perPublisher = 150
	acked := map[string]bool{}
	for i := range 2 {
		tag := fmt.Sprintf("p%d", i)
		p := JetStreamPublisher{URL: c.Servers[i].ClientURL, Subjects: subjects, Payload: make([]byte, 64), InFlight: 8, Tag: tag}
		res, err := p.Run(ctx, &Phase{Start: time.Now(), Budget: NewBudget(perPublisher), Grace: 10 * time.Second})
		if err != nil || res.Finished != perPublisher || len(res.AckedSeqs) != perPublisher {
			t.Fatalf("publisher %d: %+v, %v", i, res, err)
		}
		for _, n := range res.AckedSeqs {
			acked[fmt.Sprintf("%s-%d", tag, n)] = true
		}
	}
	for _, st := range streams {
		if n, err := StreamMessages(ctx, c.Servers[0].ClientURL, st); err != nil || n != 2*perPublisher/3 {
			t.Errorf("stream %s holds %d messages (%v), want %d", st, n, err, 2*perPublisher/3)
		}
	}

	dctx, stop := context.WithCancel(ctx)
	defer stop()
	countdown := NewCountdown(2*perPublisher, stop)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	var jobs int64
	for i := range 2 {
		cons := JetStreamConsumer{URL: c.Servers[i+1].ClientURL, Streams: streams, Durable: "drain", Batch: 16, Jobs: countdown,
			Seen: func(data []byte) {
				if len(data) != 64 {
					t.Errorf("message of %d bytes", len(data))
				}
				mu.Lock()
				seen[UniqueOf(data)] = true
				mu.Unlock()
			}}
		wg.Go(func() {
			res, err := cons.Run(dctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			jobs += res.Jobs
			mu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("drain: %v", ctx.Err())
	}
	if jobs < 2*perPublisher {
		t.Errorf("consumers took %d messages, want %d", jobs, 2*perPublisher)
	}
	for u := range acked {
		if !seen[u] {
			t.Errorf("message %s acknowledged to its publisher, not taken", u)
		}
	}
	// The acknowledgements reach the streams: each ends empty.
	deadline := time.Now().Add(30 * time.Second)
	for _, st := range streams {
		for {
			n, err := StreamMessages(ctx, c.Servers[0].ClientURL, st)
			if err == nil && n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("stream %s still holds %d messages (%v)", st, n, err)
			}
			time.Sleep(20 * time.Millisecond) // polling the servers
		}
	}
}
