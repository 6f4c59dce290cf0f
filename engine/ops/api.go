package ops

import (
	"cmp"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard/sched"
)

// The status page's JSON: /api/overview for the totals, rates,
// percentiles and sparklines (from the sampler), /api/functions for one
// page of the functions, searched and sorted on the server, so that the
// page stays as light with 100,000 functions as with ten.

// num is a number that is null in JSON when unknown (NaN).
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', 6, 64), nil
}

type quantiles struct {
	P50 num `json:"p50"`
	P90 num `json:"p90"`
	P99 num `json:"p99"`
}

func quantilesOf(h *sched.Histogram) quantiles {
	return quantiles{num(quantile(h, .5)), num(quantile(h, .9)), num(quantile(h, .99))}
}

type protocolRow struct {
	Name        string `json:"name"`
	Connections *int   `json:"connections"` // null: no listener of its own
	sched.Counts
}

func (p protocolRow) MarshalJSON() ([]byte, error) {
	type out struct {
		Name        string `json:"name"`
		Connections *int   `json:"connections"`
		Submitted   uint64 `json:"submitted"`
		Completed   uint64 `json:"completed"`
		Failed      uint64 `json:"failed"`
		Exception   uint64 `json:"exception"`
		Retried     uint64 `json:"retried"`
		TimedOut    uint64 `json:"timed_out"`
	}
	c := p.Counts
	return json.Marshal(out{p.Name, p.Connections, c[sched.EventSubmitted], c[sched.EventCompleted], c[sched.EventFailed],
		c[sched.EventException], c[sched.EventRetried], c[sched.EventTimedOut]})
}

type overview struct {
	Version   string        `json:"version"`
	Revision  string        `json:"revision"`
	State     string        `json:"state"`
	Uptime    float64       `json:"uptime"`
	Functions int           `json:"functions"`
	Jobs      int           `json:"jobs"`
	Running   int           `json:"running"`
	Rates     rates         `json:"rates"`
	Window    float64       `json:"window"` // seconds the percentiles span
	Wait      quantiles     `json:"wait"`
	Run       quantiles     `json:"run"`
	Protocols []protocolRow `json:"protocols"`
	Series    series        `json:"series"`
	Store     *storeJSON    `json:"store"` // null: no job store
	// Refused counts the submits refused, by reason (see sched.Refusal).
	Refused map[string]uint64 `json:"refused"`
	// Actions: the actions are on (--ops-token-file); each needs the token.
	Actions bool `json:"actions"`
	// Failures is how many failures each function keeps (0: none).
	Failures int `json:"failures"`
}

// storeJSON is the job store's state on the status page.
type storeJSON struct {
	Up          bool   `json:"up"`
	Failure     string `json:"failure"` // why it takes no writes
	WriteErrors uint64 `json:"write_errors"`
}

// rates are per second.
type rates struct {
	Submitted num `json:"submitted"`
	Completed num `json:"completed"`
	Failed    num `json:"failed"`
}

// series are the sparklines: one value per sample interval, oldest first.
type series struct {
	T         []int64 `json:"t"` // unix ms at each interval's end
	Submitted []num   `json:"submitted"`
	Completed []num   `json:"completed"`
	Failed    []num   `json:"failed"`
	Jobs      []int   `json:"jobs"`
	Running   []int   `json:"running"`
	WaitP99   []num   `json:"wait_p99"`
	RunP99    []num   `json:"run_p99"`
}

// Spans of the overview's figures.
const (
	rateWindow    = 10 * time.Second
	latencyWindow = time.Minute
)

// failedOf is what the page counts as failed: failures and exceptions.
func failedOf(c *sched.Counts) uint64 { return c[sched.EventFailed] + c[sched.EventException] }

func (s *Server) serveOverview(w http.ResponseWriter, _ *http.Request) {
	ss := s.sampler.samples()
	now := time.Now()
	o := overview{Version: s.cfg.Version, Revision: s.cfg.Revision, State: s.stateName(), Uptime: now.Sub(s.started).Seconds(),
		Functions: s.cfg.Sched.NumFuncs(), Jobs: s.cfg.Sched.Len(), Running: s.cfg.Sched.Running(),
		Rates: rates{num(math.NaN()), num(math.NaN()), num(math.NaN())},
		Wait:  quantilesOf(&sched.Histogram{}), Run: quantilesOf(&sched.Histogram{})}
	if n := len(ss); n >= 2 {
		last := &ss[n-1]
		// The rates over rateWindow, the percentiles over latencyWindow,
		// or over as much as the ring holds.
		from := func(d time.Duration) *sample {
			for i := n - 2; i > 0; i-- {
				if last.at.Sub(ss[i].at) >= d {
					return &ss[i]
				}
			}
			return &ss[0]
		}
		r := from(rateWindow)
		if dt := last.at.Sub(r.at).Seconds(); dt > 0 {
			o.Rates = rates{
				num(float64(last.events[sched.EventSubmitted]-r.events[sched.EventSubmitted]) / dt),
				num(float64(last.events[sched.EventCompleted]-r.events[sched.EventCompleted]) / dt),
				num(float64(failedOf(&last.events)-failedOf(&r.events)) / dt),
			}
		}
		l := from(latencyWindow)
		o.Window = last.at.Sub(l.at).Seconds()
		wd, rd := diff(&last.wait, &l.wait), diff(&last.run, &l.run)
		o.Wait, o.Run = quantilesOf(&wd), quantilesOf(&rd)
		for i := 1; i < n; i++ {
			a, b := &ss[i-1], &ss[i]
			dt := b.at.Sub(a.at).Seconds()
			o.Series.T = append(o.Series.T, b.at.UnixMilli())
			o.Series.Submitted = append(o.Series.Submitted, num(float64(b.events[sched.EventSubmitted]-a.events[sched.EventSubmitted])/dt))
			o.Series.Completed = append(o.Series.Completed, num(float64(b.events[sched.EventCompleted]-a.events[sched.EventCompleted])/dt))
			o.Series.Failed = append(o.Series.Failed, num(float64(failedOf(&b.events)-failedOf(&a.events))/dt))
			o.Series.Jobs = append(o.Series.Jobs, b.jobs)
			o.Series.Running = append(o.Series.Running, b.running)
			wd, rd := diff(&b.wait, &a.wait), diff(&b.run, &a.run)
			o.Series.WaitP99 = append(o.Series.WaitP99, num(quantile(&wd, .99)))
			o.Series.RunP99 = append(o.Series.RunP99, num(quantile(&rd, .99)))
		}
	}
	var st sched.Stats
	s.cfg.Sched.Stats(&st)
	o.Actions, o.Failures = len(s.cfg.Token) > 0, s.cfg.Failures
	o.Refused = make(map[string]uint64, len(st.Refused))
	for r, n := range st.Refused {
		o.Refused[sched.Refusal(r).String()] = n
	}
	if s.cfg.Store != nil {
		ss := s.cfg.Store()
		o.Store = &storeJSON{Up: ss.Failure == "", Failure: ss.Failure, WriteErrors: ss.WriteErrors}
	}
	conns := map[string]int{}
	for _, c := range s.conns() {
		conns[c.Protocol] = c.Open()
	}
	for src := range st.Events {
		name := s.protocol(sched.Source(src))
		if name == "" {
			continue
		}
		row := protocolRow{Name: name, Counts: st.Events[src]}
		if n, ok := conns[name]; ok {
			row.Connections = &n
		}
		o.Protocols = append(o.Protocols, row)
	}
	writeJSON(w, &o)
}

// funcJSON is one function on a page of /api/functions.
type funcJSON struct {
	Name      string `json:"name"`
	Queued    [3]int `json:"queued"` // high, normal, low
	Later     int    `json:"later"`  // due later or waiting for other jobs
	Running   int    `json:"running"`
	Workers   int    `json:"workers"`
	Total     int    `json:"total"` // as the admin status's TOTAL
	Submitted uint64 `json:"submitted"`
	Completed uint64 `json:"completed"`
	Failed    uint64 `json:"failed"`
	Rate      num    `json:"rate"` // completed per second lately
	Paused    bool   `json:"paused"`
	// Oldest is how long its oldest queued job has waited, seconds.
	Oldest num `json:"oldest"`
	// Stuck: jobs wait in its queue and no worker can take them (none
	// registered, or the function is paused).
	Stuck bool `json:"stuck"`
	// Wait and Run are its queue waits' and run times' percentiles over
	// the last one to two minutes (null: none).
	Wait quantiles `json:"wait"`
	Run  quantiles `json:"run"`
}

type funcPage struct {
	Total     int        `json:"total"` // functions that match
	Offset    int        `json:"offset"`
	Limit     int        `json:"limit"`
	Functions []funcJSON `json:"functions"`
}

// Page sizes of /api/functions.
const (
	defaultLimit = 50
	maxLimit     = 1000
)

// serveFunctions is /api/functions?q=&offset=&limit=&sort=&desc=: the
// functions whose name holds q (ASCII case folded), sorted by sort (name,
// high, normal, low, later, running, workers, total, completed, failed,
// rate; desc=1 for the largest first), offset and limit cutting one page.
// The rows are copied out of the scheduler a chunk per lock hold, and
// written with no lock held.
func (s *Server) serveFunctions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	needle := q.Get("q")
	offset, _ := strconv.Atoi(q.Get("offset"))
	offset = max(offset, 0)
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit <= 0 {
		limit = defaultLimit
	}
	limit = min(limit, maxLimit)
	key := sortKeys[q.Get("sort")] // nil: by name
	desc := q.Get("desc") == "1"

	var keep func(*sched.FuncStat) bool
	if needle != "" {
		keep = func(f *sched.FuncStat) bool { return containsFold(f.Name, needle) }
	}
	rows := readFuncs(s.cfg.Sched, keep)
	base := s.sampler.funcBase()
	now := time.Now()
	// rate is a function's completions per second since the sampler's
	// older snapshot (one made since counts from 0).
	rate := func(r *funcRow) {
		r.rate = math.NaN()
		if base == nil {
			return
		}
		if dt := now.Sub(base.at).Seconds(); dt > 0 {
			prev := base.counts[r.name]
			r.rate = float64(r.events[sched.EventCompleted]-prev[sched.EventCompleted]) / dt
		}
	}
	if q.Get("sort") == "rate" {
		for i := range rows {
			rate(&rows[i])
		}
	}
	// Ties go by name, so that the order, and with it the pages, is
	// stable from one refresh to the next.
	order := func(i, j int32) int {
		a, b := &rows[i], &rows[j]
		if key != nil {
			if c := cmp.Compare(key(a), key(b)); c != 0 {
				if desc {
					return -c
				}
				return c
			}
		}
		if desc && key == nil {
			return strings.Compare(b.name, a.name)
		}
		return strings.Compare(a.name, b.name)
	}
	page := funcPage{Total: len(rows), Offset: offset, Limit: limit, Functions: []funcJSON{}}
	if offset < len(rows) {
		for _, i := range firstK(len(rows), offset+limit, order)[offset:] {
			r := &rows[i]
			if q.Get("sort") != "rate" {
				rate(r)
			}
			queued := r.queued[0] + r.queued[1] + r.queued[2]
			page.Functions = append(page.Functions, s.funcJSONOf(r, queued))
		}
	}
	writeJSON(w, &page)
}

// funcJSONOf is r's row, with its recent latency read from the scheduler.
func (s *Server) funcJSONOf(r *funcRow, queued int) funcJSON {
	f := funcJSON{Name: labelValue(r.name), Queued: r.queued,
		Later: r.total - queued - r.run, Running: r.run, Workers: r.work, Total: r.total,
		Submitted: r.events[sched.EventSubmitted], Completed: r.events[sched.EventCompleted],
		Failed: failedOf(&r.events), Rate: num(r.rate), Paused: r.paused, Oldest: num(r.oldest.Seconds()),
		Stuck: queued > 0 && (r.work == 0 || r.paused)}
	l, _ := s.cfg.Sched.FuncLatencyOf([]byte(r.name))
	f.Wait, f.Run = quantilesOf(&l.RecentWait), quantilesOf(&l.RecentRun)
	return f
}

// sortKeys are /api/functions's sort orders but by name.
var sortKeys = map[string]func(r *funcRow) float64{
	"high":      func(r *funcRow) float64 { return float64(r.queued[0]) },
	"normal":    func(r *funcRow) float64 { return float64(r.queued[1]) },
	"low":       func(r *funcRow) float64 { return float64(r.queued[2]) },
	"later":     func(r *funcRow) float64 { return float64(r.total - r.run - r.queued[0] - r.queued[1] - r.queued[2]) },
	"running":   func(r *funcRow) float64 { return float64(r.run) },
	"workers":   func(r *funcRow) float64 { return float64(r.work) },
	"total":     func(r *funcRow) float64 { return float64(r.total) },
	"completed": func(r *funcRow) float64 { return float64(r.events[sched.EventCompleted]) },
	"failed":    func(r *funcRow) float64 { return float64(failedOf(&r.events)) },
	"oldest":    func(r *funcRow) float64 { return r.oldest.Seconds() },
	// Stuck first (desc=1), then by how many wait.
	"stuck": func(r *funcRow) float64 {
		q := float64(r.queued[0] + r.queued[1] + r.queued[2])
		if q > 0 && (r.work == 0 || r.paused) {
			return 1e15 + q
		}
		return q
	},
	"rate": func(r *funcRow) float64 {
		if math.IsNaN(r.rate) {
			return -1
		}
		return r.rate
	},
}

// firstK is the first k of n rows by order (which compares two rows'
// indexes, as cmp.Compare), as their indexes: the first page costs n log k
// comparisons, not a sort of all n.
func firstK(n, k int, order func(i, j int32) int) []int32 {
	k = min(k, n)
	if k <= 0 {
		return nil
	}
	if k > n/2 {
		idx := make([]int32, n)
		for i := range idx {
			idx[i] = int32(i)
		}
		slices.SortFunc(idx, order)
		return idx[:k]
	}
	before := func(i, j int32) bool { return order(i, j) < 0 }
	// A heap of the k first seen so far, the last of them on top.
	h := make([]int32, 0, k)
	after := func(a, b int) bool { return before(h[b], h[a]) }
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && after(c+1, c) {
				c++
			}
			if !after(c, i) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for i := range int32(n) {
		switch {
		case len(h) < k:
			h = append(h, i)
			for c := len(h) - 1; c > 0; {
				p := (c - 1) / 2
				if !after(c, p) {
					break
				}
				h[c], h[p] = h[p], h[c]
				c = p
			}
		case before(i, h[0]):
			h[0] = i
			down(0)
		}
	}
	// Pop them all, last first.
	out := make([]int32, len(h))
	for j := len(h) - 1; j >= 0; j-- {
		out[j] = h[0]
		h[0] = h[len(h)-1]
		h = h[:len(h)-1]
		down(0)
	}
	return out
}

// containsFold reports whether s holds sub, ASCII letters matched
// without regard to case, without allocating: it runs once per function.
func containsFold(s, sub string) bool {
	if len(sub) > len(s) {
		return false
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}
