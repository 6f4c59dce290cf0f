package sched

import "time"

// Clock is where the scheduler reads the time. Now must never step:
// timers, due times and idle times are measured on it (time.Now's
// monotonic reading). Wall is the calendar, read only at submit to turn a
// requested unix time into a due time on Now's scale, so that a wall-clock
// step afterwards (NTP at boot, a VM resumed) moves no due time.
type Clock interface {
	Now() time.Time
	Wall() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time  { return time.Now() }
func (systemClock) Wall() time.Time { return time.Now() }

// dueTick is the first tick at which a job asked to run at unix time when
// may run, and false if that time has already come.
func (s *Sched) dueTick(when int64) (int64, bool) {
	now, wall := s.readClock()
	if when < wall.Unix() {
		return 0, false
	}
	// In seconds first: time.Unix overflows for a when near the end of
	// int64 and would put the job in the past.
	d := maxDelay
	if when-wall.Unix() < int64(maxDelay/time.Second) {
		d = time.Unix(when, 0).Sub(wall)
	}
	if d <= 0 {
		return 0, false
	}
	return s.deadline(now.Add(d)), true
}

// readClock reads both clocks. The system clock's are one reading, so a
// due time lands on its exact tick; another Clock is read wall first, so
// the time between the two reads can only make a job late, never early.
func (s *Sched) readClock() (now, wall time.Time) {
	if _, ok := s.clock.(systemClock); ok {
		t := time.Now()
		return t, t
	}
	wall = s.clock.Wall()
	return s.clock.Now(), wall
}

// maxDelay is the longest wait a due time or a timeout is measured to:
// about 146 years, beyond which every wait is the same "never".
const maxDelay = time.Duration(1 << 62)

// Seconds turns a count of seconds from a request into a Duration,
// saturating at maxDelay instead of wrapping: a frontend passing a huge
// timeout or delay gets "never", not a wrapped few seconds.
func Seconds(n int64) time.Duration {
	switch {
	case n <= 0:
		return 0
	case n >= int64(maxDelay/time.Second):
		return maxDelay
	}
	return time.Duration(n) * time.Second
}
