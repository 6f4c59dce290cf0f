package gearhttp

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	codec "switchyard/codec/gearman"
	"switchyard/engine/budget"
	"switchyard/engine/source"
	"switchyard/sched"
)

// Handler serves gearmand's HTTP protocol: one job per request. It is an
// http.Handler, so it can share an http.Server with other handlers; Close
// ends the requests that still wait for a job.
type Handler struct {
	cfg     Config
	sched   *sched.Sched
	log     *zap.Logger
	handles codec.Handles

	quit      chan struct{} // closed by Close
	closeOnce sync.Once
}

// NewHandler returns the protocol's handler on scheduler s.
func NewHandler(cfg Config, s *sched.Sched, log *zap.Logger) *Handler {
	if cfg.BodyIdle <= 0 {
		cfg.BodyIdle = bodyIdleTimeout
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{cfg: cfg, sched: s, log: log, handles: codec.NewHandles(cfg.HandlePrefix), quit: make(chan struct{})}
}

// Close makes the requests waiting for a job's result give up: each is
// dropped unanswered and its job detached, as when its client leaves.
func (h *Handler) Close() { h.closeOnce.Do(func() { close(h.quit) }) }

// gearmand's error replies, in the headers where its HTTP module puts them
// (the code in place of the handle, the text dropped).
const (
	errQueue    = "QUEUE_ERROR"
	errTooLarge = "ARGUMENT_TOO_LARGE"
)

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if fc, ok := r.Context().Value(connKey{}).(*framedConn); ok {
		switch fc.verdict() {
		case refuse:
			h.log.Info("http: a request with both Content-Length and Transfer-Encoding (request smuggling); refused",
				zap.String("from", r.RemoteAddr))
			badRequest(w, "Content-Length with Transfer-Encoding")
			return
		case closeAfter:
			// Its body may be chunked: the connection is not read on.
			w.Header()["Connection"] = []string{"close"}
		}
	}
	m := methodOf(r.Method)
	switch m {
	case methodRefused:
		// gearmand means to answer 405 but closes the connection first.
		hangUp(w)
		return
	case methodTrace:
		// gearmand waits for as many bytes again as the request had and
		// never answers; an echo would hand a page's script the cookies
		// of the request (cross-site tracing).
		w.Header()["Allow"] = []string{"GET, HEAD, POST, PUT"}
		h.reply(w, r, http.StatusMethodNotAllowed, nil, "", nil)
		return
	}
	sub := parseSubmit(r)
	if sub.fn == "" {
		if m == methodHead {
			// gearmand echoes, and answers 200 with whatever handle its
			// packet buffer held last; no handle here.
			h.reply(w, r, http.StatusOK, nil, "", nil)
			return
		}
		h.reply(w, r, http.StatusNotFound, nil, "", nil)
		return
	}
	var payload []byte
	if sub.readBody {
		var err error
		hold := h.cfg.Budget.Hold(func() {}) // a cut refuses the body's next growth
		payload, err = readBody(w, r, h.cfg.MaxBody, h.cfg.BodyIdle, hold)
		hold.Release() // the body is the job's now, or gone
		if err != nil {
			var tooLarge *http.MaxBytesError
			switch {
			case errors.As(err, &tooLarge):
				h.reply(w, r, http.StatusRequestEntityTooLarge, nil, "", nil)
			case errors.Is(err, errBudget):
				w.Header().Set("Connection", "close")
				h.reply(w, r, http.StatusServiceUnavailable, nil, "", nil)
			default:
				hangUp(w) // the client is gone, or too slow, or sent a broken body
			}
			return
		}
	}
	if sub.uniqueTooLong() {
		h.replyError(w, r, errTooLarge)
		return
	}
	req := sched.SubmitReq{
		Func:              []byte(sub.fn),
		Unique:            []byte(sub.unique),
		Payload:           payload,
		Priority:          sub.priority,
		Background:        sub.background,
		CoalesceOnPayload: sub.unique == "-",
	}
	if sub.background {
		h.background(w, r, &req)
		return
	}
	h.foreground(w, r, &req, m == methodHead)
}

// readBody reads a POST's or PUT's body, up to limit bytes. The buffer
// grows as the bytes come, each growth taken from the memory budget
// (hold), so that a Content-Length alone makes the server hold nothing;
// and each read has a deadline, as has the whole body.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, idle time.Duration, hold *budget.Holder) ([]byte, error) {
	n := r.ContentLength
	if n > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	rc := http.NewResponseController(w)
	end := time.Now().Add(bodyTimeout)
	body := http.MaxBytesReader(w, r.Body, limit)
	buf := make([]byte, 0, min(max(n, 0), bodyStart))
	if !hold.Take(int64(cap(buf))) {
		return nil, errBudget
	}
	for {
		if len(buf) == cap(buf) {
			grown := append(buf, 0)[:len(buf)]
			if !hold.Take(int64(cap(grown) - cap(buf))) {
				return nil, errBudget
			}
			buf = grown
		}
		next := time.Now().Add(idle)
		if next.After(end) {
			next = end
		}
		rc.SetReadDeadline(next)
		k, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err == io.EOF {
			rc.SetReadDeadline(time.Time{})
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// errBudget: the memory budget could not take a body's next growth.
var errBudget = errors.New("the memory budget is spent")

// bodyStart is the most a body's buffer starts with: whatever the
// Content-Length says, the buffer grows as the bytes come.
const bodyStart = 64 << 10

// background submits a background job and answers once it is queued (and,
// with a durable queue, on disk): 200 with JOB_CREATED and its handle.
func (h *Handler) background(w http.ResponseWriter, r *http.Request, req *sched.SubmitReq) {
	stored := make(chan error, 1)
	req.Stored = func(_ uint64, err error) { stored <- err }
	c := h.sched.NewClient(nil)
	c.SetSource(source.HTTP)
	id, err := c.Submit(req)
	if err == nil && req.Waiting {
		select {
		case err = <-stored:
		case <-h.quit:
			hangUp(w)
			return
		}
	}
	if err != nil {
		h.submitFailed(w, r, req, err)
		return
	}
	h.reply(w, r, http.StatusOK, h.handles.Append(nil, id), codec.JobCreated.String(), nil)
}

func (h *Handler) submitFailed(w http.ResponseWriter, r *http.Request, req *sched.SubmitReq, err error) {
	if err != sched.ErrQueueFull {
		h.log.Warn("http: submit refused", zap.ByteString("func", req.Func), zap.Error(err))
	}
	h.replyError(w, r, errQueue)
}

// foreground submits a job, waits for its end and answers with its result.
// A client that leaves, a Close and the timeout detach the request from
// the job, as a Gearman client's disconnection does: a job still queued
// with no one else waiting is dropped, a running one runs on.
func (h *Handler) foreground(w http.ResponseWriter, r *http.Request, req *sched.SubmitReq, head bool) {
	res := &result{max: h.cfg.MaxBody, exceptions: h.cfg.Exceptions, done: make(chan struct{})}
	c := h.sched.NewClient(res)
	c.SetSource(source.HTTP)
	defer c.Close()
	id, err := c.Submit(req)
	if err != nil {
		h.submitFailed(w, r, req, err)
		return
	}
	handle := h.handles.Append(nil, id)
	var expire <-chan time.Time
	if h.cfg.Timeout > 0 {
		t := time.NewTimer(h.cfg.Timeout)
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-res.done:
	case <-r.Context().Done():
		// The client left, or shut its sending side, which gearmand
		// takes for leaving too: no answer.
		hangUp(w)
		return
	case <-h.quit:
		hangUp(w)
		return
	case <-expire:
		h.reply(w, r, http.StatusGatewayTimeout, handle, "", nil)
		return
	}
	if res.overflow {
		h.log.Warn("http: a job's WORK_DATA exceeds the largest body", zap.ByteString("handle", handle), zap.Int64("max", res.max))
		h.reply(w, r, http.StatusBadGateway, handle, "", nil)
		return
	}
	command := res.command.String()
	if head {
		command = "" // gearmand's HEAD answer has no X-Gearman-Command
	}
	h.reply(w, r, http.StatusOK, handle, command, res.body)
}

// replyError is gearmand's answer to an ERROR packet: 200, the error's
// code where the handle goes, ERROR as the command, no body.
func (h *Handler) replyError(w http.ResponseWriter, r *http.Request, code string) {
	h.reply(w, r, http.StatusOK, []byte(code), codec.Error.String(), nil)
}

// reply writes a response with gearmand's headers: X-Gearman-Job-Handle
// and X-Gearman-Command when given, Content-Length, Server, and nothing
// net/http would add (Date, Content-Type). The connection is closed after
// it, as gearmand always does, unless the client asked to keep it.
func (h *Handler) reply(w http.ResponseWriter, r *http.Request, status int, handle []byte, command string, body []byte) {
	hd := w.Header()
	if handle != nil {
		hd["X-Gearman-Job-Handle"] = []string{string(handle)}
	}
	if command != "" {
		hd["X-Gearman-Command"] = []string{command}
	}
	hd["Content-Length"] = []string{strconv.Itoa(len(body))}
	if h.cfg.Server != "" {
		hd["Server"] = []string{h.cfg.Server}
	}
	hd["Date"] = nil
	hd["Content-Type"] = nil
	if !keepAlive(r) {
		hd["Connection"] = []string{"close"}
	}
	w.WriteHeader(status)
	if len(body) > 0 && r.Method != http.MethodHead {
		w.Write(body)
	}
}

// badRequest answers 400 on the connection itself and closes it: the
// bytes after the request's head, which may hold another request, are
// never read as requests (net/http, answering, would read on to discard
// the body). The peer's last bytes are drained, for a while, before the
// close, so that the close does not reset the connection under the
// answer.
func badRequest(w http.ResponseWriter, why string) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // not an HTTP/1 connection
	}
	defer conn.Close()
	body := "400 Bad Request: " + why + "\n"
	conn.SetDeadline(time.Now().Add(drainTime))
	if _, err := io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body); err != nil {
		return
	}
	if tc, ok := conn.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(conn, maxDrain))
}

// How long, and how much, badRequest drains.
const (
	drainTime = time.Second
	maxDrain  = 256 << 10
)

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not an HTTP/1 connection: abort the response instead.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// result is a foreground request's sched.Listener: it gathers the
// WORK_DATA of its job and keeps the update that ends the response.
// gearmand's HTTP module answers at the first WORK_COMPLETE, WORK_FAIL,
// WORK_EXCEPTION (WORK_FAIL for a client that did not ask for exceptions),
// WORK_STATUS or WORK_WARNING, whichever comes first.
type result struct {
	max        int64
	exceptions bool
	done       chan struct{} // closed once the fields below are final

	mu       sync.Mutex
	ended    bool
	body     []byte     // the WORK_DATA, then the final update's data
	command  codec.Type // the final update's packet type
	overflow bool       // body would exceed max
}

// Notify implements sched.Listener.
func (res *result) Notify(_ uint64, u *sched.Update) {
	res.mu.Lock()
	defer res.mu.Unlock()
	if res.ended {
		return
	}
	data := u.Data
	switch u.Kind {
	case sched.Data:
		if !res.fits(data) {
			res.end()
			return
		}
		res.body = append(res.body, data...)
		return
	case sched.Complete:
		res.command = codec.WorkComplete
	case sched.Warning:
		res.command = codec.WorkWarning
	case sched.Status:
		res.command, data = codec.WorkStatus, nil // the numbers are not the body
	case sched.Fail:
		res.command, data = codec.WorkFail, nil
	case sched.Exception:
		res.command = codec.WorkException
		if !res.exceptions {
			res.command, data = codec.WorkFail, nil
		}
	default:
		return
	}
	if !res.fits(data) {
		res.end()
		return
	}
	res.body = append(res.body, data...)
	res.end()
}

// fits reports whether data may be added to the body, and notes an overflow.
func (res *result) fits(data []byte) bool {
	if int64(len(res.body))+int64(len(data)) > res.max {
		res.overflow = true
		return false
	}
	return true
}

func (res *result) end() {
	res.ended = true
	close(res.done)
}
