package sched

import (
	"bytes"
	"testing"
	"unsafe"
)

func TestJobWithPayloadFillsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(jobWithPayload{}); n != 256 || smallPayload < 64 {
		t.Fatalf("jobWithPayload is %d bytes with %d for the payload; want 256 with room for 64", n, smallPayload)
	}
}

// TestNewJobPayload: the job keeps a copy unless the caller gave its buffer
// away, whatever the payload's size.
func TestNewJobPayload(t *testing.T) {
	for _, n := range []int{0, 1, int(smallPayload) - 1, int(smallPayload), int(smallPayload) + 1, 4096} {
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
