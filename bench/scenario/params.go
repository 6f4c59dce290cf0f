package scenario

import (
	"fmt"
	"time"
)

// Params are a scenario's knobs. Each scenario uses some of them (see
// Scenario.Uses); the others are ignored.
type Params struct {
	Clients  int           // client connections
	Workers  int           // worker connections
	InFlight int           // jobs each client keeps outstanding
	Grab     int           // GRAB_JOBs each worker keeps outstanding (1 = like libgearman)
	Payload  int           // job payload in bytes; workers echo it back
	Duration time.Duration // measured time of a time-bound phase
	Warmup   time.Duration // load before the measured time, not measured
	Jobs     int           // job count bound
	Conns    int           // idle connections held open
	Timeout  time.Duration // bound on a phase that runs to a count (fill, drain)
	Settle   time.Duration // pause before reading RSS after a drain
	Delay    time.Duration // how long after its submit a Periodic job is due (whole seconds)
	Pulse    time.Duration // how often a controller worker pulses OK
	Kills    int           // leaders killed, one a round (cluster-failover)
	Cuts     int           // leaders cut off from the other nodes, one a round (cluster-failover-cut)
	Hold     time.Duration // how long a cut lasts
	Rate     int           // offered jobs/s of an open-loop scenario (a curve's first step)
	Unique   int           // bytes of the unique each job carries: 36, a UUID's text as libgearman sends, or 0
	// CPU is the CPUs each server process may use (a cgroup's quota), 0
	// for no quota (cluster-scale).
	CPU       float64
	Functions int // functions the jobs are spread over, in turn
	Groups    int // Raft groups a cluster is started with (--cluster-groups), once the binary takes the flag; 0: four a node
}

// Param describes one field of Params for flags and records.
type Param struct {
	Name  string
	Usage string
	// Field returns a pointer to the field: *int, *time.Duration or
	// *float64.
	Field func(*Params) any
}

// AllParams lists every field of Params.
var AllParams = []Param{
	{"clients", "client connections", func(p *Params) any { return &p.Clients }},
	{"workers", "worker connections", func(p *Params) any { return &p.Workers }},
	{"inflight", "jobs each client keeps outstanding", func(p *Params) any { return &p.InFlight }},
	{"grab", "GRAB_JOBs each worker keeps outstanding (1 = like libgearman)", func(p *Params) any { return &p.Grab }},
	{"payload", "payload bytes per job", func(p *Params) any { return &p.Payload }},
	{"duration", "measured time", func(p *Params) any { return &p.Duration }},
	{"warmup", "unmeasured load before the measured time", func(p *Params) any { return &p.Warmup }},
	{"jobs", "number of jobs (upper bound)", func(p *Params) any { return &p.Jobs }},
	{"conns", "idle connections held open", func(p *Params) any { return &p.Conns }},
	{"timeout", "time bound for filling or draining a queue", func(p *Params) any { return &p.Timeout }},
	{"settle", "pause before reading RSS after the drain", func(p *Params) any { return &p.Settle }},
	{"delay", "how long after its submit a Periodic job is due (whole seconds: sched_at counts seconds)", func(p *Params) any { return &p.Delay }},
	{"rate", "offered jobs/s of an open-loop scenario, jobs sent on a fixed schedule and timed from when each was due (fg-curve: its first step)", func(p *Params) any { return &p.Rate }},
	{"pulse", "how often each controller worker pulses OK; its next_pulse is twice that, rounded up to whole seconds", func(p *Params) any { return &p.Pulse }},
	{"kills", "leaders killed (kill -9), one a round", func(p *Params) any { return &p.Kills }},
	{"unique", "bytes of the unique each job carries: 36, a UUID in text, a different one for every job, as libgearman sends with every job; 0 for none", func(p *Params) any { return &p.Unique }},
	{"cuts", "leaders cut off from the other nodes (the clients still reach them), one a round", func(p *Params) any { return &p.Cuts }},
	{"hold", "how long a cut lasts, from the cut to the heal", func(p *Params) any { return &p.Hold }},
	{"cpu", "CPUs each server process may use, a CPU cgroup's quota each (needs root); 0 for none", func(p *Params) any { return &p.CPU }},
	{"functions", "functions (JetStream: streams) the jobs are spread over, each client submitting to them in turn", func(p *Params) any { return &p.Functions }},
	{"groups", "Raft groups each cluster is started with (--cluster-groups N), when the binary takes the flag; 0: four a node (12 at three nodes, 20 at five)", func(p *Params) any { return &p.Groups }},
}

// LookupParam finds a Param by name.
func LookupParam(name string) (Param, bool) {
	for _, p := range AllParams {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// CopyParam sets the named field of dst to its value in src.
func CopyParam(name string, dst, src *Params) {
	p, ok := LookupParam(name)
	if !ok {
		panic("scenario: no param " + name)
	}
	switch d := p.Field(dst).(type) {
	case *int:
		*d = *p.Field(src).(*int)
	case *time.Duration:
		*d = *p.Field(src).(*time.Duration)
	case *float64:
		*d = *p.Field(src).(*float64)
	}
}

// Strings returns the named fields as text, for the record.
func (p Params) Strings(names []string) map[string]string {
	m := make(map[string]string, len(names))
	for _, name := range names {
		if def, ok := LookupParam(name); ok {
			m[name] = fmt.Sprint(deref(def.Field(&p)))
		}
	}
	return m
}

func deref(ptr any) any {
	switch v := ptr.(type) {
	case *int:
		return *v
	case *time.Duration:
		return *v
	case *float64:
		return *v
	}
	return ptr
}
