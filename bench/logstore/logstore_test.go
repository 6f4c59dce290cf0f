// Package logstore compares the Raft log store switchyard's cluster
// uses (sched/replicated.LogStore: segment files) with raft-boltdb/v2 v2.3.1
// (bbolt), the hashicorp/raft log store most projects use, on the writes
// and reads a switchyard leader makes: StoreLogs of entries as the
// replicated store builds them (a writer batch of background submits, one
// entry each), every call synced, with the log trimmed behind as Raft
// does after a snapshot; and GetLog of recent entries, which a leader
// does for every entry it sends to each follower.
package logstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"switchyard/sched"
	"switchyard/sched/durable"
	"switchyard/sched/replicated"
)

type logStore interface {
	raft.LogStore
	Close() error
}

var stores = []struct {
	name string
	open func(dir string) (logStore, error)
}{
	{"segments", func(dir string) (logStore, error) { return replicated.OpenLogStore(filepath.Join(dir, "log")) }},
	{"boltdb", func(dir string) (logStore, error) {
		return raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, "raft.db")})
	}},
}

// entryOf is what replicated.Store hands Raft for a writer batch of n
// background submits of bg-durable's kind (function bench-bg, a 64-byte
// payload): version 1, then per job opPut (1), its id (8 bytes,
// big-endian), the record's uvarint length and the record, which is
// durable.EncodeRecord's (see sched/replicated/entry.go).
func entryOf(n int, firstID uint64) []byte {
	b := []byte{1}
	for i := range n {
		id := firstID + uint64(i)
		rec := durable.EncodeRecord(&sched.Record{ID: id, Func: "bench-bg", Payload: bytes.Repeat([]byte{'x'}, 64)})
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, id)
		b = binary.AppendUvarint(b, uint64(len(rec)))
		b = append(b, rec...)
	}
	return b
}

// Raft's trimming: a snapshot every 8192 entries, 4096 kept behind it
// (engine/cluster's SnapshotThreshold and TrailingLogs).
const (
	snapshotThreshold = 8192
	trailingLogs      = 4096
)

func BenchmarkStoreLogs(b *testing.B) {
	for _, jobs := range []int{1, 16, 256} {
		for _, perCall := range []int{1, 8} {
			for _, s := range stores {
				b.Run(fmt.Sprintf("jobs=%d/entries=%d/%s", jobs, perCall, s.name), func(b *testing.B) {
					st, err := s.open(b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					defer st.Close()
					data := entryOf(jobs, 1)
					logs := make([]*raft.Log, perCall)
					for i := range logs {
						logs[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data}
					}
					b.SetBytes(int64(len(data) * perCall))
					b.ReportAllocs()
					index, first := uint64(0), uint64(1)
					b.ResetTimer()
					for range b.N {
						now := time.Now()
						for _, l := range logs {
							index++
							l.Index, l.AppendedAt = index, now
						}
						if err := st.StoreLogs(logs); err != nil {
							b.Fatal(err)
						}
						if index-first >= snapshotThreshold+trailingLogs {
							if err := st.DeleteRange(first, index-trailingLogs); err != nil {
								b.Fatal(err)
							}
							first = index - trailingLogs + 1
						}
					}
					b.ReportMetric(float64(b.N*perCall*jobs)/b.Elapsed().Seconds(), "jobs/s")
				})
			}
		}
	}
}

func BenchmarkGetLog(b *testing.B) {
	const jobs, entries = 256, 1024
	for _, s := range stores {
		b.Run(fmt.Sprintf("jobs=%d/%s", jobs, s.name), func(b *testing.B) {
			st, err := s.open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			data := entryOf(jobs, 1)
			for i := uint64(1); i <= entries; i++ {
				if err := st.StoreLog(&raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var l raft.Log
			b.ResetTimer()
			for i := range b.N {
				if err := st.GetLog(uint64(i%entries)+1, &l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStoresAgree checks that both stores give back what they were given,
// so that the benchmark compares stores that work.
func TestStoresAgree(t *testing.T) {
	for _, s := range stores {
		st, err := s.open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		data := entryOf(3, 7)
		if err := st.StoreLogs([]*raft.Log{{Index: 1, Term: 2, Type: raft.LogCommand, Data: data}, {Index: 2, Term: 2, Type: raft.LogCommand, Data: data}}); err != nil {
			t.Fatal(err)
		}
		var l raft.Log
		if err := st.GetLog(2, &l); err != nil || l.Index != 2 || l.Term != 2 || !bytes.Equal(l.Data, data) {
			t.Errorf("%s: %+v, %v", s.name, l, err)
		}
		if first, _ := st.FirstIndex(); first != 1 {
			t.Errorf("%s: first %d", s.name, first)
		}
		st.Close()
	}
}
