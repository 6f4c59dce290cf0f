package scenario

import (
	"sync"
	"time"

	"switchyard/bench/load"
	"switchyard/bench/record"
)

// cpuSample is the server's and this process's CPU time at one moment.
type cpuSample struct {
	server    time.Duration
	serverErr error
	load      time.Duration
}

func sampleCPU(t Target) cpuSample {
	u, err := t.Usage()
	return cpuSample{server: u.CPU, serverErr: err, load: selfCPU()}
}

// cpuMeter measures the server's and the load generator's CPU over the
// stretch of a scenario whose jobs its jobs/s counts, to give both per
// job: from startCPU to perJob for a stretch that runs to a count, or
// over a phase's window (meterPhase), sampled on timers at its Start and
// End, for one that runs for a time and counts the jobs done inside it.
type cpuMeter struct {
	t        Target
	from, to cpuSample
	toTimed  bool           // to is sampled by a timer, not by end
	timers   []sampleTimer  // meterPhase's
	taken    sync.WaitGroup // the timers' samples
}

type sampleTimer struct {
	*time.Timer
	dst *cpuSample
}

// startCPU starts a meter now; perJob ends it.
func startCPU(t Target) *cpuMeter {
	return &cpuMeter{t: t, from: sampleCPU(t)}
}

// meterPhase meters ph's window, Start to End (to perJob if it has no End).
func meterPhase(t Target, ph *load.Phase) *cpuMeter {
	m := &cpuMeter{t: t}
	m.at(ph.Start, &m.from)
	if !ph.End.IsZero() {
		m.at(ph.End, &m.to)
		m.toTimed = true
	}
	return m
}

func (m *cpuMeter) at(when time.Time, dst *cpuSample) {
	m.taken.Add(1)
	m.timers = append(m.timers, sampleTimer{time.AfterFunc(time.Until(when), func() {
		*dst = sampleCPU(m.t)
		m.taken.Done()
	}), dst})
}

// end takes the samples not taken yet (a phase cut short by its context
// has timers that have not fired: they sample now) and returns CPU per
// job, µs, of the server (ok false if it could not be read) and of this
// process.
func (m *cpuMeter) end(jobs int64) (server, load float64, ok bool) {
	for _, tm := range m.timers {
		if tm.Stop() { // it will not run: this takes its sample
			*tm.dst = sampleCPU(m.t)
			m.taken.Done()
		}
	}
	m.taken.Wait()
	if !m.toTimed {
		m.to = sampleCPU(m.t)
	}
	if jobs <= 0 {
		return 0, 0, false
	}
	perJob := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(jobs) }
	ok = m.from.serverErr == nil && m.to.serverErr == nil
	if ok {
		server = perJob(m.to.server - m.from.server)
	}
	return server, perJob(m.to.load - m.from.load), ok
}

// perJob ends the meter and records CPU per job in the row.
func (m *cpuMeter) perJob(out *record.Run, jobs int64) {
	out.ServerCPUPerJob, out.LoadCPUPerJob, _ = m.end(jobs)
}

// perJobExtra ends the meter and records CPU per job in the row's extras,
// named with prefix: for a stretch of the scenario other than the one its
// jobs/s counts (e.g. "drain_").
func (m *cpuMeter) perJobExtra(out *record.Run, prefix string, jobs int64) {
	server, load, ok := m.end(jobs)
	if jobs <= 0 {
		return
	}
	if ok {
		setExtra(out, prefix+"cpu_us_per_job", server)
	}
	setExtra(out, prefix+"load_cpu_us_per_job", load)
}
