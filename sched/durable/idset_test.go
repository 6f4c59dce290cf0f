package durable

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// The set holds what a map would, whatever the ids: a scheduler's (one
// shard's, 256 apart, or every shard's, dense enough for bitmaps), in
// order or not, added twice, removed when absent.
func TestIDSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   func(r *rand.Rand, i int) uint64
	}{
		{"one shard", func(_ *rand.Rand, i int) uint64 { return uint64(i)<<8 | 7 }},
		{"every shard", func(_ *rand.Rand, i int) uint64 { return uint64(i) }},
		{"random", func(r *rand.Rand, _ int) uint64 { return r.Uint64N(1 << 20) }},
		{"random wide", func(r *rand.Rand, _ int) uint64 { return r.Uint64() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			s, want := newIDSet(0), map[uint64]bool{}
			var added []uint64
			for i := range 200000 {
				id := tc.id(r, i)
				s.add(id)
				want[id] = true
				added = append(added, id)
				if r.IntN(3) == 0 { // a delete: mostly of the oldest, sometimes of any, sometimes of none
					var d uint64
					switch r.IntN(4) {
					case 0:
						d = added[r.IntN(len(added))]
					case 1:
						d = r.Uint64()
					default:
						d = added[0]
						added = added[1:]
					}
					s.remove(d)
					delete(want, d)
				}
				if i%50000 == 0 && s.Len() != len(want) {
					t.Fatalf("after %d: %d ids, want %d", i, s.Len(), len(want))
				}
			}
			got := map[uint64]bool{}
			s.each(func(id uint64) { got[id] = true })
			if !maps.Equal(got, want) || s.Len() != len(want) {
				t.Fatalf("%d ids (%d listed), want %d", s.Len(), len(got), len(want))
			}
			for id := range want {
				if !s.has(id) {
					t.Fatalf("id %d missing", id)
				}
			}
			// each lets fn remove what it is given.
			ids := slices.Collect(maps.Keys(want))
			s.each(func(id uint64) { s.remove(id) })
			if s.Len() != 0 || len(s.pages) != 0 || s.has(ids[0]) {
				t.Fatalf("after removing all: %d ids, %d pages", s.Len(), len(s.pages))
			}
		})
	}
}

// BenchmarkIDSet is the writer's cost of a job: its put, its delete later,
// with a queue that grows (grow) or stays the same length (steady).
func BenchmarkIDSet(b *testing.B) {
	b.Run("grow", func(b *testing.B) {
		s := newIDSet(0)
		for i := 0; b.Loop(); i++ {
			s.add(uint64(i)<<8 | 5)
		}
	})
	b.Run("steady", func(b *testing.B) {
		s := newIDSet(0)
		const live = 10000
		i := 0
		for ; i < live; i++ {
			s.add(uint64(i)<<8 | 5)
		}
		for b.Loop() {
			s.add(uint64(i)<<8 | 5)
			s.remove(uint64(i-live)<<8 | 5)
			i++
		}
	})
}
