package budget

import (
	"slices"
	"sync"
	"testing"
)

type conn struct {
	h   *Holder
	cut bool
}

func holders(b *Budget, n int) []*conn {
	cs := make([]*conn, n)
	for i := range cs {
		c := &conn{}
		c.h = b.Hold(func() { c.cut = true })
		cs[i] = c
	}
	return cs
}

// Over the budget, the largest holders are cut, largest first, until the
// rest is under nine tenths of it; the small ones are left alone.
func TestCutsTheLargestFirst(t *testing.T) {
	b := New(1000)
	cs := holders(b, 4)
	cs[0].h.Set(100)
	cs[1].h.Set(500)
	cs[2].h.Set(300)
	if b.Used() != 900 || b.Cuts() != 0 {
		t.Fatalf("used %d, cuts %d", b.Used(), b.Cuts())
	}
	cs[3].h.Set(200) // 1100: over
	if !cs[1].cut || cs[0].cut || cs[2].cut || cs[3].cut {
		t.Fatalf("cut: %v %v %v %v, want only the 500", cs[0].cut, cs[1].cut, cs[2].cut, cs[3].cut)
	}
	// Still counted until its connection closes, and it takes no more.
	if b.Used() != 1100 || cs[1].h.Take(1) {
		t.Errorf("used %d after the cut", b.Used())
	}
	cs[1].h.Release()
	if b.Used() != 600 {
		t.Errorf("used %d after the release, want 600", b.Used())
	}
	cs[2].h.Set(800) // 1100 again: the 800 goes, and 300 is under 900
	if !cs[2].cut || cs[0].cut || cs[3].cut {
		t.Errorf("second cut: %v %v %v", cs[0].cut, cs[2].cut, cs[3].cut)
	}
}

// Take refuses what the budget cannot give, and cuts nobody for it.
func TestTakeRefuses(t *testing.T) {
	b := New(1000)
	cs := holders(b, 2)
	if !cs[0].h.Take(700) || cs[1].h.Take(400) {
		t.Fatal("Take gave more than the budget")
	}
	if b.Refused() != 1 || b.Cuts() != 0 || b.Used() != 700 {
		t.Errorf("refused %d, cuts %d, used %d", b.Refused(), b.Cuts(), b.Used())
	}
	cs[0].h.Give(300)
	if !cs[1].h.Take(400) || b.Used() != 800 {
		t.Errorf("after a Give: used %d", b.Used())
	}
	if cs[0].h.Held() != 400 || cs[1].h.Held() != 400 {
		t.Errorf("held %d and %d", cs[0].h.Held(), cs[1].h.Held())
	}
}

// No budget: everything is counted, nothing refused or cut; a nil budget
// gives nil holders that do nothing.
func TestNoLimit(t *testing.T) {
	b := New(0)
	cs := holders(b, 1)
	cs[0].h.Set(1 << 40)
	if !cs[0].h.Take(1<<40) || cs[0].cut || b.Used() != 2<<40 {
		t.Errorf("used %d, cut %v", b.Used(), cs[0].cut)
	}
	var nb *Budget
	h := nb.Hold(func() { t.Error("cut") })
	h.Set(5)
	if !h.Take(5) || h.Held() != 0 {
		t.Error("a nil holder counts")
	}
	h.Give(5)
	h.Release()
}

// Concurrent holders add up exactly.
func TestConcurrent(t *testing.T) {
	b := New(0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := b.Hold(func() {})
			for i := range 1000 {
				h.Set(int64(i))
				h.Take(3)
				h.Give(3)
			}
			h.Release()
		}()
	}
	wg.Wait()
	if b.Used() != 0 {
		t.Errorf("used %d after every holder left", b.Used())
	}
}

// Peak is the most held since the last call, even when it was given back
// before anyone looked.
func TestPeak(t *testing.T) {
	b := New(1000)
	h := b.Hold(func() {})
	h.Set(300)
	h.Take(400) // 700
	h.Give(400)
	h.Set(100)
	if p := b.Peak(); p != 700 {
		t.Fatalf("Peak = %d, want 700", p)
	}
	if p := b.Peak(); p != 100 {
		t.Fatalf("Peak after a call = %d, want what is held, 100", p)
	}
	h.Release()
	if p := b.Peak(); p != 100 {
		t.Fatalf("Peak = %d, want 100 (held before the release)", p)
	}
	if p := b.Peak(); p != 0 {
		t.Fatalf("Peak = %d, want 0", p)
	}
}

// The pressure hook is called past half the budget, and again only once
// it is back under a quarter: no flapping around one threshold.
func TestPressure(t *testing.T) {
	b := New(1000)
	var calls []bool
	b.OnPressure(func(p bool) { calls = append(calls, p) })
	h := b.Hold(func() {})
	steps := []struct {
		set  int64
		want []bool
	}{
		{400, nil},
		{501, []bool{true}},
		{300, []bool{true}}, // under half, not under a quarter
		{600, []bool{true}}, // pressed already
		{249, []bool{true, false}},
		{400, []bool{true, false}},
		{900, []bool{true, false, true}},
	}
	for i, s := range steps {
		h.Set(s.set)
		if !slices.Equal(calls, s.want) {
			t.Fatalf("step %d (held %d): calls %v, want %v", i, s.set, calls, s.want)
		}
	}
	h.Release()
	if !slices.Equal(calls, []bool{true, false, true, false}) {
		t.Fatalf("after release: calls %v", calls)
	}
	// A budget of 0 only counts: never pressed.
	z := New(0)
	z.OnPressure(func(bool) { t.Fatal("pressure on a budget of 0") })
	z.Hold(func() {}).Set(1 << 40)
}

// Follow takes and gives what a stream's count moves by, and refuses what
// the budget cannot give, leaving what was taken as it was.
func TestFollow(t *testing.T) {
	b := New(100)
	h := b.Hold(func() {})
	var taken int64
	for _, tc := range []struct {
		want     int64
		ok       bool
		taken    int64
		budgeted int64
	}{
		{60, true, 60, 60},
		{60, true, 60, 60},
		{101, false, 60, 60},
		{20, true, 20, 20},
		{100, true, 100, 100},
		{0, true, 0, 0},
	} {
		if ok := h.Follow(&taken, tc.want); ok != tc.ok || taken != tc.taken || b.Used() != tc.budgeted {
			t.Fatalf("Follow to %d: %v, taken %d, used %d; want %v, %d, %d", tc.want, ok, taken, b.Used(), tc.ok, tc.taken, tc.budgeted)
		}
	}
	var none *Holder // no budget: everything is allowed
	if !none.Follow(&taken, 1<<40) || taken != 1<<40 {
		t.Fatal("a nil holder refused")
	}
}
