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
	wall := s.clock.Wall()
	at := time.Unix(when, 0)
	if !at.After(wall) {
		return 0, false
	}
	return s.deadline(s.clock.Now().Add(at.Sub(wall))), true
}
