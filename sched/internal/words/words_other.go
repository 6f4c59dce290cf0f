//go:build !unix

package words

// mapWords maps nothing where the platform has no mmap: arrays are on the
// Go heap.
func mapWords(n int) []uint64 { return nil }

func unmapWords([]uint64) {}
