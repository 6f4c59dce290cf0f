package ops

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"time"

	"switchyard/sched"
)

// failureJSON is one failure on /api/failures and /api/function.
type failureJSON struct {
	Function string    `json:"function"`
	At       time.Time `json:"at"`
	ID       uint64    `json:"id"`
	Unique   string    `json:"unique"`
	Protocol string    `json:"protocol"` // the submitter's
	Kind     string    `json:"kind"`     // fail, exception, retries, queue_timeout
	Worker   string    `json:"worker"`
	Retried  bool      `json:"retried"` // the job went back to its queue
	Text     string    `json:"text"`
}

func (s *Server) failureJSONOf(f *sched.Failure) failureJSON {
	return failureJSON{Function: labelValue(f.Func), At: f.At, ID: f.ID, Unique: labelValue(f.Unique),
		Protocol: s.protocol(f.Source), Kind: f.Kind.String(), Worker: f.Worker, Retried: f.Retried,
		Text: labelValue(f.Text)}
}

type failurePage struct {
	Total    int           `json:"total"` // failures kept that match
	Limit    int           `json:"limit"`
	Failures []failureJSON `json:"failures"`
}

// serveFailures is /api/failures?q=&limit=: the latest failures kept
// (each function keeps its last --failures), of the functions whose name
// holds q, newest first, limit of them (50; 1000 at most).
func (s *Server) serveFailures(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	_, limit := pageOf("", q.Get("limit"))
	needle := q.Get("q")
	var all []sched.Failure
	s.cfg.Sched.FailuresChunked(func(c []sched.Failure) {
		for _, f := range c {
			if needle == "" || containsFold(f.Func, needle) {
				all = append(all, f)
			}
		}
	})
	slices.SortFunc(all, func(a, b sched.Failure) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	page := failurePage{Total: len(all), Limit: limit, Failures: []failureJSON{}}
	for i := range all[:min(limit, len(all))] {
		page.Failures = append(page.Failures, s.failureJSONOf(&all[i]))
	}
	writeJSON(w, &page)
}

// waitingJSON is a job at the head of a function's queue.
type waitingJSON struct {
	ID         uint64 `json:"id"`
	Unique     string `json:"unique"`
	Priority   string `json:"priority"`
	Background bool   `json:"background"`
	Retries    uint32 `json:"retries"`
	Clients    int    `json:"clients"`
	Wait       num    `json:"wait"` // seconds
}

type funcDetail struct {
	Function funcJSON      `json:"function"`
	Waiting  []waitingJSON `json:"waiting"` // the first jobs a worker would take, in order
	Failures []failureJSON `json:"failures"`
}

// serveFunction is /api/function?name=&waiting=: one function's row,
// the first waiting (20; sched.MaxWaiting at most) jobs a worker would
// take from it, in that order, and its failures kept, newest first. 404
// for a function the scheduler does not know.
func (s *Server) serveFunction(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := []byte(q.Get("name"))
	n, err := strconv.Atoi(q.Get("waiting"))
	if err != nil || n < 0 {
		n = 20
	}
	st, ok := s.cfg.Sched.FuncStatOf(name)
	if !ok {
		http.Error(w, "no such function", http.StatusNotFound)
		return
	}
	row := funcRow{name: st.Name, queued: st.Queued, total: st.Total(), run: st.Running, work: st.Workers,
		events: st.Events, paused: st.Paused, oldest: st.OldestWait, rate: nan}
	d := funcDetail{Function: s.funcJSONOf(&row, st.Queued[0]+st.Queued[1]+st.Queued[2]),
		Waiting: []waitingJSON{}, Failures: []failureJSON{}}
	ws, _ := s.cfg.Sched.Waiting(name, n)
	for _, j := range ws {
		d.Waiting = append(d.Waiting, waitingJSON{ID: j.ID, Unique: labelValue(j.Unique), Priority: priorityNames[j.Priority],
			Background: j.Background, Retries: j.Retries, Clients: j.Clients, Wait: num(j.Wait.Seconds())})
	}
	for _, f := range s.cfg.Sched.Failures(name, nil) {
		d.Failures = append(d.Failures, s.failureJSONOf(&f))
	}
	writeJSON(w, &d)
}
