package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEngines runs each engine as a cluster in this process, over
// loopback, with four groups of three replicas: once each group's leader
// is the node placement wants, every job submitted to a leader is
// acknowledged, and every node that holds a group has every job of it,
// and the others none.
func TestEngines(t *testing.T) {
	for _, tt := range []struct {
		eng  string
		size int
	}{
		{engSingle, 1},
		{engEtcd, 3}, {engHraft, 3}, {engHraftOne, 3}, {engDragonboat, 3},
		{engEtcd, 4}, {engHraftOne, 4}, {engDragonboat, 4},
	} {
		eng, size := tt.eng, tt.size
		t.Run(fmt.Sprintf("%s/%d", eng, size), func(t *testing.T) {
			nodes := startCluster(t, eng, size, 4)
			const perGroup = 300
			var acked atomic.Int64
			var wg sync.WaitGroup
			for _, tn := range nodes {
				var led []int
				for g := range 4 {
					if tn.n.eng.leads(g) {
						led = append(led, g)
					}
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := submitN(tn.client, uint64(tn.n.id)<<48, led, perGroup, &acked); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if got := acked.Load(); got != 4*perGroup {
				t.Fatalf("%d acknowledged, want %d", got, 4*perGroup)
			}
			// Followers apply what the leader has: wait for them.
			deadline := time.Now().Add(20 * time.Second)
			for _, tn := range nodes {
				for g := range 4 {
					want := 0
					if tn.n.member(g) {
						want = perGroup
					}
					for tn.n.fsms[g].len() != want && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond) // polling another goroutine's progress, bounded
					}
					if got := tn.n.fsms[g].len(); got != want {
						t.Errorf("node %d group %d holds %d jobs, want %d", tn.n.id, g, got, want)
					}
				}
			}
		})
	}
}

type testNode struct {
	n      *node
	client string
}

// startCluster starts size nodes of eng with groups groups and waits
// until leadership is placed.
func startCluster(t *testing.T, eng string, size, groups int) []*testNode {
	t.Helper()
	dir := t.TempDir()
	var peerLs []net.Listener
	var peers []string
	for i := range size {
		if eng == engDragonboat {
			// dragonboat cannot take port 0: an address of this test's own.
			peers = append(peers, fmt.Sprintf("127.92.%d.%d:%d", os.Getpid()%250, 10*size+i+1, 20000+os.Getpid()%20000))
			peerLs = append(peerLs, nil)
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peerLs = append(peerLs, l)
		peers = append(peers, l.Addr().String())
	}
	nodes := make([]*testNode, size)
	engs := make([]engine, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for i := range size {
		n := newNode(byte(i+1), groups, 1, size, 3)
		nodes[i] = &testNode{n: n}
		d := filepath.Join(dir, fmt.Sprint(i+1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var e engine
			var err error
			switch eng {
			case engSingle:
				e, err = newSingleEngine(n, d)
			case engEtcd:
				e, err = newEtcdEngine(n, peerLs[i], peers, d)
			case engHraft, engHraftOne:
				e, err = newHraftEngine(n, peerLs[i], peers, d, eng == engHraftOne)
			case engDragonboat:
				e, err = newDragonboatEngine(n, peers[i], peers, d)
			}
			engs[i], errs[i] = e, err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
	}
	for i, tn := range nodes {
		tn.n.eng = engs[i]
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tn.client = l.Addr().String()
		go tn.n.listen(l)
		t.Cleanup(func() {
			l.Close()
		})
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, e := range engs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.close()
			}()
		}
		wg.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for g := 0; g < groups; {
		want := int(preferred(g, size))
		ok := true
		for i, tn := range nodes {
			ok = ok && tn.n.eng.leads(g) == (i+1 == want)
		}
		if ok {
			g++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %d: not led by node %d alone after 30 s", g, want)
		}
		time.Sleep(20 * time.Millisecond) // polling the engines' elections, bounded
	}
	return nodes
}

// submitN submits n jobs to each of groups through one connection, 32
// in flight, and returns once all are acknowledged.
func submitN(addr string, base uint64, groups []int, n int, acked *atomic.Int64) error {
	if len(groups) == 0 {
		return nil
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	total := n * len(groups)
	got := make(chan error, 1)
	seen := make(map[uint64]bool, total)
	tokens := make(chan struct{}, 32)
	go func() {
		var a [9]byte
		for range total {
			if _, err := io.ReadFull(c, a[:]); err != nil {
				got <- err
				return
			}
			id := binary.BigEndian.Uint64(a[1:])
			if a[0] != respAck || seen[id] {
				got <- fmt.Errorf("answer %q", a)
				return
			}
			seen[id] = true
			acked.Add(1)
			<-tokens
		}
		got <- nil
	}()
	payload := []byte("a payload of some bytes")
	frame := make([]byte, submitHdr+len(payload))
	frame[0] = reqSubmit
	binary.BigEndian.PutUint16(frame[10:], uint16(len(payload)))
	copy(frame[submitHdr:], payload)
	for i := range total {
		tokens <- struct{}{}
		frame[1] = byte(groups[i%len(groups)])
		binary.BigEndian.PutUint64(frame[2:], base|uint64(i))
		if _, err := c.Write(frame); err != nil {
			return err
		}
	}
	return <-got
}
