package ops

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/sched"
)

func getJSON(t *testing.T, srv *Server, url string, v any) {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", url, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v\n%s", url, err, rec.Body)
	}
}

func getStatus(t *testing.T, srv *Server, url string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", url, nil))
	return rec.Code
}

// /api/functions searches, sorts and pages on the server.
func TestAPIFunctions(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	c := sc.NewClient(nopListener{})
	for i := range 30 {
		fn := fmt.Appendf(nil, "job-%02d", i)
		for range i % 7 {
			c.Submit(&sched.SubmitReq{Func: fn, Background: true, Priority: sched.Low})
		}
		sc.CreateFunc(fn)
	}
	sc.CreateFunc([]byte("Mail\xff"))
	w := sc.NewWorker(nopWaker{})
	w.CanDo([]byte("job-06"), 0)
	w.Grab() // job-06: 5 queued, 1 running
	srv := New(Config{Sched: sc})

	names := func(p funcPage) string {
		var out []string
		for _, f := range p.Functions {
			out = append(out, f.Name)
		}
		return strings.Join(out, " ")
	}
	const all = "Mail\\xff job-00 job-01 job-02 job-03 job-04 job-05 job-06 job-07 job-08 job-09 job-10 job-11 job-12 job-13 job-14 job-15 job-16 job-17 job-18 job-19 job-20 job-21 job-22 job-23 job-24 job-25 job-26 job-27 job-28 job-29"
	for _, tc := range []struct {
		query string
		total int
		names string
	}{
		{"", 31, all},
		{"limit=3", 31, "Mail\\xff job-00 job-01"},
		{"limit=3&offset=29", 31, "job-28 job-29"},
		{"offset=40", 31, ""},
		{"q=MAIL", 1, "Mail\\xff"},
		{"q=job-2", 10, "job-20 job-21 job-22 job-23 job-24 job-25 job-26 job-27 job-28 job-29"},
		{"q=nothing", 0, ""},
		{"sort=name&desc=1&limit=2", 31, "job-29 job-28"},
		// Most queued at low first, ties by name.
		{"sort=low&desc=1&limit=5", 31, "job-13 job-20 job-27 job-05 job-06"},
		{"sort=running&desc=1&limit=1", 31, "job-06"},
		{"sort=total&desc=1&limit=4", 31, "job-06 job-13 job-20 job-27"},
		{"sort=bogus&limit=1", 31, "Mail\\xff"},
		{"limit=-5&offset=-3", 31, all}, // the defaults: the first 50
	} {
		var p funcPage
		getJSON(t, srv, "/api/functions?"+tc.query, &p)
		if p.Total != tc.total || names(p) != tc.names {
			t.Errorf("%q: %d functions, %q; want %d, %q", tc.query, p.Total, names(p), tc.total, tc.names)
		}
	}
	var p funcPage
	getJSON(t, srv, "/api/functions?q=job-06", &p)
	if f := p.Functions[0]; f.Queued != [3]int{0, 0, 5} || f.Running != 1 || f.Workers != 1 || f.Total != 6 || f.Later != 0 {
		t.Errorf("job-06: %+v", f)
	}
}

// /api/overview's rates and percentiles come from the sampler's ring;
// its totals from the scheduler at once.
func TestAPIOverview(t *testing.T) {
	clk := time.Unix(1000, 0)
	sc := sched.New(sched.Config{Tick: -1, Latency: true})
	defer sc.Close()
	srv := New(Config{Sched: sc, Version: "1.2.3", Protocol: func(s sched.Source) string {
		return map[sched.Source]string{1: "gear"}[s]
	}, Store: func() StoreStats { return StoreStats{Failure: "no space left on device", WriteErrors: 1} }})
	srv.AddConns(Conns{Protocol: "gear", Open: func() int { return 4 }})
	c := sc.NewClient(nopListener{})
	c.SetSource(1)
	w := sc.NewWorker(nopWaker{})
	w.CanDo([]byte("f"), 0)

	srv.sampler.take(clk)
	for range 20 {
		c.Submit(&sched.SubmitReq{Func: []byte("f"), Background: true})
	}
	for range 10 {
		w.Update(w.Grab().ID(), &sched.Update{Kind: sched.Complete})
	}
	srv.sampler.take(clk.Add(5 * time.Second))
	w.Grab() // one running

	var o struct {
		Version                  string
		State                    string
		Functions, Jobs, Running int
		Rates                    map[string]*float64
		Wait                     map[string]*float64
		Protocols                []map[string]any
		Series                   map[string][]*float64
		Store                    *struct {
			Up          bool
			Failure     string
			WriteErrors uint64 `json:"write_errors"`
		}
		Refused map[string]uint64
	}
	getJSON(t, srv, "/api/overview", &o)
	if o.Store == nil || o.Store.Up || o.Store.Failure != "no space left on device" || o.Store.WriteErrors != 1 {
		t.Errorf("store: %+v", o.Store)
	}
	if _, ok := o.Refused["queue_full"]; !ok || len(o.Refused) != int(sched.NumRefusals) {
		t.Errorf("refused: %v", o.Refused)
	}
	if o.Version != "1.2.3" || o.State != "starting" || o.Functions != 1 || o.Jobs != 10 || o.Running != 1 {
		t.Errorf("overview: %+v", o)
	}
	if r := o.Rates; r["submitted"] == nil || *r["submitted"] != 4 || *r["completed"] != 2 || *r["failed"] != 0 {
		t.Errorf("rates over 5 s of 20 submits, 10 completions: %v %v %v", *r["submitted"], *r["completed"], *r["failed"])
	}
	if p := o.Wait["p99"]; p == nil || *p <= 0 || *p > 0.1 {
		t.Errorf("queue wait p99: %v", p)
	}
	if s := o.Series["submitted"]; len(s) != 1 || *s[0] != 4 {
		t.Errorf("series: %v", o.Series)
	}
	if len(o.Protocols) != 1 || o.Protocols[0]["name"] != "gear" || o.Protocols[0]["connections"] != 4.0 || o.Protocols[0]["submitted"] != 20.0 {
		t.Errorf("protocols: %v", o.Protocols)
	}
}

// The sampler's ring keeps the last ringSize samples, oldest first.
func TestSamplerRing(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	p := newSampler(sc)
	start := time.Unix(0, 0)
	for i := range ringSize + 7 {
		p.take(start.Add(time.Duration(i) * time.Second))
	}
	ss := p.samples()
	if len(ss) != ringSize || !ss[0].at.Equal(start.Add(7*time.Second)) || !ss[ringSize-1].at.Equal(start.Add((ringSize+6)*time.Second)) {
		t.Errorf("%d samples from %v to %v", len(ss), ss[0].at, ss[len(ss)-1].at)
	}
}

func TestQuantile(t *testing.T) {
	var h sched.Histogram
	if q := quantile(&h, .5); !math.IsNaN(q) {
		t.Errorf("empty: %v", q)
	}
	for range 50 {
		h.Observe(time.Millisecond) // bucket (500µs, 1ms]
	}
	for range 50 {
		h.Observe(3 * time.Second) // bucket (2.5s, 5s]
	}
	for _, tc := range []struct{ q, want float64 }{
		{.5, 0.001}, // the top of the first half's bucket
		{.25, 0.00075},
		{.99, 2.5 + 2.5*0.98},
		{1, 5},
	} {
		if got := quantile(&h, tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%v = %v, want %v", tc.q, got, tc.want)
		}
	}
	h = sched.Histogram{}
	h.Observe(2 * time.Hour)
	if got := quantile(&h, .5); got != 3600 {
		t.Errorf("past the last bound: %v, want 3600", got)
	}
}

// The page and its files are served from the binary; nothing else is.
func TestPage(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	h := New(Config{Sched: sc}).Handler()
	for path, want := range map[string]string{
		"/":          `<script src="app.js">`,
		"/app.js":    "api/functions",
		"/style.css": ".spark",
		"/page.go":   "404",
		"/nope":      "404",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if got := rec.Body.String(); !strings.Contains(got, want) && !(want == "404" && rec.Code == 404) {
			t.Errorf("GET %s: %d, no %q in it", path, rec.Code, want)
		}
	}
}

// firstK gives what a full sort's first k would, for every k.
func TestFirstK(t *testing.T) {
	vals := []int{5, 3, 9, 3, 0, 7, 7, 1, 8, 2, 6, 4, 9, 0}
	order := func(i, j int32) int {
		if vals[i] != vals[j] {
			return vals[i] - vals[j]
		}
		return int(i - j)
	}
	var want []int32
	for i := range int32(len(vals)) {
		want = append(want, i)
	}
	slices.SortFunc(want, order)
	for k := 0; k <= len(vals)+2; k++ {
		got := firstK(len(vals), k, order)
		if !slices.Equal(got, want[:min(k, len(vals))]) {
			t.Errorf("k=%d: %v, want %v", k, got, want[:min(k, len(vals))])
		}
	}
	if got := firstK(0, 5, order); len(got) != 0 {
		t.Errorf("no rows: %v", got)
	}
}
