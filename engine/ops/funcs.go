package ops

import (
	"bufio"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"switchyard/sched"
)

// funcRow is one function's figures, copied out of the scheduler.
type funcRow struct {
	name   string // as sched has it
	label  string // name as a label value: UTF-8, escaped for the text format
	queued [3]int // by priority
	total  int    // gearmand's TOTAL: queued, due later, blocked, running
	run    int
	work   int
	events sched.Counts
	rate   float64 // completions per second lately, for /api/functions
	paused bool
	oldest time.Duration // the oldest queued job's wait (FuncStat.OldestWait)
}

// readFuncs copies the figures of every function that keep accepts (nil:
// all), in no order: FuncsChunked copies a chunk per short hold of a
// shard's lock, and no lock is held while the rows are used. A row is
// 100-odd bytes: a scrape of 100,000 functions holds about 14 MB for its
// time.
func readFuncs(sc *sched.Sched, keep func(*sched.FuncStat) bool) []funcRow {
	var rows []funcRow
	if keep == nil {
		rows = make([]funcRow, 0, sc.NumFuncs()+sched.DefaultShards) // and a few made meanwhile
	}
	sc.FuncsChunked(func(fs []sched.FuncStat) {
		for i := range fs {
			f := &fs[i]
			if keep != nil && !keep(f) {
				continue
			}
			rows = append(rows, funcRow{name: f.Name, queued: f.Queued, total: f.Total(), run: f.Running,
				work: f.Workers, events: f.Events, paused: f.Paused, oldest: f.OldestWait})
		}
	})
	return rows
}

// funcFamily is one per-function metric family.
type funcFamily struct {
	name, help string
	counter    bool
	byPriority bool // one series per priority, from queued
	value      func(r *funcRow) uint64
	fvalue     func(r *funcRow) float64 // instead of value
}

// funcFamilies are written by hand rather than through client_golang:
// with one const metric per series, a scrape of 10,000 functions took
// 0.7 CPU-seconds (13 series each, a few allocations and a sort
// comparison of label pairs per series), 7 s at 100,000; appending the
// lines costs a tenth of that. The first four are gearman-exporter's,
// under its names, help and labels.
var funcFamilies = []funcFamily{
	{name: "gearman_jobs", help: "number of jobs queued or running",
		value: func(r *funcRow) uint64 { return uint64(r.total) }},
	{name: "gearman_jobs_running", help: "number of running jobs",
		value: func(r *funcRow) uint64 { return uint64(r.run) }},
	{name: "gearman_jobs_waiting", help: "number of jobs waiting for an available worker",
		value: func(r *funcRow) uint64 { return uint64(r.total - r.run) }},
	{name: "gearman_workers", help: "number of capable workers",
		value: func(r *funcRow) uint64 { return uint64(r.work) }},
	{name: "switchyard_function_queued", byPriority: true,
		help: "Jobs waiting in the function's queue for a worker, by priority (high, normal, low); not those due later or waiting for other jobs."},
	{name: "switchyard_function_running", help: "Jobs of the function a worker holds (as gearman_jobs_running).",
		value: func(r *funcRow) uint64 { return uint64(r.run) }},
	{name: "switchyard_function_workers", help: "Workers registered for the function, of every protocol (as gearman_workers).",
		value: func(r *funcRow) uint64 { return uint64(r.work) }},
	{name: "switchyard_function_completed_total", counter: true,
		help:  "Jobs of the function a worker completed, since the function was made (one forgotten after --function-ttl starts again from 0).",
		value: func(r *funcRow) uint64 { return r.events[sched.EventCompleted] }},
	{name: "switchyard_function_failed_total", counter: true,
		help: "Jobs of the function counted by switchyard_jobs_failed_total or switchyard_jobs_exception_total, since the function was made.",
		value: func(r *funcRow) uint64 {
			return r.events[sched.EventFailed] + r.events[sched.EventException]
		}},
	{name: "switchyard_function_oldest_job_age_seconds",
		help:   "How long the job that has waited longest in the function's queue has waited, in seconds (since its submit, due time or requeue); 0 when none waits.",
		fvalue: func(r *funcRow) float64 { return r.oldest.Seconds() }},
	{name: "switchyard_function_paused", help: "1 while the function is paused (its jobs queue, no worker is handed one), else 0.",
		value: func(r *funcRow) uint64 {
			if r.paused {
				return 1
			}
			return 0
		}},
}

var priorityNames = [3]string{"high", "normal", "low"}

// writeFuncFamilies writes the per-function families in Prometheus's text
// format, or OpenMetrics's (om: a counter's family is named without its
// _total).
func writeFuncFamilies(w *bufio.Writer, rows []funcRow, om bool) {
	var num [32]byte
	line := func(fam, label, prio string, v uint64, fv func(*funcRow) float64, r *funcRow) {
		w.WriteString(fam)
		w.WriteString(`{function="`)
		w.WriteString(label)
		if prio != "" {
			w.WriteString(`",priority="`)
			w.WriteString(prio)
		}
		w.WriteString(`"} `)
		if fv != nil {
			w.Write(strconv.AppendFloat(num[:0], fv(r), 'g', -1, 64))
		} else {
			w.Write(strconv.AppendUint(num[:0], v, 10))
		}
		w.WriteByte('\n')
	}
	for i := range rows {
		if rows[i].label == "" {
			rows[i].label = escapeLabel(labelValue(rows[i].name))
		}
	}
	if len(rows) == 0 {
		return // a family is written with its series
	}
	for _, f := range funcFamilies {
		typ := "gauge"
		if f.counter {
			typ = "counter"
		}
		family := f.name
		if om && f.counter {
			family = strings.TrimSuffix(family, "_total")
		}
		w.WriteString("# HELP " + family + " " + f.help + "\n# TYPE " + family + " " + typ + "\n")
		for i := range rows {
			r := &rows[i]
			switch {
			case f.byPriority:
				for p, q := range r.queued {
					line(f.name, r.label, priorityNames[p], uint64(q), nil, r)
				}
			case f.fvalue != nil:
				line(f.name, r.label, "", 0, f.fvalue, r)
			default:
				line(f.name, r.label, "", f.value(r), nil, r)
			}
		}
	}
}

// escapeLabel escapes a label value for the text format: backslash,
// double quote and line feed.
func escapeLabel(v string) string {
	n := 0
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\\' || c == '"' || c == '\n' {
			n++
		}
	}
	if n == 0 {
		return v
	}
	b := make([]byte, 0, len(v)+n)
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// labelValue is a function name as a label value, which Prometheus wants
// in UTF-8: a Gearman function name is any bytes, so each byte that is not
// UTF-8 is written \xHH.
func labelValue(name string) string {
	if utf8.ValidString(name) {
		return name
	}
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(name)+8)
	for i := 0; i < len(name); {
		r, size := utf8.DecodeRuneInString(name[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, '\\', 'x', hex[name[i]>>4], hex[name[i]&15])
		} else {
			b = append(b, name[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

// funcHistograms are the per-function latency families
// (--metrics-function-histograms): each a histogram of 24 series (22
// buckets, the sum and the count) per function that has had a job taken.
var funcHistograms = [2]struct{ name, help string }{
	{"switchyard_function_queue_wait_seconds", "How long the function's jobs waited in its queue before a worker took them, each attempt, since the function was made."},
	{"switchyard_function_run_seconds", "How long each attempt at the function's jobs lasted, since the function was made."},
}

// boundLabels are the histograms' le values, as the text format writes them.
var boundLabels = func() []string {
	out := make([]string, len(boundSeconds)+1)
	for i, b := range boundSeconds {
		out[i] = strconv.FormatFloat(b, 'g', -1, 64)
	}
	out[len(boundSeconds)] = "+Inf"
	return out
}()

// writeFuncHistograms writes the per-function latency histograms, by
// hand as the other per-function families are (see funcFamilies), from
// sched's totals copied a chunk at a time.
func writeFuncHistograms(w *bufio.Writer, sc *sched.Sched) {
	var lats []sched.FuncLatency
	sc.FuncLatencies(func(c []sched.FuncLatency) {
		for i := range c {
			if c[i].Wait.Count()+c[i].Run.Count() > 0 {
				lats = append(lats, c[i])
			}
		}
	})
	if len(lats) == 0 {
		return
	}
	var num [32]byte
	for k, fam := range funcHistograms {
		w.WriteString("# HELP " + fam.name + " " + fam.help + "\n# TYPE " + fam.name + " histogram\n")
		for i := range lats {
			h := &lats[i].Wait
			if k == 1 {
				h = &lats[i].Run
			}
			label := escapeLabel(labelValue(lats[i].Name))
			var n uint64
			for b, le := range boundLabels {
				n += h.Buckets[b]
				w.WriteString(fam.name + `_bucket{function="` + label + `",le="` + le + `"} `)
				w.Write(strconv.AppendUint(num[:0], n, 10))
				w.WriteByte('\n')
			}
			w.WriteString(fam.name + `_sum{function="` + label + `"} `)
			w.Write(strconv.AppendFloat(num[:0], h.Sum, 'g', -1, 64))
			w.WriteString("\n" + fam.name + `_count{function="` + label + `"} `)
			w.Write(strconv.AppendUint(num[:0], n, 10))
			w.WriteByte('\n')
		}
	}
}
