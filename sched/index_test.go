package sched

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"switchyard/sched/internal/words"
)

// The index against a Go map: random sets, overwrites and deletes through
// growth, shrinking and resizes under way.
func TestKeyIndexAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f := newIndexFixture()
	x := f.x
	model := map[string]*Job{}
	for op := 0; op < 300000; op++ {
		// Phases that grow, then empty, then grow again.
		span := 5000
		if (op/50000)%2 == 1 {
			span = 50
		}
		k := fmt.Sprint("k", rng.IntN(span))
		switch r := rng.IntN(10); {
		case r < 5:
			j := f.job(k)
			x.set(k, j)
			if old := model[k]; old != nil {
				f.end(old) // replaced: it may end, and the index must not miss it
			}
			model[k] = j
		case r < 8:
			if j := model[k]; j != nil {
				x.del(k)
				f.end(j)
				delete(model, k)
			}
		default:
			if got := x.get(k); got != model[k] {
				t.Fatalf("op %d: get(%s) = %p, want %p", op, k, got, model[k])
			}
		}
		if x.len() != len(model) {
			t.Fatalf("op %d: len %d, want %d", op, x.len(), len(model))
		}
	}
	for k, j := range model {
		if x.get(k) != j {
			t.Fatalf("%s lost", k)
		}
	}
	if len(x.cur) > 4*indexMin*len(model)+64 {
		t.Errorf("%d slots for %d keys after the deletions", len(x.cur), len(model))
	}
}

// Churn of distinct keys, as a queue has: bursts of new names, with
// random ones deleted. Resizes start while others are under way and while
// the table is mostly deleted slots; the index must keep room for every
// key still to be moved (it once finished a move into a full table and
// probed for ever under the shard lock).
func TestKeyIndexChurn(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		f := newIndexFixture()
		x := f.x
		model := map[string]*Job{}
		var names []string
		next := 0
		for round := 0; round < 400; round++ {
			for range rng.IntN(40) {
				k := fmt.Sprint("n", next)
				next++
				j := f.job(k)
				x.set(k, j)
				model[k] = j
				names = append(names, k)
				x.checkRoom(t)
			}
			for range rng.IntN(40) {
				if len(names) == 0 {
					break
				}
				i := rng.IntN(len(names))
				k := names[i]
				names[i] = names[len(names)-1]
				names = names[:len(names)-1]
				x.del(k)
				f.end(model[k])
				delete(model, k)
				x.checkRoom(t)
			}
			if x.len() != len(model) {
				t.Fatalf("seed %d round %d: len %d, want %d", seed, round, x.len(), len(model))
			}
		}
		for k, j := range model {
			if x.get(k) != j {
				t.Fatalf("seed %d: %s lost", seed, k)
			}
		}
	}
}

// checkRoom fails t unless the index's invariants hold: the keys still to
// be moved are counted, and they and every slot ever used in cur fit in
// three quarters of it, so probes always end at an empty slot.
func (x *keyIndex) checkRoom(t *testing.T) {
	t.Helper()
	pending, live := 0, 0
	for _, s := range x.old[x.moved:] {
		if s != slotEmpty && s != slotDeleted {
			pending++
		}
	}
	for _, s := range x.cur {
		if s != slotEmpty && s != slotDeleted {
			live++
		}
	}
	if pending != x.pending || live+pending != x.live {
		t.Fatalf("%d keys to move (counted %d), %d in cur, %d live counted", pending, x.pending, live, x.live)
	}
	if (x.used+x.pending)*4 > len(x.cur)*3 {
		t.Fatalf("%d slots used and %d keys to move in a table of %d", x.used, x.pending, len(x.cur))
	}
}

// No insert pays for moving the whole table: with a million keys, the
// slowest 10k inserts cost about what the fastest do.
func TestKeyIndexGrowsIncrementally(t *testing.T) {
	f := newIndexFixture()
	x := f.x
	keys := make([]*Job, 1_000_000)
	for i := range keys {
		keys[i] = f.job(fmt.Sprint("job-", i))
	}
	worst := time.Duration(0)
	for i := 0; i < len(keys); i += 10000 {
		start := time.Now()
		for _, j := range keys[i : i+10000] {
			x.set(j.Unique(), j)
		}
		worst = max(worst, time.Since(start))
	}
	if x.len() != len(keys) {
		t.Fatalf("len %d", x.len())
	}
	for _, j := range keys[:1000] {
		if x.get(j.Unique()) != j {
			t.Fatalf("%s lost", j.Unique())
		}
	}
	t.Logf("slowest 10k inserts: %v", worst) // a benchmark, not an assertion: see BenchmarkKeyIndexSet
}

func BenchmarkKeyIndexSet(b *testing.B) {
	f := newIndexFixture()
	x := f.x
	keys := make([]*Job, b.N)
	for i := range keys {
		keys[i] = f.job(fmt.Sprint("job-", i))
	}
	b.ResetTimer()
	for _, j := range keys {
		x.set(j.Unique(), j)
	}
}

// indexFixture is a key index over a job table of its own, as a
// function's is over its shard's.
type indexFixture struct {
	jobs jobTable
	x    *keyIndex
	seq  uint64
}

func newIndexFixture() *indexFixture {
	f := &indexFixture{}
	f.x = newKeyIndex(&f.jobs, 0)
	return f
}

// job is a new job whose unique is k, in the fixture's table.
func (f *indexFixture) job(k string) *Job {
	f.seq++
	j := newJob(&SubmitReq{Unique: []byte(k)})
	j.id = f.seq
	f.jobs.put(f.seq, j)
	return j
}

// end takes j out of the table, as forget does once the index has let it
// go.
func (f *indexFixture) end(j *Job) { f.jobs.remove(j.id, f.seq) }

// A table whose move has ended is given back at once, and so is every
// table of an index dropped (see forgetUnique): the large ones are mapped
// outside the Go heap, where nothing would free them later.
func TestKeyIndexFreesItsTables(t *testing.T) {
	f := newIndexFixture()
	x := f.x
	var tables []*words.Array
	for i := range 50_000 {
		x.set(fmt.Sprint("k", i), f.job(fmt.Sprint("k", i)))
		if len(tables) == 0 || tables[len(tables)-1] != x.curMem {
			tables = append(tables, x.curMem)
		}
		for _, m := range tables[:len(tables)-1] {
			if m.W != nil && m != x.oldMem {
				t.Fatalf("after %d keys: a table of %d slots neither in use nor freed", i+1, len(m.W))
			}
		}
	}
	if len(tables) < 10 || len(x.cur) < words.Min {
		t.Fatalf("%d tables, the last of %d slots: no mapped one", len(tables), len(x.cur))
	}
	x.free()
	for _, m := range tables {
		if m.W != nil {
			t.Fatalf("a table of %d slots left after free", len(m.W))
		}
	}
}
