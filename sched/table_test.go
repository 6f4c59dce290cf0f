package sched

import "testing"

func TestJobTable(t *testing.T) {
	var tb jobTable
	jobs := map[uint64]*Job{}
	last := uint64(3*pageSize - 1) // numbers handed out so far
	// Fill three pages, skipping some numbers (taken but never stored).
	for seq := uint64(1); seq < 3*pageSize; seq++ {
		if seq%7 == 0 {
			continue
		}
		j := &Job{id: seq}
		tb.put(seq, j)
		jobs[seq] = j
	}
	check := func() {
		t.Helper()
		if tb.n != len(jobs) {
			t.Fatalf("n = %d, want %d", tb.n, len(jobs))
		}
		for seq := uint64(0); seq < 4*pageSize; seq++ {
			if got := tb.get(seq); got != jobs[seq] {
				t.Fatalf("get(%d) = %v, want %v", seq, got, jobs[seq])
			}
		}
		count := 0
		last := uint64(0)
		tb.each(func(j *Job) {
			if j.id <= last && count > 0 {
				t.Fatalf("each out of order: %d after %d", j.id, last)
			}
			last = j.id
			count++
		})
		if count != len(jobs) {
			t.Fatalf("each saw %d, want %d", count, len(jobs))
		}
	}
	check()
	// Finish everything on the first page but one job: the page stays.
	for seq := uint64(1); seq < pageSize-1; seq++ {
		tb.remove(seq, last)
		delete(jobs, seq)
	}
	check()
	// The last job of page 0 ends: page 0 is trimmed. Page 2 stays partly filled.
	tb.remove(pageSize-1, last)
	delete(jobs, pageSize-1)
	check()
	if tb.base == 0 {
		t.Fatal("empty front page not trimmed")
	}
	// A late number below the front (taken before the trim) still lands.
	late := &Job{id: 5}
	tb.put(5, late)
	jobs[5] = late
	check()
	tb.remove(5, last)
	delete(jobs, 5)
	tb.remove(5, last) // twice is harmless
	for seq := range jobs {
		tb.remove(seq, last)
		delete(jobs, seq)
	}
	check()
	// Numbers still to come on the last page find it.
	for seq := uint64(3 * pageSize); seq < 3*pageSize+10; seq++ {
		j := &Job{id: seq}
		tb.put(seq, j)
		jobs[seq] = j
	}
	check()
}
