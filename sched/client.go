package sched

import "sync"

// UpdateKind is what a worker reports about a job.
type UpdateKind uint8

const (
	Data UpdateKind = iota + 1
	Warning
	Status
	Complete
	Fail
	Exception
)

// Terminal reports whether the update ends the job.
func (k UpdateKind) Terminal() bool { return k >= Complete }

// Update is one report about a job, delivered to its listeners. Data and
// Den are only valid during the Notify call: copy what you keep.
type Update struct {
	Kind UpdateKind
	Data []byte // payload; the numerator for Status
	Den  []byte // denominator for Status
	// Origin is the reporting frontend's token for its goroutine, passed
	// through untouched (nil for updates sched makes itself, such as a Fail
	// after the last retry). A listener that recognises its own token can
	// write directly instead of handing the update across goroutines.
	Origin any
	// Reason is why a Fail or Exception happened, in the frontend's words
	// (its packet's name: "WORK_FAIL"), kept with an exception's Data as
	// the failure's text (Sched.Failures). Listeners do not get it.
	Reason string
}

// Listener receives the updates of the jobs a client is attached to. Notify
// is called outside every scheduler lock, from whichever goroutine reported
// the update, so it must be safe for concurrent use and must not block.
type Listener interface {
	Notify(jobID uint64, u *Update)
}

// attach links one client to one job; a client that submits the same job
// twice is attached twice and hears every update twice, as with gearmand.
type attach struct {
	job          *Job
	client       *Client
	jprev, jnext *attach // job's list, guarded by the job's shard lock
	cprev, cnext *attach // client's list, guarded by client.mu
	linked       bool    // guarded by both
}

// Client is a submitter. Its foreground jobs report to its Listener until
// they end or the client is closed.
type Client struct {
	s      *Sched
	l      Listener
	mu     sync.Mutex
	head   *attach
	n      int
	closed bool
	src    Source // SetSource
}

// NewClient returns a client whose foreground jobs report to l.
func (s *Sched) NewClient(l Listener) *Client {
	return &Client{s: s, l: l}
}

// Attached is the number of live jobs the client listens to.
func (c *Client) Attached() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// link attaches c to j. Caller holds j's shard lock.
func (c *Client) link(j *Job) bool {
	a := &attach{job: j, client: c}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	a.cnext = c.head
	if c.head != nil {
		c.head.cprev = a
	}
	c.head = a
	c.n++
	a.linked = true
	c.mu.Unlock()
	a.jnext = j.listeners
	if j.listeners != nil {
		j.listeners.jprev = a
	}
	j.listeners = a
	return true
}

// unlink detaches a from both lists. Caller holds the job's shard lock.
func (a *attach) unlink() {
	c := a.client
	c.mu.Lock()
	if !a.linked {
		c.mu.Unlock()
		return
	}
	if a.cprev != nil {
		a.cprev.cnext = a.cnext
	} else {
		c.head = a.cnext
	}
	if a.cnext != nil {
		a.cnext.cprev = a.cprev
	}
	c.n--
	a.linked = false
	c.mu.Unlock()
	j := a.job
	if a.jprev != nil {
		a.jprev.jnext = a.jnext
	} else {
		j.listeners = a.jnext
	}
	if a.jnext != nil {
		a.jnext.jprev = a.jprev
	}
	a.jprev, a.jnext, a.cprev, a.cnext = nil, nil, nil, nil
}

// clients is how many clients listen to j. Caller holds j's shard lock.
func (j *Job) clients() int {
	n := 0
	for a := j.listeners; a != nil; a = a.jnext {
		n++
	}
	return n
}

// Close detaches the client from all its jobs. A queued foreground job left
// with no listener is dropped (nobody is waiting for it); a running one
// finishes on its worker and its result is discarded.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	for {
		c.mu.Lock()
		a := c.head
		c.mu.Unlock()
		if a == nil {
			return
		}
		j := a.job
		sh := c.s.shardOf(j.id)
		sh.mu.Lock()
		a.unlink()
		gone := j.listeners == nil && !j.background && (j.state == stateQueued || j.state == stateBlocked)
		if gone {
			sh.unplace(j)
			sh.forget(j)
		}
		sh.mu.Unlock()
		if gone {
			c.s.ended(j)
		}
	}
}

// notifyAll delivers u to every listener collected in ls.
func notifyAll(ls []*Client, id uint64, u *Update) {
	for _, c := range ls {
		c.l.Notify(id, u)
	}
}

// collect appends j's listeners to dst; with detach it also unlinks them.
// Caller holds j's shard lock.
func collect(dst []*Client, j *Job, detach bool) []*Client {
	for a := j.listeners; a != nil; {
		next := a.jnext
		dst = append(dst, a.client)
		if detach {
			a.unlink()
		}
		a = next
	}
	return dst
}
