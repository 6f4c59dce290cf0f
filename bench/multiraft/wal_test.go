package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestWALGroupCommit: writers that come while a sync runs share the next
// one, and every write is on disk, framed and checked, in one of the
// orders the writers could have had.
func TestWALGroupCommit(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 50
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				if err := w.write([]byte(fmt.Sprintf("w%d-%03d", i, j))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	syncs := w.syncCount()
	w.close()
	if syncs == 0 || syncs > writers*each {
		t.Fatalf("%d syncs for %d writes", syncs, writers*each)
	}
	t.Logf("%d writes, %d syncs", writers*each, syncs)
	b, err := os.ReadFile(filepath.Join(dir, "00000001.seg"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	next := map[byte]int{}
	for len(b) >= 8 {
		n := binary.LittleEndian.Uint32(b)
		if n == 0 {
			break
		}
		rec := b[8 : 8+n]
		if crc32.Checksum(rec, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
			t.Fatalf("record %q does not check", rec)
		}
		var i, j int
		fmt.Sscanf(string(rec), "w%d-%03d", &i, &j)
		if j != next[byte(i)] {
			t.Fatalf("writer %d: record %d after %d", i, j, next[byte(i)]-1)
		}
		next[byte(i)]++
		seen[string(rec)] = true
		b = b[8+n:]
	}
	if len(seen) != writers*each {
		t.Fatalf("%d records on disk, want %d", len(seen), writers*each)
	}
}

// TestWALSegments: writes past a segment's size go to the next one, and
// the full ones are removed (nothing reads them back).
func TestWALSegments(t *testing.T) {
	dir := t.TempDir()
	w, err := openWAL(dir, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, 10<<10)
	for range 20 {
		if err := w.write(rec); err != nil {
			t.Fatal(err)
		}
	}
	w.close()
	// 6 records of 10 KiB and their frames fit a segment: the fourth
	// takes the last two.
	for seg, want := range map[string]bool{"00000001.seg": false, "00000003.seg": false, "00000004.seg": true} {
		if _, err := os.Stat(filepath.Join(dir, seg)); (err == nil) != want {
			t.Errorf("200 KiB in 64 KiB segments: %s there: %v, want %v", seg, err == nil, want)
		}
	}
}

// BenchmarkFdatasyncCPU is what one synced 4 KiB write costs the process
// in CPU (user and system, getrusage), beside its wall time: on the
// machine of README.md, 90-150 µs of CPU each, which a CPU quota counts.
func BenchmarkFdatasyncCPU(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "f"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zero := make([]byte, 1<<20)
	for i := range 8 {
		f.WriteAt(zero, int64(i)<<20)
	}
	f.Sync()
	page := make([]byte, 4096)
	before := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		f.WriteAt(page, int64(i%2048)*4096)
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-before)/float64(time.Microsecond)/float64(b.N), "cpu-µs/sync")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
