package load

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/transport"
	"google.golang.org/protobuf/proto"

	codec "switchyard/codec/dwork"
)

// dwork (frobnitzem/dwork's hub protocol): its clients are ZeroMQ REQ
// sockets that send one protobuf QueryMsg a message and wait for the
// reply. This speaks it with zmq4 REQ sockets, and with the protobuf types
// generated from dwork's .proto (codec/dwork's dwork.pb.go, marshalled by
// the protobuf library): none of switchyard's own decoding or checking of
// the messages is on the load side.
//
// zmq4 writes each frame's header and body with a write of their own, four
// writes a request (a REQ socket's empty delimiter frame, then the
// message), and reads a reply a header and a body at a time, straight from
// the socket: the server would get each request in pieces, a wakeup and a
// read for each, where a libzmq client (dwork's) writes a request at once
// and reads in batches. The REQ sockets here dial through a transport of
// their own, zmq4's tcp with the writes buffered until the socket reads
// (a REQ socket reads only in Recv and in its handshake, from the goroutine
// that writes) and the reads buffered: one write a request, as libzmq.

// dworkDialTimeout bounds a REQ socket's connect and ZMTP handshake.
const dworkDialTimeout = 10 * time.Second

// dworkIdle is how long a host waits after a Steal answered NotFound
// before it asks again, so that hosts with nothing to do (the wide DAG's
// start and end) do not take the shared cores from the server.
const dworkIdle = time.Millisecond

// createBytes bounds one Create's tasks, encoded, well under the
// protocol's 4 MiB message (codec.MaxMessage).
const createBytes = 1 << 20

// quiet is zmq4's logger: it logs connection errors to stderr otherwise,
// and a failed request is returned as an error here.
var quiet = log.New(io.Discard, "", 0)

// reqTransportName is the zmq4 transport of the REQ sockets here.
const reqTransportName = "bench-dwork-tcp"

var registerReqTransport = sync.OnceValue(func() error {
	return zmq4.RegisterTransport(reqTransportName, reqTransport{})
})

// reqTransport dials tcp and hands zmq4 a batchConn.
type reqTransport struct{}

func (reqTransport) Dial(ctx context.Context, d transport.Dialer, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &batchConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (reqTransport) Listen(context.Context, string) (net.Listener, error) {
	return nil, errors.New("bench: the dwork client transport only dials")
}

func (reqTransport) Addr(ep string) (string, error) { return ep, nil }

// batchConn buffers what zmq4 writes until it next reads, and what it
// reads. It is used by one goroutine at a time (a REQ socket's), but may be
// closed from another.
type batchConn struct {
	net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func (c *batchConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *batchConn) Read(p []byte) (int, error) {
	if c.w.Buffered() > 0 {
		if err := c.w.Flush(); err != nil {
			return 0, err
		}
	}
	return c.r.Read(p)
}

// DworkConn is one dwork client: a REQ socket, one request at a time.
type DworkConn struct {
	sock zmq4.Socket
	stop func() bool
	out  []byte
}

// DialDwork connects a REQ socket to a dwork hub at addr (HOST:PORT). ctx
// bounds the connect and handshake; once connected, ctx ending closes the
// socket, so that a request waiting for its reply fails then (zmq4's REQ
// Recv does not watch a context).
func DialDwork(ctx context.Context, addr string) (*DworkConn, error) {
	if err := registerReqTransport(); err != nil {
		return nil, err
	}
	sock := zmq4.NewReq(context.Background(), zmq4.WithLogger(quiet), zmq4.WithDialerTimeout(dworkDialTimeout))
	errc := make(chan error, 1)
	go func() { errc <- sock.Dial(reqTransportName + "://" + addr) }()
	timer := time.NewTimer(dworkDialTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("no ZMTP handshake after %v", dworkDialTimeout)
	}
	if err != nil {
		// A Dial still under way ends when the server gives up on the
		// handshake; its connection is not the socket's yet.
		sock.Close()
		return nil, fmt.Errorf("dwork dial %s: %w", addr, err)
	}
	c := &DworkConn{sock: sock}
	c.stop = context.AfterFunc(ctx, func() { sock.Close() })
	return c, nil
}

// Close closes the socket.
func (c *DworkConn) Close() error {
	c.stop()
	return c.sock.Close()
}

// Do sends req and decodes the reply into rep.
func (c *DworkConn) Do(req, rep *codec.QueryMsg) error {
	out, err := proto.MarshalOptions{}.MarshalAppend(c.out[:0], req)
	if err != nil {
		return err
	}
	c.out = out
	if err := c.sock.Send(zmq4.NewMsg(c.out)); err != nil {
		return fmt.Errorf("dwork send: %w", err)
	}
	msg, err := c.sock.Recv()
	if err != nil {
		return fmt.Errorf("dwork recv: %w", err)
	}
	if len(msg.Frames) != 1 {
		return fmt.Errorf("dwork reply of %d frames, want 1", len(msg.Frames))
	}
	if err := proto.Unmarshal(msg.Frames[0], rep); err != nil {
		return fmt.Errorf("dwork reply: %w", err)
	}
	return nil
}

func dworkType(t codec.QueryMsg_Type) *codec.QueryMsg_Type { return &t }

// DworkDAG is a DAG of dwork tasks to create and then run, and the check
// that the run kept to it: every task handed out once, none before all of
// its ancestors were reported done.
type DworkDAG struct {
	// Tasks are the Create entries in order, each predecessor before its
	// successors. A task with more predecessors than one entry may hold
	// (codec.MaxDeps) has several entries: the server adds the
	// predecessors of a Create on a name that waits.
	Tasks []*codec.TaskMsg
	// Total is the number of distinct tasks.
	Total int64

	mu sync.Mutex
	// need is, per task, how many completions must have been sent before
	// the server may hand it out (its ancestors); -1 once handed out.
	need     map[string]int64
	reported atomic.Int64 // tasks sent as done, counted before the send
	done     atomic.Int64 // tasks whose completion was answered OK
}

// Remaining is the number of tasks not yet done.
func (d *DworkDAG) Remaining() int64 { return d.Total - d.done.Load() }

func newDAG() *DworkDAG { return &DworkDAG{need: make(map[string]int64)} }

func (d *DworkDAG) add(name string, need int64, preds ...string) {
	t := &codec.TaskMsg{Name: proto.String(name), Origin: proto.String("bench")}
	for _, p := range preds {
		t.Pred = append(t.Pred, &codec.TaskMsg_Dep{Name: proto.String(p)})
	}
	d.Tasks = append(d.Tasks, t)
	if _, ok := d.need[name]; !ok {
		d.Total++
	}
	d.need[name] = need
}

// WideDAG is a root, n tasks after it and a sink after all n, names
// starting with prefix.
func WideDAG(prefix string, n int) *DworkDAG {
	d := newDAG()
	root, sink := prefix+"root", prefix+"sink"
	d.add(root, 0)
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
		d.add(names[i], 1, root)
	}
	for len(names) > 0 {
		k := min(len(names), codec.MaxDeps)
		d.add(sink, int64(n)+1, names[:k]...)
		names = names[k:]
	}
	if n == 0 {
		d.add(sink, 1, root)
	}
	return d
}

// ChainDAG is m tasks, each after the one before, names starting with
// prefix.
func ChainDAG(prefix string, m int) *DworkDAG {
	d := newDAG()
	for i := range m {
		name := prefix + strconv.Itoa(i)
		if i == 0 {
			d.add(name, 0)
		} else {
			d.add(name, int64(i), prefix+strconv.Itoa(i-1))
		}
	}
	return d
}

// take checks tasks handed out by a Steal against the DAG and marks them
// handed out.
func (d *DworkDAG) take(tasks []*codec.TaskMsg) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	reported := d.reported.Load()
	for _, t := range tasks {
		name := t.GetName()
		need, ok := d.need[name]
		switch {
		case !ok:
			return fmt.Errorf("dwork: Steal handed out %q, no task of the DAG", name)
		case need < 0:
			return fmt.Errorf("dwork: Steal handed out %q again", name)
		case need > reported:
			return fmt.Errorf("dwork: Steal handed out %q with %d tasks reported done, before its %d ancestors", name, reported, need)
		}
		d.need[name] = -1
	}
	return nil
}

// Create creates the DAG's tasks on c, in order, in Creates of at most
// codec.MaxTasks tasks and about createBytes bytes, each answered OK before
// the next. It returns how many Creates it sent.
func (d *DworkDAG) Create(c *DworkConn) (int, error) {
	req := &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Create)}
	var rep codec.QueryMsg
	sent := 0
	for tasks := d.Tasks; len(tasks) > 0; {
		n, size := 0, 0
		for n < len(tasks) && n < codec.MaxTasks {
			s := proto.Size(tasks[n]) + 4 // tag and length
			if n > 0 && size+s > createBytes {
				break
			}
			n, size = n+1, size+s
		}
		req.Task = tasks[:n]
		if err := c.Do(req, &rep); err != nil {
			return sent, fmt.Errorf("dwork Create: %w", err)
		}
		if rep.GetType() != codec.QueryMsg_OK {
			return sent, fmt.Errorf("dwork Create of %d tasks answered %v", n, rep.GetType())
		}
		sent++
		tasks = tasks[n:]
	}
	return sent, nil
}

// DworkHosts run a DAG's tasks: Hosts REQ sockets, each a location (named
// Name and its index) that steals up to Steal tasks at a time and reports
// them done at once, in one Transfer, until every task of the DAG is done;
// then each sends Exit.
type DworkHosts struct {
	Addr  string
	Hosts int
	Steal int32
	Name  string
}

// DworkResult is what the hosts did.
type DworkResult struct {
	Done   int64 // tasks whose completion was answered OK
	Steals int64 // Steals answered Transfer
	Empty  int64 // Steals answered NotFound
	// StealLatency is the round trip of each Steal answered Transfer,
	// DoneLatency that of each completion.
	StealLatency *hdrhistogram.Histogram
	DoneLatency  *hdrhistogram.Histogram
	// Start is when the hosts, connected, began stealing; End when the
	// last completion was answered (zero if not every task was done).
	Start, End time.Time
}

// Run connects the hosts and runs every task of dag. ctx bounds it all: when
// it ends, the sockets close and Run returns what was done.
func (h DworkHosts) Run(ctx context.Context, dag *DworkDAG) (DworkResult, error) {
	res := DworkResult{StealLatency: NewLatencyHistogram(), DoneLatency: NewLatencyHistogram()}
	if h.Hosts < 1 || h.Steal < 1 {
		return res, fmt.Errorf("dwork: %d hosts stealing %d at a time: want at least one of each", h.Hosts, h.Steal)
	}
	ctx, cancel := context.WithCancel(ctx) // the first failure stops every host
	defer cancel()
	conns := make([]*DworkConn, h.Hosts)
	for i := range conns {
		c, err := DialDwork(ctx, h.Addr)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return res, err
		}
		conns[i] = c
	}
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		end  atomic.Int64
	)
	res.Start = time.Now()
	for i, c := range conns {
		w := dworkHost{conn: c, loc: h.Name + strconv.Itoa(i), steal: h.Steal, dag: dag, end: &end,
			stealLat: NewLatencyHistogram(), doneLat: NewLatencyHistogram()}
		wg.Go(func() {
			defer c.Close()
			err := w.run(ctx)
			if err != nil {
				cancel()
			}
			mu.Lock()
			defer mu.Unlock()
			res.Steals += w.steals
			res.Empty += w.empty
			res.StealLatency.Merge(w.stealLat)
			res.DoneLatency.Merge(w.doneLat)
			if err != nil {
				errs = append(errs, fmt.Errorf("host %s: %w", w.loc, err))
			}
		})
	}
	wg.Wait()
	res.Done = dag.done.Load()
	if ns := end.Load(); ns != 0 {
		res.End = time.Unix(0, ns)
	}
	if len(errs) > 0 {
		return res, errors.Join(firstN(errs, 3)...)
	}
	if res.Done < dag.Total {
		return res, fmt.Errorf("dwork: %d of %d tasks done: %w", res.Done, dag.Total, context.Cause(ctx))
	}
	return res, nil
}

func firstN(errs []error, n int) []error {
	if len(errs) > n {
		return append(errs[:n:n], fmt.Errorf("and %d more", len(errs)-n))
	}
	return errs
}

// dworkHost is one host's loop and counts.
type dworkHost struct {
	conn     *DworkConn
	loc      string
	steal    int32
	dag      *DworkDAG
	end      *atomic.Int64
	steals   int64
	empty    int64
	stealLat *hdrhistogram.Histogram
	doneLat  *hdrhistogram.Histogram
}

func (w *dworkHost) run(ctx context.Context) error {
	loc := proto.String(w.loc)
	steal := &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Steal), Location: loc, N: proto.Int32(w.steal)}
	done := &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Transfer), Location: loc}
	var stolen, doneRep codec.QueryMsg
	idle := time.NewTimer(0)
	defer idle.Stop()
	for w.dag.Remaining() > 0 {
		if err := ctx.Err(); err != nil {
			return nil // stopped: Run says what is missing
		}
		t0 := time.Now()
		if err := w.conn.Do(steal, &stolen); err != nil {
			return stopped(ctx, fmt.Errorf("Steal: %w", err))
		}
		switch stolen.GetType() {
		case codec.QueryMsg_Transfer:
		case codec.QueryMsg_NotFound:
			w.empty++
			idle.Reset(dworkIdle)
			select {
			case <-idle.C:
			case <-ctx.Done():
			}
			continue
		default:
			return fmt.Errorf("Steal answered %v", stolen.GetType())
		}
		t1 := time.Now()
		recordLatency(w.stealLat, t1.Sub(t0))
		w.steals++
		n := len(stolen.Task)
		if n == 0 || n > int(w.steal) {
			return fmt.Errorf("Steal of at most %d answered with %d tasks", w.steal, n)
		}
		if err := w.dag.take(stolen.Task); err != nil {
			return err
		}
		// The tasks go back as they came (name, origin, the Stolen log
		// entry): done.
		done.Task = stolen.Task
		w.dag.reported.Add(int64(n))
		if err := w.conn.Do(done, &doneRep); err != nil {
			return stopped(ctx, fmt.Errorf("completion: %w", err))
		}
		t2 := time.Now()
		recordLatency(w.doneLat, t2.Sub(t1))
		if doneRep.GetType() != codec.QueryMsg_OK {
			return fmt.Errorf("completion of %d tasks answered %v (%d listed back)", n, doneRep.GetType(), len(doneRep.Task))
		}
		if w.dag.done.Add(int64(n)) == w.dag.Total {
			w.end.Store(t2.UnixNano())
		}
	}
	exit := &codec.QueryMsg{Type: dworkType(codec.QueryMsg_Exit), Location: loc}
	if err := w.conn.Do(exit, &doneRep); err != nil {
		return stopped(ctx, fmt.Errorf("Exit: %w", err))
	}
	// A host that never got a task is unknown to the server: NotFound.
	if want := codec.QueryMsg_OK; w.steals > 0 && doneRep.GetType() != want {
		return fmt.Errorf("Exit answered %v, want %v", doneRep.GetType(), want)
	}
	return nil
}

// stopped drops a socket's error that came of ctx ending (which closes the
// socket): Run reports the tasks left undone instead.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
