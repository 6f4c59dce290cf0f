// Package pages allocates large buffers straight from the kernel: an
// anonymous mapping per buffer, grown in place or moved by the kernel
// (mremap), never copied, and handed back whole (munmap) the moment it is
// freed.
//
// A large packet's buffer taken from Go's heap is zeroed when allocated,
// which on memory the heap gave back to the kernel faults in every page
// of it at once: a 16 MiB buffer held its event loop for 80 ms on a VM
// where a page costs 20 µs, and each doubling copied the prefix into new
// pages besides. A mapping's pages are faulted in by the reads that fill
// them, a bounded number per event, and a freed buffer leaves the process
// at once, not at the scavenger's pace.
//
// A buffer is known by its end: a slice whose capacity reaches a
// mapping's end (the buffer, or any tail of it, such as a job's payload)
// names that mapping. The memory is the caller's to manage, as with C's
// malloc, with one allowance: a freed buffer stays mapped, untouched, for
// coolOff before it is unmapped, so a reader that was handed it just
// before it was freed (a write of a job's payload racing the job's end)
// reads what it would have read, as with the heap, and does not fault.
package pages

import (
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pageSize rounds every mapping.
var pageSize = unix.Getpagesize()

type region struct {
	base unsafe.Pointer // outside Go's heap: the collector ignores it
	size int
}

var (
	mu      sync.Mutex
	regions = map[uintptr]region{} // by end address
	held    int64                  // bytes mapped, live or cooling
	cooling []cold                 // freed, oldest first
	timer   *time.Timer            // the unmapping of cooling's head, if set
)

// cold is a freed mapping, and when it was freed.
type cold struct {
	region
	at time.Time
}

// coolOff is how long a freed buffer stays mapped.
const coolOff = time.Second

func roundUp(n int) int { return (n + pageSize - 1) &^ (pageSize - 1) }

// end is the address just past b's capacity.
func end(b []byte) uintptr {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(cap(b))
}

// Alloc returns an empty buffer with room for at least n bytes, or nil if
// the kernel refuses the mapping.
func Alloc(n int) []byte {
	size := roundUp(max(n, 1))
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	mu.Lock()
	regions[uintptr(p)+uintptr(size)] = region{base: p, size: size}
	held += int64(size)
	mu.Unlock()
	return unsafe.Slice((*byte)(p), size)[:0]
}

// Owned says whether b lies at the end of a buffer of this package.
func Owned(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	mu.Lock()
	_, ok := regions[end(b)]
	mu.Unlock()
	return ok
}

// Grow returns b with room for at least n bytes in all (its capacity
// from where b starts), its bytes kept: the mapping grows where it is, or
// the kernel moves its pages elsewhere, without copying them; b must not
// be used afterwards. ok is false, and b unchanged, when b is not this
// package's or the kernel refuses.
func Grow(b []byte, n int) (_ []byte, ok bool) {
	if n <= cap(b) {
		return b, true
	}
	mu.Lock()
	defer mu.Unlock()
	e := end(b)
	r, found := regions[e]
	if !found {
		return b, false
	}
	off := r.size - cap(b) // where b starts in the mapping
	size := roundUp(off + n)
	p, err := unix.MremapPtr(r.base, uintptr(r.size), nil, uintptr(size), unix.MREMAP_MAYMOVE)
	if err != nil {
		return b, false
	}
	delete(regions, e)
	regions[uintptr(p)+uintptr(size)] = region{base: p, size: size}
	held += int64(size - r.size)
	whole := unsafe.Slice((*byte)(p), size)
	return whole[off : off+len(b)], true
}

// Free gives back the buffer b lies at the end of: it is unmapped coolOff
// later. It says whether there was one: false leaves b to the garbage
// collector.
func Free(b []byte) bool {
	if cap(b) == 0 {
		return false
	}
	mu.Lock()
	defer mu.Unlock()
	e := end(b)
	r, ok := regions[e]
	if !ok {
		return false
	}
	delete(regions, e)
	cooling = append(cooling, cold{r, time.Now()})
	if timer == nil {
		timer = time.AfterFunc(coolOff, unmapCooled)
	}
	return true
}

// unmapCooled unmaps the buffers freed at least coolOff ago, and sets the
// timer for the next.
func unmapCooled() {
	mu.Lock()
	now := time.Now()
	n := 0
	for n < len(cooling) && now.Sub(cooling[n].at) >= coolOff {
		n++
	}
	cooled := slices.Clone(cooling[:n])
	cooling = append(cooling[:0], cooling[n:]...)
	timer = nil
	if len(cooling) > 0 {
		timer = time.AfterFunc(coolOff-now.Sub(cooling[0].at), unmapCooled)
	}
	mu.Unlock()
	// Outside the lock: unmapping a large buffer's pages takes a while,
	// and the loops allocate meanwhile.
	var size int64
	for _, c := range cooled {
		unix.MunmapPtr(c.base, uintptr(c.size))
		size += int64(c.size)
	}
	mu.Lock()
	held -= size
	mu.Unlock()
}

// Held is how many bytes the buffers map, live or freed within coolOff
// (their pages count in the resident set only once touched).
func Held() int64 {
	mu.Lock()
	defer mu.Unlock()
	return held
}
