package sched

// function is everything a shard knows about one function name.
type function struct {
	name     string
	seq      uint64 // creation order, for listings
	queues   [numPriorities]jobList
	delayed  int // jobs waiting in the wheel
	running  int
	workers  int                // registered abilities
	maxQueue [numPriorities]int // 0 = unlimited
	unique   map[string]*Job    // coalescing index: key -> live job
	sleepers abilityList        // abilities whose worker slept on this function
}

func newFunction(name string, seq uint64) *function {
	return &function{name: name, seq: seq, unique: make(map[string]*Job)}
}

func (f *function) queued() int {
	return f.queues[High].n + f.queues[Normal].n + f.queues[Low].n
}

// total is what gearmand reports as TOTAL: queued, delayed and running.
func (f *function) total() int { return f.queued() + f.delayed + f.running }

func (f *function) pop() *Job {
	for p := range f.queues {
		if j := f.queues[p].popFront(); j != nil {
			return j
		}
	}
	return nil
}
