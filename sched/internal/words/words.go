// Package words hands out large arrays of 64-bit words that live outside
// the Go heap, for tables that hold no pointers and are replaced whole as
// they grow: the memory of one freed goes back to the kernel at once.
// On the Go heap it would stay until the collector's next cycle, which
// with hundreds of megabytes live may be far off: a table of a million
// slots moved into one of two million was 8 MB of resident garbage.
package words

import "runtime"

// Min is the fewest words an array is mapped for: a smaller one is on the
// Go heap, and Free leaves it to the collector.
const Min = 8192 // 64 KiB

// Array is n zeroed words, W.
type Array struct {
	W      []uint64
	mapped bool
	unmap  runtime.Cleanup
}

// Make returns an array of n zeroed words, mapped when n >= Min and the
// platform maps memory. One that is dropped without Free is unmapped once
// the collector finds it unreachable.
func Make(n int) *Array {
	if n >= Min {
		if w := mapWords(n); w != nil {
			a := &Array{W: w, mapped: true}
			a.unmap = runtime.AddCleanup(a, unmapWords, w)
			return a
		}
	}
	return &Array{W: make([]uint64, n)}
}

// Free gives a's memory back now; a and its words must not be used again.
// A nil a is nothing to free.
func (a *Array) Free() {
	if a == nil {
		return
	}
	if a.mapped {
		a.unmap.Stop()
		unmapWords(a.W)
	}
	a.W, a.mapped = nil, false
}
