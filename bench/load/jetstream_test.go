package load

import (
	"context"
	"os"
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
