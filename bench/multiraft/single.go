package main

import (
	"encoding/binary"
	"sync"
)

// singleEngine is the baseline: one durable server's store, no
// replication. What every group's batcher handed over while the last
// sync ran goes to one log in one write and one fdatasync (the group
// commit of sched/durable), then is applied and answered.
type singleEngine struct {
	n    *node
	w    *wal
	mu   sync.Mutex
	q    []proposal
	kick chan struct{}
	done chan struct{}
	shut bool // under mu: proposals are dropped
}

func newSingleEngine(n *node, dir string) (*singleEngine, error) {
	w, err := openWAL(dir, walSegment)
	if err != nil {
		return nil, err
	}
	e := &singleEngine{n: n, w: w, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go e.run()
	return e, nil
}

func (e *singleEngine) leads(int) bool { return true }

func (e *singleEngine) propose(g int, data []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.shut {
		return
	}
	e.q = append(e.q, proposal{g, data})
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

func (e *singleEngine) run() {
	defer close(e.done)
	var q []proposal
	var buf []byte
	for range e.kick {
		e.mu.Lock()
		q, e.q = e.q, q[:0]
		e.mu.Unlock()
		buf = buf[:0]
		for _, p := range q {
			buf = append(buf, 'e')
			buf = binary.BigEndian.AppendUint16(buf, uint16(p.g))
			buf = binary.AppendUvarint(buf, uint64(len(p.data)))
			buf = append(buf, p.data...)
		}
		if len(buf) > 0 {
			if err := e.w.write(buf); err != nil {
				panic(err)
			}
		}
		for i, p := range q {
			e.n.apply(p.g, p.data)
			q[i] = proposal{}
		}
	}
}

func (e *singleEngine) close() {
	e.mu.Lock()
	e.shut = true
	close(e.kick)
	e.mu.Unlock()
	<-e.done
	e.w.close()
}
