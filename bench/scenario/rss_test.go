package scenario

import (
	"errors"
	"testing"
	"time"

	"switchyard/bench/harness"
)

func TestSampleRSS(t *testing.T) {
	reading := make(chan struct{})
	release := make(chan struct{})
	slow := Target{Usage: func() (harness.Usage, error) {
		close(reading)
		<-release
		return harness.Usage{RSS: 3 << 20}, nil
	}}
	tests := []struct {
		name string
		t    Target
		when time.Duration
		want float64
	}{
		{"read", Target{Usage: func() (harness.Usage, error) { return harness.Usage{RSS: 5 << 20}, nil }}, 0, 5},
		{"not read", Target{Usage: func() (harness.Usage, error) { return harness.Usage{}, errors.New("gone") }}, 0, 0},
		{"not fired", Target{Usage: func() (harness.Usage, error) { return harness.Usage{RSS: 1 << 20}, nil }}, time.Hour, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleRSS(tc.t, time.Now().Add(tc.when))
			if tc.when == 0 {
				<-s.taken // fired
			}
			if got := s.MB(); got != tc.want {
				t.Fatalf("MB %v, want %v", got, tc.want)
			}
		})
	}
	// A sample being read when MB is called is waited for, not lost.
	s := sampleRSS(slow, time.Now())
	<-reading
	got := make(chan float64)
	go func() { got <- s.MB() }()
	close(release)
	if mb := <-got; mb != 3 {
		t.Fatalf("MB %v while reading, want 3", mb)
	}
}
