// Package storetest holds a sched.Store for frontend tests: one whose
// writes are answered only when the test says so, to see what clients get
// while a durable store has yet to answer.
package storetest

import (
	"sync"

	"switchyard/sched"
)

// Gate is a sched.Store that records nothing and answers each write (Put
// or Flush with a done) when Answer is called, oldest first. Queued gets a
// token per write, so a test can wait until the server has made them.
type Gate struct {
	Queued chan struct{}

	mu      sync.Mutex
	pending []func(error)
}

// NewGate returns a Gate that can hold up to max unanswered writes.
func NewGate(max int) *Gate { return &Gate{Queued: make(chan struct{}, max)} }

func (g *Gate) Encode(*sched.Record) []byte              { return []byte{} }
func (g *Gate) Put(_ uint64, _ []byte, done func(error)) { g.add(done) }
func (g *Gate) Delete(uint64)                            {}
func (g *Gate) Flush(done func(error))                   { g.add(done) }
func (g *Gate) Load(func(*sched.Record) error) error     { return nil }

func (g *Gate) add(done func(error)) {
	if done == nil {
		return
	}
	g.mu.Lock()
	g.pending = append(g.pending, done)
	g.mu.Unlock()
	g.Queued <- struct{}{}
}

// Answer answers the oldest unanswered write with err, from another
// goroutine, as a store's writer would.
func (g *Gate) Answer(err error) {
	g.mu.Lock()
	done := g.pending[0]
	g.pending = g.pending[1:]
	g.mu.Unlock()
	go done(err)
}
