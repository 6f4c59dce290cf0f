package replicated

import (
	"math/rand/v2"
	"testing"
)

// checkIndex compares x with the map it should equal.
func checkIndex(t *testing.T, x *index, want map[uint64]span) {
	t.Helper()
	if x.len() != len(want) {
		t.Fatalf("len %d, want %d", x.len(), len(want))
	}
	seen := 0
	x.each(func(id uint64, s span) {
		seen++
		if w, ok := want[id]; !ok || w != s {
			t.Fatalf("each: id %d span %v, want %v (%v)", id, s, w, ok)
		}
	})
	if seen != len(want) {
		t.Fatalf("each: %d ids, want %d", seen, len(want))
	}
	for id, w := range want {
		if s, ok := x.get(id); !ok || s != w {
			t.Fatalf("get %d: %v %v, want %v", id, s, ok, w)
		}
	}
	for li := range x.lanes {
		l := &x.lanes[li]
		if l.Len() > maxPages {
			t.Fatalf("lane %d: a run of %d pages", li, l.Len())
		}
		if l.Len() > 0 && (l.At(0) == nil || l.At(l.Len()-1) == nil) {
			t.Fatalf("lane %d: an empty page at an end of the run", li)
		}
	}
}

// id makes a scheduler's job id: seq in shard.
func id(shard, seq uint64) uint64 { return seq<<laneBits | shard }

func TestIndex(t *testing.T) {
	cases := []struct {
		name string
		next func(rng *rand.Rand, i int) uint64
	}{
		{"one shard, in order", func(_ *rand.Rand, i int) uint64 { return id(7, uint64(i)) }},
		{"every shard, in order", func(_ *rand.Rand, i int) uint64 { return id(uint64(i)%256, uint64(i/256)) }},
		{"random ids", func(rng *rand.Rand, _ int) uint64 { return rng.Uint64() }},
		{"small random ids", func(rng *rand.Rand, _ int) uint64 { return rng.Uint64N(1 << 20) }},
		{"a shard's ids far apart", func(rng *rand.Rand, i int) uint64 {
			return id(3, uint64(i)*uint64(maxPages)*idPageSize/7+rng.Uint64N(3))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			var x index
			want := map[uint64]span{}
			var ids []uint64
			for i := range 30_000 {
				k := c.next(rng, i)
				s := span{chunk: uint32(i), off: uint32(rng.IntN(100)), n: rng.IntN(3)}
				old, had := x.set(k, s)
				if w, ok := want[k]; had != ok || old != w {
					t.Fatalf("set %d: replaced %v %v, want %v %v", k, old, had, w, ok)
				}
				if !had {
					ids = append(ids, k)
				}
				want[k] = s
				// Ended jobs: mostly the oldest, some at random.
				if len(ids) > 5000 || rng.IntN(4) == 0 {
					j := 0
					if rng.IntN(3) == 0 {
						j = rng.IntN(len(ids))
					}
					k := ids[j]
					ids = append(ids[:j], ids[j+1:]...)
					got, ok := x.remove(k)
					if !ok || got != want[k] {
						t.Fatalf("remove %d: %v %v, want %v", k, got, ok, want[k])
					}
					delete(want, k)
					if _, ok := x.remove(k); ok {
						t.Fatalf("removed %d twice", k)
					}
				}
				if i%5000 == 0 {
					checkIndex(t, &x, want)
				}
			}
			checkIndex(t, &x, want)
			for k := range want {
				x.remove(k)
			}
			checkIndex(t, &x, map[uint64]span{})
			for li := range x.lanes {
				if x.lanes[li].Len() != 0 {
					t.Fatalf("lane %d keeps pages once empty", li)
				}
			}
		})
	}
}

// TestIndexFar: an id stored in the map while its page was out of reach
// is found, replaced and removed there once the run has moved to it.
func TestIndexFar(t *testing.T) {
	var x index
	x.set(id(1, 0), span{n: 1})
	farSeq := uint64(maxPages) * idPageSize // one page past the run's bound
	x.set(id(1, farSeq), span{n: 2})
	if len(x.far) != 1 {
		t.Fatalf("%d ids in the map, want the far one", len(x.far))
	}
	x.remove(id(1, 0)) // the run empties; the far id's page is in reach now
	x.set(id(1, farSeq+1), span{n: 3})
	if old, had := x.set(id(1, farSeq), span{n: 4}); !had || old.n != 2 {
		t.Fatalf("replacing the far id: %v %v", old, had)
	}
	checkIndex(t, &x, map[uint64]span{id(1, farSeq): {n: 4}, id(1, farSeq+1): {n: 3}})
	if s, ok := x.remove(id(1, farSeq)); !ok || s.n != 4 {
		t.Fatalf("remove of the far id: %v %v", s, ok)
	}
	checkIndex(t, &x, map[uint64]span{id(1, farSeq+1): {n: 3}})
}

// BenchmarkIndex: a queue's ids on one shard, set then removed a window
// later.
func BenchmarkIndex(b *testing.B) {
	var x index
	const window = 300_000
	for i := range uint64(b.N) {
		x.set(id(5, i), span{n: 100})
		if i >= window {
			x.remove(id(5, i-window))
		}
	}
}
