package harness

import (
	"context"
	"time"
)

// Poll calls cond every interval until it holds, ctx ends or timeout
// passes: polling processes and servers, not synchronising goroutines.
// It returns nil once cond holds, and otherwise the context's error and
// cond's last note, for the caller's message.
func Poll(ctx context.Context, timeout, interval time.Duration, cond func() (bool, string)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, note := cond()
		if ok {
			return "", nil
		}
		select {
		case <-ctx.Done():
			return note, ctx.Err()
		case <-tick.C:
		}
	}
}
