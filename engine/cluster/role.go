package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"switchyard/sched/replicated"
)

// The role machine: what a node runs follows its Raft role, and a role
// belongs to a term.
//
//   - Leading in term T: the scheduler over a store of T (every entry it
//     proposes carries T, and the FSM refuses it in another term), every
//     frontend, their addresses published in T. Any other term, or not
//     leading, ends it: a node that loses the lead and wins it back
//     between two looks still starts anew, replaying what the interim
//     leader committed.
//   - Following: the relays, pointed at the published leader of the
//     current term, or at none.
//
// Nothing on the way from a change of role to serving waits without a
// bound: a leader's start (barrier, replay, publication) ends when its
// term does, each wait on Raft is bounded, a follower's relays close
// without waiting on the old leader, and the store's Close is bounded.

// Runner starts what a node runs in each role; Roles decides which, and
// when.
type Runner interface {
	// Lead starts a leader's term over store, whose jobs are all applied:
	// it replays them into a scheduler and opens the frontends. ctx ends
	// when the term does (the lead lost, or Roles stopping): a start that
	// sees it end stops what it started and returns its error.
	Lead(ctx context.Context, store *replicated.Store) (Leading, error)
	// Follow opens a follower's relays (and what serves beside them).
	Follow() (Following, error)
}

// Leading is a leader's term, as Runner.Lead started it.
type Leading interface {
	// Addrs are the frontends' TCP addresses, as bound, by protocol, in
	// the order of its listeners: published for the followers' relays.
	Addrs() map[string][]string
	// Serve is called once they are published: the term serves from now
	// on (took is the time since Roles saw it lead).
	Serve(term uint64, took time.Duration)
	// Stop stops the frontends and the scheduler; Roles closes the store
	// after it.
	Stop()
}

// Following is a follower's relays, as Runner.Follow opened them.
type Following interface {
	Relays() []RoleRelay
	// Stop closes the relays and what serves beside them.
	Stop()
}

// RoleRelay is a relay for the Index-th listener of a protocol.
type RoleRelay struct {
	Protocol string
	Index    int
	Relay    *Relay
}

// Roles is a node's role machine: Start runs it, Stop ends it.
type Roles struct {
	n           *Node
	run         Runner
	log         *zap.Logger
	noticeLevel zapcore.Level
	// changes and metaChanged wake the machine to look at the node again
	// (the node's Changes and its FSM's MetaChanged; a test's own, to
	// decide when the machine looks).
	changes, metaChanged <-chan struct{}
	// retryAfter is the pause before a role that failed to start is tried
	// again; barrierTimeout bounds a leader's wait for the log to be
	// applied (tests set less).
	retryAfter, barrierTimeout time.Duration

	ctx    context.Context // ends at Stop
	cancel context.CancelFunc
	drains chan drainReq
	stop   chan bool // handOff
	done   chan struct{}

	// Loop only: the role running, the leader's start under way.
	cur         *role
	starting    *starting
	started     chan startResult
	waiting     bool // a retry is due: no role starts before it
	retry       *time.Timer
	steppedDown uint64 // the term a failed log last stepped down in
	elected     uint64 // the last term this node was seen to lead

	mu    sync.Mutex // guards state, for Health
	state roleState
}

type roleState struct {
	leading  bool
	term     uint64
	starting uint64 // the term a leader's start is under way for; 0 if none
	relays   []RoleRelay
}

// role is what runs: a leader's term (leading set) or a follower's
// relays.
type role struct {
	term    uint64
	leading Leading
	store   *replicated.Store
	cancel  context.CancelFunc

	following Following
	leader    LeaderInfo // the leader relayed to
	known     bool
}

type starting struct {
	term   uint64
	begin  time.Time
	cancel context.CancelFunc
	ended  bool // its term did, and cancel was called
}

type startResult struct {
	r   *role
	err error
}

type drainReq struct {
	fn   func(Leading)
	done chan struct{}
}

// Timeouts of a leader's start; a start that runs out of one is logged and
// tried again after retryAfter while the node still leads.
const (
	// barrierTimeout bounds the wait for the entries of earlier terms to
	// be applied before the state is read.
	barrierTimeout = 30 * time.Second
	// handOffTimeout bounds the hand-over of the lead before a stop.
	handOffTimeout = 5 * time.Second
	defaultRetry   = 500 * time.Millisecond
)

// RolesConfig configures a role machine.
type RolesConfig struct {
	Runner Runner
	Log    *zap.Logger
	// NoticeLevel is the level of the lines an operator must see at the
	// default verbosity (whom the relays follow); zero is Info.
	NoticeLevel zapcore.Level
}

// NewRoles makes n's role machine.
func NewRoles(n *Node, cfg RolesConfig) *Roles {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	m := &Roles{n: n, run: cfg.Runner, log: log, noticeLevel: cfg.NoticeLevel,
		changes: n.Changes(), metaChanged: n.FSM().MetaChanged(),
		retryAfter: defaultRetry, barrierTimeout: barrierTimeout,
		drains: make(chan drainReq), stop: make(chan bool), done: make(chan struct{}), started: make(chan startResult, 1)}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Start runs the machine until Stop.
func (m *Roles) Start() { go m.loop() }

// Stop ends the machine and what it runs: a leader hands the lead over
// first if handOff says so, so that the others need not wait out an
// election timeout.
func (m *Roles) Stop(handOff bool) {
	select {
	case m.stop <- handOff:
		<-m.done
	case <-m.done:
	}
}

// Drain calls fn with the leader's term, if this node leads, in the
// machine's loop: nothing starts or stops while it runs ("shutdown
// graceful").
func (m *Roles) Drain(fn func(Leading)) {
	req := drainReq{fn: fn, done: make(chan struct{})}
	select {
	case m.drains <- req:
		<-req.done
	case <-m.done:
	}
}

// Health is /healthz's answer for the node: nil while it leads a term
// that serves, or follows a published leader with every relay accepting;
// otherwise why not.
func (m *Roles) Health() error {
	if err := m.n.LogFailed(); err != nil {
		return fmt.Errorf("the raft log failed a sync, so this node acknowledges nothing more: %w", err)
	}
	m.mu.Lock()
	st := m.state
	m.mu.Unlock()
	switch {
	case st.leading:
		return nil
	case st.starting != 0:
		return fmt.Errorf("taking the lead in term %d", st.starting)
	}
	for _, r := range st.relays {
		if err := r.Relay.Err(); err != nil {
			return fmt.Errorf("the %s relay on %s accepts no connection: %w", r.Protocol, r.Relay.Addr(), err)
		}
	}
	if st.relays == nil && !m.n.IsLeader() {
		return errors.New("not serving: no role yet")
	}
	if _, ok := m.n.CurrentLeader(); !ok {
		return errors.New("no leader: this node relays to none")
	}
	return nil
}

func (m *Roles) setState(f func(*roleState)) {
	m.mu.Lock()
	f(&m.state)
	m.mu.Unlock()
}

// look reads the node's term and whether it leads in it: the term read
// again after the role, so that the two belong together. A node whose log
// failed leads in no term.
func (m *Roles) look() (term uint64, leading bool) {
	r := m.n.raft
	for {
		term = r.CurrentTerm()
		leading = r.State() == raft.Leader
		if r.CurrentTerm() == term {
			return term, leading && m.n.LogFailed() == nil
		}
	}
}

func (m *Roles) loop() {
	defer close(m.done)
	m.retry = time.NewTimer(time.Hour)
	m.retry.Stop()
	for {
		m.step()
		select {
		case <-m.changes:
		case <-m.metaChanged:
		case <-m.retry.C:
			m.waiting = false
		case res := <-m.started:
			m.startDone(res)
		case req := <-m.drains:
			if m.cur != nil && m.cur.leading != nil {
				req.fn(m.cur.leading)
			}
			close(req.done)
		case handOff := <-m.stop:
			m.shutdown(handOff)
			return
		}
	}
}

// step brings what runs in line with the node's role.
func (m *Roles) step() {
	term, leading := m.look()
	if leading && term != m.elected {
		// Before anything stops or starts: the moment Raft made it the
		// leader, give or take a look.
		m.elected = term
		m.notice("elected", zap.Uint64("term", term))
	}
	m.stepDownIfFailed()
	if s := m.starting; s != nil {
		if !leading || term != s.term {
			s.ended = true
			s.cancel() // its result comes on started
		}
		return
	}
	if r := m.cur; r != nil && r.leading != nil && (!leading || term != r.term) {
		m.log.Warn("cluster: the term of leadership ended", zap.Uint64("term", r.term), zap.Uint64("now", term),
			zap.Bool("leading", leading))
		m.stopRole()
	}
	if r := m.cur; r != nil && r.following != nil && leading {
		m.stopRole()
	}
	if m.cur == nil && !m.waiting {
		if leading {
			m.beginLead(term)
			return
		}
		if err := m.follow(); err != nil {
			m.log.Error("cluster: cannot follow", zap.Error(err))
			m.retryLater()
			return
		}
	}
	if m.cur != nil && m.cur.following != nil {
		m.retarget()
	}
}

// stepDownIfFailed hands the lead over once the node's log has failed: a
// leader whose log fails an append steps down by itself, but one whose
// failure came elsewhere (a compaction's sync) would lead on.
func (m *Roles) stepDownIfFailed() {
	if m.n.LogFailed() == nil || m.n.raft.State() != raft.Leader {
		return
	}
	term := m.n.raft.CurrentTerm()
	if m.steppedDown == term {
		return
	}
	m.steppedDown = term
	m.n.lease.giveUp(term) // the target may win at once
	f := m.n.raft.LeadershipTransfer()
	go func() {
		if err := waitFuture(m.ctx, f, handOffTimeout, "step down"); err != nil {
			m.log.Warn("cluster: a node whose log failed could not hand the lead over", zap.Error(err))
		}
	}()
}

func (m *Roles) retryLater() {
	m.waiting = true
	m.retry.Reset(m.retryAfter)
}

// beginLead starts a leader's term in the background: the loop goes on
// watching, and ends the start if the term ends.
func (m *Roles) beginLead(term uint64) {
	ctx, cancel := context.WithCancel(m.ctx)
	s := &starting{term: term, begin: time.Now(), cancel: cancel}
	m.starting = s
	m.setState(func(st *roleState) { st.starting = term })
	go func() {
		r, err := m.lead(ctx, s)
		if err != nil {
			cancel()
		} else {
			r.cancel = cancel
		}
		m.started <- startResult{r, err}
	}()
}

// lead is a leader's start in term s.term: every earlier entry applied,
// a store of the term, the runner's scheduler and frontends, their
// addresses published in the term.
func (m *Roles) lead(ctx context.Context, s *starting) (*role, error) {
	n := m.n
	if err := n.Barrier(ctx, m.barrierTimeout); err != nil {
		return nil, err
	}
	if t := n.raft.CurrentTerm(); t != s.term {
		return nil, fmt.Errorf("cluster: term %d ended (now %d) before the log was applied", s.term, t)
	}
	store := replicated.New(ctx, n.raft, n.fsm, replicated.Options{Term: s.term, Stalled: m.stalled(s.term)})
	l, err := m.run.Lead(ctx, store)
	if err != nil {
		store.Close()
		return nil, err
	}
	info := LeaderInfo{Addrs: map[string][]string{}}
	for p, addrs := range l.Addrs() {
		for _, a := range addrs {
			info.Addrs[p] = append(info.Addrs[p], n.Reachable(a))
		}
	}
	if err := n.Publish(ctx, s.term, info); err != nil {
		l.Stop()
		store.Close()
		return nil, err
	}
	return &role{term: s.term, leading: l, store: store}, nil
}

// stalled logs a store's commits that wait too long, and their return.
func (m *Roles) stalled(term uint64) func(error) {
	return func(err error) {
		if err != nil {
			m.log.Error("cluster: a commit timed out: submits are refused while the log does not move (the followers' disks?)",
				zap.Uint64("term", term), zap.Error(err))
		} else {
			m.log.Warn("cluster: commits are done in time again", zap.Uint64("term", term))
		}
	}
}

// startDone takes a leader's start that ended: it serves if its term goes
// on, and stops otherwise.
func (m *Roles) startDone(res startResult) {
	s := m.starting
	m.starting = nil
	m.setState(func(st *roleState) { st.starting = 0 })
	switch {
	case res.err != nil && s.ended:
		m.log.Warn("cluster: the term of leadership ended before it served", zap.Uint64("term", s.term), zap.Error(res.err))
		return
	case res.err != nil:
		m.log.Error("cluster: cannot take the lead", zap.Uint64("term", s.term), zap.Error(res.err))
		m.retryLater()
		return
	}
	if term, leading := m.look(); !leading || term != s.term {
		m.log.Warn("cluster: the term of leadership ended as it started", zap.Uint64("term", s.term), zap.Uint64("now", term))
		m.cur = res.r
		m.stopRole()
		return
	}
	m.cur = res.r
	m.setState(func(st *roleState) { st.leading, st.term, st.relays = true, s.term, nil })
	res.r.leading.Serve(s.term, time.Since(s.begin))
}

// follow opens the relays.
func (m *Roles) follow() error {
	f, err := m.run.Follow()
	if err != nil {
		return err
	}
	m.cur = &role{following: f}
	relays := f.Relays()
	if relays == nil {
		relays = []RoleRelay{}
	}
	m.setState(func(st *roleState) { st.leading, st.term, st.relays = false, 0, relays })
	return nil
}

// retarget points the relays at the current leader's listeners, or at
// none while there is no leader (their connections are closed).
func (m *Roles) retarget() {
	r := m.cur
	info, ok := m.n.CurrentLeader()
	if ok != r.known || info.ID != r.leader.ID || info.Term != r.leader.Term {
		r.leader, r.known = info, ok
		if ok {
			m.notice("relaying to the leader", zap.String("leader", info.ID), zap.Uint64("term", info.Term))
		} else {
			m.notice("no leader to relay to: connections wait for one", zap.Uint64("term", m.n.raft.CurrentTerm()))
		}
	}
	for _, rr := range r.following.Relays() {
		target := ""
		if addrs := info.Addrs[rr.Protocol]; ok && len(addrs) > 0 {
			target = addrs[min(rr.Index, len(addrs)-1)]
		}
		rr.Relay.SetTarget(target)
	}
}

// stopRole stops what runs: a leader's frontends and scheduler, then its
// store (bounded: writes still waiting fail), or a follower's relays.
func (m *Roles) stopRole() {
	r := m.cur
	if r == nil {
		return
	}
	m.cur = nil
	m.setState(func(st *roleState) { st.leading, st.term, st.relays = false, 0, nil })
	if r.leading != nil {
		r.leading.Stop()
		if err := r.store.Close(); err != nil {
			m.log.Warn("cluster: the term's store closed", zap.Uint64("term", r.term), zap.Error(err))
		}
		r.cancel()
	}
	if r.following != nil {
		r.following.Stop()
	}
}

// shutdown ends the machine: a start under way ends, a leader hands the
// lead over (if handOff), what runs stops.
func (m *Roles) shutdown(handOff bool) {
	if s := m.starting; s != nil {
		s.cancel()
		res := <-m.started
		m.starting = nil
		if res.err == nil {
			m.cur = res.r
		}
	}
	if r := m.cur; handOff && r != nil && r.leading != nil {
		m.n.lease.giveUp(r.term) // the target may win at once
		if err := waitFuture(context.Background(), m.n.raft.LeadershipTransfer(), handOffTimeout, "hand the lead over"); err != nil {
			m.log.Warn("cluster: could not hand the lead over before stopping", zap.Error(err))
		}
	}
	m.stopRole()
	m.cancel()
}

// notice logs what an operator must see at the default verbosity.
func (m *Roles) notice(msg string, fields ...zap.Field) { m.log.Log(m.noticeLevel, msg, fields...) }
