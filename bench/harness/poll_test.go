package harness

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	tests := []struct {
		name     string
		holdsAt  int // the call at which cond holds; 0: never
		timeout  time.Duration
		wantErr  error
		wantNote string
	}{
		{name: "at once", holdsAt: 1, timeout: time.Minute},
		{name: "on the third look", holdsAt: 3, timeout: time.Minute},
		{name: "never", timeout: 30 * time.Millisecond, wantErr: context.DeadlineExceeded, wantNote: "not yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			note, err := Poll(context.Background(), tt.timeout, time.Millisecond, func() (bool, string) {
				calls++
				return calls == tt.holdsAt, "not yet"
			})
			if !errors.Is(err, tt.wantErr) || note != tt.wantNote {
				t.Fatalf("Poll: %q, %v; want %q, %v", note, err, tt.wantNote, tt.wantErr)
			}
			if tt.holdsAt > 0 && calls != tt.holdsAt {
				t.Errorf("cond called %d times, want %d", calls, tt.holdsAt)
			}
		})
	}
}

func TestPollCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Poll(ctx, time.Minute, time.Millisecond, func() (bool, string) { return false, "" }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll on a cancelled context: %v, want context.Canceled", err)
	}
}
