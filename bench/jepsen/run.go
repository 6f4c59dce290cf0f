package jepsen

import (
	"context"
	"fmt"
	"time"
)

// pollInterval is how often a wait looks at what it waits for.
const pollInterval = 50 * time.Millisecond

// drain waits, for at most limit, until every job the workload saw
// acknowledged has been seen to run.
func drain(ctx context.Context, w *Workload, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		n := w.Outstanding()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drain: %d acknowledged jobs not seen to run after %v", n, limit)
		case <-tick.C:
		}
	}
}
