//go:build unix

package words

import (
	"fmt"
	"syscall"
	"unsafe"
)

// mapWords maps n zeroed words of anonymous memory.
func mapWords(n int) []uint64 {
	b, err := syscall.Mmap(-1, 0, n*8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		// What the Go heap does when the kernel refuses memory: the
		// process cannot go on.
		panic(fmt.Sprintf("words: mapping %d bytes: %v", n*8, err))
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

func unmapWords(w []uint64) {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*8)
	if err := syscall.Munmap(b); err != nil {
		panic(fmt.Sprintf("words: unmapping %d bytes: %v", len(b), err))
	}
}
