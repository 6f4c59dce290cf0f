package scenario

import "time"

// rssSample is the server's RSS sampled once, on a timer: under load,
// near the end of a measured phase.
type rssSample struct {
	timer *time.Timer
	taken chan struct{} // closed once the timer's sample is in mb
	mb    float64
}

// sampleRSS samples t's RSS at when.
func sampleRSS(t Target, when time.Time) *rssSample {
	s := &rssSample{taken: make(chan struct{})}
	s.timer = time.AfterFunc(time.Until(when), func() {
		defer close(s.taken)
		if u, err := t.Usage(); err == nil {
			s.mb = megabytes(u.RSS)
		}
	})
	return s
}

// MB is the sample in megabytes, 0 if the timer has not fired (the phase
// was cut short) or the server could not be read. Once the timer has
// fired it waits for its sample, which may still be being read.
func (s *rssSample) MB() float64 {
	if s.timer.Stop() {
		return 0
	}
	<-s.taken
	return s.mb
}
