package sched

import (
	"bytes"
	"testing"
	"unsafe"
)

func TestJobsFillTheirSizeClasses(t *testing.T) {
	if jobSize != 128 {
		t.Errorf("Job is %d bytes, want 128", jobSize)
	}
	for _, tc := range []struct {
		name       string
		size, room uintptr
		want       uintptr
	}{
		{"jobWithPayload160", unsafe.Sizeof(jobWithPayload160{}), uintptr(len(jobWithPayload160{}.data)), 160},
		{"jobWithPayload192", unsafe.Sizeof(jobWithPayload192{}), uintptr(len(jobWithPayload192{}.data)), 192},
		{"jobWithPayload224", unsafe.Sizeof(jobWithPayload224{}), uintptr(len(jobWithPayload224{}.data)), 224},
		{"jobWithPayload256", unsafe.Sizeof(jobWithPayload256{}), uintptr(len(jobWithPayload256{}.data)), 256},
	} {
		if tc.size != tc.want || tc.room != tc.want-jobSize {
			t.Errorf("%s is %d bytes with room for %d; want %d with room for %d", tc.name, tc.size, tc.room, tc.want, tc.want-jobSize)
		}
	}
	// The benchmarks' 64-byte payload fills the 192-byte class.
	if room := len(jobWithPayload192{}.data); room != 64 {
		t.Errorf("a 192-byte job has room for %d payload bytes, want 64", room)
	}
}

// TestNewJobPayload: the job keeps a copy unless the caller gave its buffer
// away, whatever the payload's size, in the smallest object that holds it.
func TestNewJobPayload(t *testing.T) {
	for _, n := range []int{0, 1, 32, 33, 64, 65, 96, 97, 128, 129, 4096} {
		for _, own := range []bool{false, true} {
			in := bytes.Repeat([]byte{'p'}, n)
			j := newJob(&SubmitReq{Payload: in, OwnPayload: own})
			if p := j.Payload(); !bytes.Equal(p, bytes.Repeat([]byte{'p'}, n)) || (n == 0 && p != nil && !own) {
				t.Fatalf("size %d own %v: payload %q", n, own, p)
			}
			if j.owned != own {
				t.Fatalf("size %d: owned %v, want %v", n, j.owned, own)
			}
			if own && cap(j.Payload()) != cap(in) {
				t.Fatalf("size %d: an owned payload's capacity %d, want the caller's %d", n, cap(j.Payload()), cap(in))
			}
			if n == 0 {
				continue
			}
			in[0] = 'X' // the caller reuses its buffer
			if shared := j.Payload()[0] == 'X'; shared != own {
				t.Fatalf("size %d own %v: payload shared with the caller: %v", n, own, shared)
			}
			if n <= 128 && !own {
				// In the job's own allocation, right after the Job.
				if got, want := uintptr(unsafe.Pointer(unsafe.SliceData(j.Payload()))), uintptr(unsafe.Pointer(j))+jobSize; got != want {
					t.Fatalf("size %d: payload at %#x, want %#x (just past the job)", n, got, want)
				}
			}
		}
	}
}

// TestJobPayloadOf4GiB: a payload whose length does not fit the Job's
// 32-bit fields is kept whole in its ext. (No 4 GiB is allocated: the
// slice's capacity is what counts, and the test only reads its header,
// which the race detector's pointer checks refuse.)
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
		{"cap 4 GiB", unsafe.Slice(unsafe.SliceData(small), 1<<32)[:5], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{}
			j.setPayload(tc.p)
			got := j.Payload()
			if len(got) != len(tc.p) || cap(got) != cap(tc.p) || unsafe.SliceData(got) != unsafe.SliceData(tc.p) {
				t.Errorf("payload len %d cap %d at %p, want len %d cap %d at %p", len(got), cap(got), unsafe.SliceData(got), len(tc.p), cap(tc.p), unsafe.SliceData(tc.p))
			}
			if (j.plen == bigPayload) != tc.big {
				t.Errorf("kept in ext: %v, want %v", j.plen == bigPayload, tc.big)
			}
			j.setPayload(small) // a replace with a small one
			if got := j.Payload(); len(got) != 3 || j.plen == bigPayload || (j.ext != nil && j.ext.bigPayload != nil) {
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
