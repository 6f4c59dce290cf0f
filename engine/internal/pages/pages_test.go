package pages

import (
	"bytes"
	"testing"
	"time"
)

func TestAllocGrowFree(t *testing.T) {
	base := Held()
	tests := []struct {
		name       string
		alloc      int
		fill       int
		tail       int // grow a tail of the buffer starting here (0: the buffer)
		grow, want int
	}{
		{"in place", 4096, 100, 0, 8192, 8192},
		{"rounded up", 100, 100, 0, 5000, 8192},
		{"large", 128 << 10, 100 << 10, 0, 17 << 20, 17 << 20},
		{"a tail", 1 << 20, 1 << 20, 1000, 2 << 20, 2<<20 + 4096},
		{"no growth needed", 8192, 10, 0, 100, 8192},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := Alloc(tc.alloc)
			if b == nil || len(b) != 0 || cap(b) < tc.alloc || cap(b)%pageSize != 0 {
				t.Fatalf("Alloc(%d): len %d cap %d", tc.alloc, len(b), cap(b))
			}
			for i := range tc.fill {
				b = append(b, byte(i*7))
			}
			want := bytes.Clone(b[tc.tail:])
			b = b[tc.tail:]
			if !Owned(b) {
				t.Fatal("not Owned")
			}
			g, ok := Grow(b, tc.grow)
			if !ok {
				t.Fatal("Grow failed")
			}
			if !bytes.Equal(g, want) {
				t.Fatal("Grow lost the bytes")
			}
			if cap(g) < tc.grow || cap(g) > tc.want {
				t.Fatalf("cap %d after Grow(%d), want %d..%d", cap(g), tc.grow, tc.grow, tc.want)
			}
			// The whole room is writable.
			g = g[:cap(g)]
			g[len(g)-1] = 1
			if !Owned(g[10:]) {
				t.Fatal("a tail of the grown buffer is not Owned")
			}
			if !Free(g[10:]) {
				t.Fatal("Free of a tail found no buffer")
			}
			if Owned(g) || Free(g) {
				t.Fatal("freed twice")
			}
		})
	}
	waitHeld(t, base)
}

// waitHeld waits for the freed buffers to be unmapped, coolOff after
// they were freed.
func waitHeld(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * coolOff)
	for Held() != want {
		if time.Now().After(deadline) {
			t.Fatalf("Held %d long after freeing everything, want %d", Held(), want)
		}
		time.Sleep(coolOff / 20) // polling a timer's effect, bounded above
	}
}

// A buffer freed while a reader still has it reads as it did, for coolOff.
func TestFreedStaysReadable(t *testing.T) {
	base := Held()
	b := Alloc(1 << 20)
	b = append(b, "payload"...)
	if !Free(b) {
		t.Fatal("Free found no buffer")
	}
	if string(b) != "payload" {
		t.Fatalf("read %q after Free", b)
	}
	if Held() <= base {
		t.Fatal("a buffer freed just now is unmapped already")
	}
	waitHeld(t, base)
}

func TestForeign(t *testing.T) {
	heap := make([]byte, 0, 1<<20)
	if Owned(heap) || Free(heap) || Owned(nil) || Free(nil) {
		t.Fatal("a heap buffer is taken for a mapping")
	}
	if g, ok := Grow(heap, 2<<20); ok || cap(g) != cap(heap) {
		t.Fatal("Grow of a heap buffer")
	}
	b := Alloc(4096)
	defer Free(b)
	if Owned(b[:0:10]) {
		t.Fatal("a slice that stops short of the end is taken for the mapping")
	}
}

func BenchmarkAllocFree(b *testing.B) {
	for b.Loop() {
		buf := Alloc(1 << 20)
		Free(buf)
	}
}
