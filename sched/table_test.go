package sched

import (
	"testing"
	"unsafe"
)

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
		seen := walkAll(&tb, 0, 300, nil)
		for i := 1; i < len(seen); i++ {
			if seen[i].id <= seen[i-1].id {
				t.Fatalf("walk out of order: %d after %d", seen[i].id, seen[i-1].id)
			}
		}
		if len(seen) != len(jobs) {
			t.Fatalf("walk saw %d, want %d", len(seen), len(jobs))
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
	if tb.pages.First() == 0 {
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

// A page whose jobs all ended before its numbers were all handed out is
// kept by remove; if the rest of its numbers go to submits never stored,
// the first put on a later page frees it, and the front moves on.
func TestJobTableFreesAnEmptyBackPage(t *testing.T) {
	var tb jobTable
	tb.put(5, &Job{id: 5})
	tb.remove(5, 5) // numbers up to 5 handed out: page 0 is still filling
	if tb.pages.Len() != 1 {
		t.Fatalf("page 0 freed while its numbers were still being handed out: %d pages", tb.pages.Len())
	}
	// Numbers 6 to 2*pageSize-1 go to coalesced submits: never stored.
	far := uint64(2*pageSize + 3)
	tb.put(far, &Job{id: far})
	if tb.pages.First() != 2 || tb.pages.Len() != 1 || tb.get(far) == nil {
		t.Fatalf("run from page %d, %d pages: the empty page 0 stayed", tb.pages.First(), tb.pages.Len())
	}
	// A late number on the freed page still lands, and goes once it ends.
	tb.put(7, &Job{id: 7})
	if tb.get(7) == nil || tb.n != 2 {
		t.Fatalf("late job 7 lost: n = %d", tb.n)
	}
	tb.remove(7, far)
	if tb.pages.First() != 2 || tb.pages.Len() != 1 {
		t.Fatalf("run from page %d, %d pages after the late job ended", tb.pages.First(), tb.pages.Len())
	}
	// A put on the back page itself keeps it, empty or not.
	tb.remove(far, far)
	tb.put(far+1, &Job{id: far + 1})
	if tb.pages.First() != 2 || tb.get(far+1) == nil {
		t.Fatalf("run from page %d: the back page was not kept for its own numbers", tb.pages.First())
	}
}

// walkAll walks tb from seq in steps of limit slots, calling between(next)
// after each step, and returns the jobs seen.
func walkAll(tb *jobTable, seq uint64, limit int, between func(next uint64)) []*Job {
	var seen []*Job
	for done := false; !done; {
		seq, done = tb.walk(seq, limit, func(j *Job) { seen = append(seen, j) })
		if between != nil && !done {
			between(seq)
		}
	}
	return seen
}

// A walk resumes by number however the table changed between its steps:
// pages trimmed off the front, jobs ended ahead of it, new jobs behind and
// ahead of it.
func TestJobTableWalkResumes(t *testing.T) {
	var tb jobTable
	last := uint64(4*pageSize - 1)
	stored := 0
	for seq := uint64(1); seq <= last; seq++ {
		if seq%7 == 0 {
			continue // taken but never stored
		}
		tb.put(seq, &Job{id: seq})
		stored++
	}
	const (
		ended  = 2*pageSize + 1 // stored, ahead of the walk when it changes
		behind = 7 * 147        // 1029: on page 1, never stored
		ahead  = 4 * pageSize   // a new page
	)
	changed := false
	seen := walkAll(&tb, 0, pageSize/3, func(next uint64) {
		if changed || next < pageSize+10 {
			return
		}
		if next <= behind || next > ended {
			t.Fatalf("walk paused at %d", next)
		}
		changed = true
		for seq := uint64(1); seq < pageSize; seq++ {
			tb.remove(seq, last)
		}
		tb.remove(ended, last)
		tb.put(behind, &Job{id: behind})
		tb.put(ahead, &Job{id: ahead})
	})
	if !changed || tb.pages.First() == 0 {
		t.Fatal("the table did not change under the walk")
	}
	ids := map[uint64]bool{}
	for i, j := range seen {
		if ids[j.id] {
			t.Fatalf("job %d seen twice", j.id)
		}
		ids[j.id] = true
		if i > 0 && j.id <= seen[i-1].id {
			t.Fatalf("walk out of order: %d after %d", j.id, seen[i-1].id)
		}
	}
	if len(seen) != stored || ids[ended] || ids[behind] || !ids[ahead] {
		t.Fatalf("saw %d jobs, want %d; ended job seen %v, job behind seen %v, job ahead seen %v",
			len(seen), stored, ids[ended], ids[behind], ids[ahead])
	}
	// Starting past the end, or on an empty table, is done at once.
	if _, done := tb.walk(1<<40, 1, func(*Job) { t.Fatal("job past the end") }); !done {
		t.Fatal("walk past the end not done")
	}
	var empty jobTable
	if _, done := empty.walk(0, 1, func(*Job) { t.Fatal("job in an empty table") }); !done {
		t.Fatal("walk of an empty table not done")
	}
}

// A page is 8 KiB, one of Go's size classes: not a byte over.
func TestJobPageFillsItsSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(jobPage{}); size != 8192 {
		t.Errorf("a page is %d bytes, want 8192", size)
	}
}
