// Package source numbers switchyard's frontends for the scheduler's
// counts and names them. sched counts each job's events under the
// sched.Source of the client that submitted it and knows no names; the
// numbers live here, in one table, so that no two frontends share one.
package source

import "switchyard/sched"

// The frontends' sources.
const (
	Restored   sched.Source = iota // jobs Replay brought back from the store
	Gearman                        // the Gearman binary protocol (and its admin port)
	Periodic                       // Periodic's clients
	Controller                     // the Worker–Controller protocol (workers only)
	Dwork                          // dwork's hub
	MemoDB                         // the MemoDB broker
	HTTP                           // gearmand's HTTP protocol (-r http)
	numSources
)

var names = [numSources]string{
	Restored:   "restored",
	Gearman:    "gearman",
	Periodic:   "periodic",
	Controller: "controller",
	Dwork:      "dwork",
	MemoDB:     "memodb",
	HTTP:       "http",
}

// Name is src's name, as metrics label it; "" for a number no frontend
// uses.
func Name(src sched.Source) string {
	if int(src) < len(names) {
		return names[src]
	}
	return ""
}

// All lists every source in use, in order.
func All() []sched.Source {
	out := make([]sched.Source, numSources)
	for i := range out {
		out[i] = sched.Source(i)
	}
	return out
}
