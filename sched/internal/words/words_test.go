package words

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rss is the process's resident memory, from /proc (Linux), or -1.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

func TestMakeAndFree(t *testing.T) {
	for _, n := range []int{0, 1, Min - 1, Min, 4 * Min} {
		a := Make(n)
		if len(a.W) != n {
			t.Fatalf("Make(%d): %d words", n, len(a.W))
		}
		if runtime.GOOS == "linux" && a.mapped != (n >= Min) {
			t.Errorf("Make(%d): mapped %v", n, a.mapped)
		}
		for i := range a.W {
			if a.W[i] != 0 {
				t.Fatalf("Make(%d): word %d is %#x", n, i, a.W[i])
			}
			a.W[i] = uint64(i)
		}
		a.Free()
		if a.W != nil {
			t.Errorf("Free left %d words", len(a.W))
		}
		a.Free() // twice is nothing
	}
	var none *Array
	none.Free()
}

// A freed array's memory leaves the process's resident set at once, with
// no collection in between.
func TestFreeGivesMemoryBack(t *testing.T) {
	if rss(t) < 0 {
		t.Skip("no /proc/self/statm")
	}
	const n = 32 << 20 / 8 // 32 MiB
	a := Make(n)
	for i := range a.W {
		a.W[i] = 1 // touched: resident
	}
	full := rss(t)
	a.Free()
	after := rss(t)
	if full-after < 30<<20 {
		t.Errorf("RSS %d MiB with the array touched, %d MiB after Free: want 32 MiB less", full>>20, after>>20)
	}
}

// An array dropped without Free is unmapped once collected.
func TestDroppedArrayIsUnmapped(t *testing.T) {
	if rss(t) < 0 {
		t.Skip("no /proc/self/statm")
	}
	before := rss(t)
	func() {
		a := Make(32 << 20 / 8)
		for i := range a.W {
			a.W[i] = 1
		}
	}()
	// The cleanup runs on the runtime's goroutine for them once a cycle
	// has found the array unreachable: collect until it has.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		if rss(t)-before < 8<<20 {
			return
		}
		runtime.Gosched()
	}
	t.Errorf("RSS %d MiB above where it was before a 32 MiB array, dropped and collected", (rss(t)-before)>>20)
}
