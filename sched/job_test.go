package sched

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestJobsFillTheirSizeClasses(t *testing.T) {
	if jobSize != 88 {
		t.Errorf("Job is %d bytes, want 88", jobSize)
	}
	// Each class is one of Go's size classes: an object of it takes as
	// many bytes as the class says, as the allocator counts them.
	var before, after runtime.MemStats
	for i, c := range jobClasses {
		if i > 0 && c.size <= jobClasses[i-1].size {
			t.Errorf("class %d (%d bytes) not above the one before", i, c.size)
		}
		j, room := c.new()
		if uintptr(len(room)) != c.size-jobSize {
			t.Errorf("class %d: room for %d bytes, want %d", c.size, len(room), c.size-jobSize)
		}
		if got, want := uintptr(unsafe.Pointer(unsafe.SliceData(room))), uintptr(unsafe.Pointer(j))+jobSize; got != want {
			t.Errorf("class %d: room at %#x, want %#x (just past the Job)", c.size, got, want)
		}
		const n = 1000
		keep := make([]*Job, n)
		runtime.ReadMemStats(&before)
		for k := range keep {
			keep[k], _ = c.new()
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / n; per != uint64(c.size) {
			t.Errorf("class %d: an object takes %d bytes", c.size, per)
		}
		runtime.KeepAlive(keep)
	}
	if last := jobClasses[len(jobClasses)-1].size; int(last-jobSize) != maxInline {
		t.Errorf("maxInline %d, the largest class has room for %d", maxInline, last-jobSize)
	}
}

// TestJobSizes: a job with its unique and a small payload is one object
// of the smallest class that holds them; the benchmarks' (a 36-byte
// unique, as libgearman sends, and 64 bytes of payload) fills 192 bytes.
func TestJobSizes(t *testing.T) {
	for _, tc := range []struct {
		unique, payload int
		want            uint64 // bytes allocated
	}{
		{0, 0, 96},
		{0, 8, 96},
		{0, 64, 160},
		{36, 0, 128},
		{36, 64, 192},
		{36, 68, 192},
		{36, 69, 208},
		{64, 64, 224},
		{0, maxInline, 512},
		{0, maxInline + 1, 96 + 448},       // the payload on its own
		{100, maxInline, 192 + 448},        // likewise
		{maxInline + 1, 8, 96 + 256 + 448}, // the unique in ext
	} {
		r := &SubmitReq{Unique: bytes.Repeat([]byte{'u'}, tc.unique), Payload: bytes.Repeat([]byte{'p'}, tc.payload)}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		j := newJob(r)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got != tc.want {
			t.Errorf("unique %d, payload %d: %d bytes allocated, want %d", tc.unique, tc.payload, got, tc.want)
		}
		if j.Unique() != string(r.Unique) || !bytes.Equal(j.Payload(), r.Payload) {
			t.Errorf("unique %d, payload %d: got unique %q, payload %q", tc.unique, tc.payload, j.Unique(), j.Payload())
		}
	}
}

// TestNewJobPayload: the job keeps a copy unless the caller gave its buffer
// away, whatever the payload's size, in the smallest object that holds it.
func TestNewJobPayload(t *testing.T) {
	for _, unique := range []string{"", "8f14e45f-ceea-467a-9af0-3e2d5b1c0a77"} {
		for _, n := range []int{0, 1, 32, 33, 64, 65, 96, 97, 128, 129, 4096} {
			for _, own := range []bool{false, true} {
				in := make([]byte, n, n+7)
				copy(in, bytes.Repeat([]byte{'p'}, n))
				j := newJob(&SubmitReq{Unique: []byte(unique), Payload: in, OwnPayload: own})
				if p := j.Payload(); !bytes.Equal(p, bytes.Repeat([]byte{'p'}, n)) || (n == 0 && p != nil && !own) {
					t.Fatalf("size %d own %v: payload %q", n, own, p)
				}
				if j.Unique() != unique {
					t.Fatalf("size %d own %v: unique %q, want %q", n, own, j.Unique(), unique)
				}
				if j.is(flagOwned) != own {
					t.Fatalf("size %d: owned %v, want %v", n, j.is(flagOwned), own)
				}
				if own && (cap(j.lent()) != cap(in) || unsafe.SliceData(j.lent()) != unsafe.SliceData(in)) {
					t.Fatalf("size %d: the lent payload's capacity %d, want the caller's %d", n, cap(j.lent()), cap(in))
				}
				if n == 0 {
					continue
				}
				in[0] = 'X' // the caller reuses its buffer
				if shared := j.Payload()[0] == 'X'; shared != own {
					t.Fatalf("size %d own %v: payload shared with the caller: %v", n, own, shared)
				}
				if len(unique)+n <= maxInline && !own {
					// In the job's own allocation, right after the Job and
					// its unique.
					if got, want := uintptr(unsafe.Pointer(unsafe.SliceData(j.Payload()))), uintptr(unsafe.Pointer(j))+jobSize+uintptr(len(unique)); got != want {
						t.Fatalf("size %d: payload at %#x, want %#x (just past the job's unique)", n, got, want)
					}
				}
			}
		}
	}
}

// TestJobUniqueInExt: a unique too long to follow the Job lives in ext.
func TestJobUniqueInExt(t *testing.T) {
	long := strings.Repeat("u", maxInline+1)
	j := newJob(&SubmitReq{Unique: []byte(long), Payload: []byte("p")})
	if j.ulen != uniqueInExt || j.ext == nil || j.Unique() != long || string(j.Payload()) != "p" {
		t.Errorf("ulen %d, unique %d bytes, payload %q", j.ulen, len(j.Unique()), j.Payload())
	}
}

// TestJobPayloadOf4GiB: a payload whose length does not fit the Job's
// 32-bit field is kept whole in its ext. (No 4 GiB is allocated: the test
// only reads the slice's header, which the race detector's pointer checks
// refuse.)
func TestJobPayloadOf4GiB(t *testing.T) {
	if raceEnabled {
		t.Skip("checkptr refuses a slice header longer than its allocation")
	}
	small := make([]byte, 3, 8)
	for _, tc := range []struct {
		name string
		p    []byte
		big  bool
	}{
		{"nil", nil, false},
		{"small", small, false},
		{"4 GiB", unsafe.Slice(unsafe.SliceData(small), 1<<32), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := allocJob(0)
			j.setPayload(tc.p)
			got := j.Payload()
			if len(got) != len(tc.p) || unsafe.SliceData(got) != unsafe.SliceData(tc.p) {
				t.Errorf("payload len %d at %p, want len %d at %p", len(got), unsafe.SliceData(got), len(tc.p), unsafe.SliceData(tc.p))
			}
			if (j.plen == bigPayload) != tc.big {
				t.Errorf("kept in ext: %v, want %v", j.plen == bigPayload, tc.big)
			}
			j.setPayload(small) // a replace with a small one
			if got := j.Payload(); len(got) != 3 || j.plen == bigPayload || (j.ext != nil && j.ext.held != nil) {
				t.Errorf("after a small payload: len %d, plen %d, ext %+v", len(got), j.plen, j.ext)
			}
		})
	}
}

// TestJobReducer: a reducer lives in ext, flagged in attrs, and a replace
// may set or clear it.
func TestJobReducer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reducer []byte
		ext     bool
	}{
		{"none", nil, false},
		{"empty", []byte{}, false},
		{"set", []byte("reduce"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := buildJob(&SubmitReq{Reducer: tc.reducer, Payload: []byte("p")})
			if got := j.Reducer(); got != string(tc.reducer) {
				t.Errorf("Reducer() %q, want %q", got, tc.reducer)
			}
			if (j.ext != nil) != tc.ext {
				t.Errorf("ext made: %v, want %v", j.ext != nil, tc.ext)
			}
			j.setReducer("other")
			if got := j.Reducer(); got != "other" {
				t.Errorf("after setReducer: %q", got)
			}
			j.setReducer("")
			if got := j.Reducer(); got != "" || j.attrs&attrReducer != 0 {
				t.Errorf("after clearing: %q, attrs %b", got, j.attrs)
			}
		})
	}
}
