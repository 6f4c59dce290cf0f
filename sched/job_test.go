package sched

import (
	"bytes"
	"testing"
	"unsafe"
)

func TestJobsFillTheirSizeClasses(t *testing.T) {
	if jobSize != 160 {
		t.Errorf("Job is %d bytes, want 160", jobSize)
	}
	if n, room := unsafe.Sizeof(jobWithPayload224{}), len(jobWithPayload224{}.data); n != 224 || room < 64 {
		t.Errorf("jobWithPayload224 is %d bytes with room for %d; want 224 with room for 64", n, room)
	}
	if n := unsafe.Sizeof(jobWithPayload256{}); n != 256 {
		t.Errorf("jobWithPayload256 is %d bytes, want 256", n)
	}
}

// TestNewJobPayload: the job keeps a copy unless the caller gave its buffer
// away, whatever the payload's size.
func TestNewJobPayload(t *testing.T) {
	small, large := len(jobWithPayload224{}.data), len(jobWithPayload256{}.data)
	for _, n := range []int{0, 1, small, small + 1, large, large + 1, 4096} {
		for _, own := range []bool{false, true} {
			in := bytes.Repeat([]byte{'p'}, n)
			j := newJob(&SubmitReq{Payload: in, OwnPayload: own})
			if !bytes.Equal(j.payload, bytes.Repeat([]byte{'p'}, n)) || (n == 0 && j.payload != nil && !own) {
				t.Fatalf("size %d own %v: payload %q", n, own, j.payload)
			}
			if j.owned != own {
				t.Fatalf("size %d: owned %v, want %v", n, j.owned, own)
			}
			if n == 0 {
				continue
			}
			in[0] = 'X' // the caller reuses its buffer
			if shared := j.payload[0] == 'X'; shared != own {
				t.Fatalf("size %d own %v: payload shared with the caller: %v", n, own, shared)
			}
		}
	}
}
