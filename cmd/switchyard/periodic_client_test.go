package main

// A Periodic (Lupino/periodic v0.1.7) client and worker for the end-to-end
// tests, written from the protocol as the real server and its Go client
// speak it (Lupino/periodic dc57737 and Lupino/go-periodic ec1571b; see
// docs/periodic.md), deliberately NOT on top of
// switchyard/codec/periodic: a codec bug must not be mirrored here, where it
// would cancel out.
//
// Wire format. A frame is a 4-byte magic ("\0REQ" from client to server,
// "\0RES" back), the payload's length (4 bytes, big-endian; the reader
// ignores the top bit, as the real one does) and the payload. The first
// frame of a connection is the handshake: one byte, 1 for a client, 2 for
// a worker, answered by nothing. A later request payload is
//
//	msgID \x00\x01 cmd [\x00\x01 arg [\x00\x01 arg ...]]
//
// and a reply echoes msgID, then \x00\x01, then either a command byte
// (optionally followed by \x00\x01 and data) or, for STATUS, DUMP and the
// error replies, bare text.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Periodic command bytes.
const (
	perNoop       byte = 0
	perGrabJob    byte = 1
	perSchedLater byte = 2
	perWorkDone   byte = 3
	perWorkFail   byte = 4
	perJobAssign  byte = 5
	perNoJob      byte = 6
	perCanDo      byte = 7
	perCantDo     byte = 8
	perPing       byte = 9
	perPong       byte = 10
	perSleep      byte = 11
	perUnknown    byte = 12
	perSubmitJob  byte = 13
	perStatus     byte = 14
	perDropFunc   byte = 15
	perSuccess    byte = 16
	perRemoveJob  byte = 17
	perDump       byte = 18
	perLoad       byte = 19
)

const (
	perTypeClient byte = 1
	perTypeWorker byte = 2

	perSep      = "\x00\x01" // between message id, command and arguments
	perReqMagic = "\x00REQ"
	perResMagic = "\x00RES"

	// perReadLimit bounds a frame this client accepts; the biggest the
	// tests expect is a DUMP chunk of 100 jobs or a long STATUS.
	perReadLimit = 16 << 20

	// perReplyTimeout bounds waiting for a reply that should come at once.
	perReplyTimeout = 10 * time.Second
)

// perFrame encodes one frame: magic, the payload's length, the payload.
func perFrame(magic string, payload []byte) []byte {
	b := make([]byte, 8, 8+len(payload))
	copy(b, magic)
	binary.BigEndian.PutUint32(b[4:], uint32(len(payload)))
	return append(b, payload...)
}

// perRequest builds a request payload: the message id, the separator, the
// command byte and, if any, the arguments, each after a separator.
func perRequest(msgID string, cmd byte, args ...string) []byte {
	b := make([]byte, 0, len(msgID)+3+len(args)*16)
	b = append(b, msgID...)
	b = append(b, perSep...)
	b = append(b, cmd)
	for _, a := range args {
		b = append(b, perSep...)
		b = append(b, a...)
	}
	return b
}

// perReadFrame reads one frame with the given magic and returns its payload.
func perReadFrame(r io.Reader, magic string, limit uint32) ([]byte, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	if string(h[:4]) != magic {
		return nil, fmt.Errorf("magic %q, want %q", h[:4], magic)
	}
	n := binary.BigEndian.Uint32(h[4:]) &^ 0x80000000
	if n > limit {
		return nil, fmt.Errorf("frame of %d bytes (limit %d)", n, limit)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, fmt.Errorf("payload of %d bytes: %w", n, err)
	}
	return p, nil
}

// perReply is a reply payload split at its first separator: the echoed
// message id and what follows it.
type perReply struct {
	msgID string
	body  []byte
	at    time.Time // when it was read
}

// perParseReply splits a reply payload. A message id never holds the
// separator (the real parser splits at its first occurrence too).
func perParseReply(payload []byte) (perReply, error) {
	id, body, ok := bytes.Cut(payload, []byte(perSep))
	if !ok {
		return perReply{}, fmt.Errorf("reply %q has no separator", payload)
	}
	return perReply{msgID: string(id), body: body}, nil
}

// command reads the body as a command reply: one byte, or one byte, the
// separator and data.
func (r perReply) command() (cmd byte, data []byte, ok bool) {
	switch {
	case len(r.body) == 1:
		return r.body[0], nil, true
	case len(r.body) >= 3 && string(r.body[1:3]) == perSep:
		return r.body[0], r.body[3:], true
	}
	return 0, nil, false
}

func (r perReply) String() string { return fmt.Sprintf("msgID %q body %q", r.msgID, r.body) }

// perJob is the job as the protocol's JSON carries it; the server encodes
// these fields, in this order (Go's encoding/json of the real server's
// driver.Job).
type perJob struct {
	ID       int64  `json:"job_id"`
	Name     string `json:"name"`
	Func     string `json:"func"`
	Workload string `json:"workload"`
	Timeout  int64  `json:"timeout"`
	SchedAt  int64  `json:"sched_at"`
	RunAt    int64  `json:"run_at"`
	Counter  int64  `json:"counter"`
	Status   string `json:"status"`
}

// perJobKeys are the JSON keys of a job as the server writes it, in order.
var perJobKeys = []string{"job_id", "name", "func", "workload", "timeout", "sched_at", "run_at", "counter", "status"}

// jsonKeys returns the keys of a JSON object in the order they appear, and
// checks that nothing follows the object.
func jsonKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not an object: %v %v", tok, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("data after the object (%v)", err)
	}
	return keys, nil
}

// perDecodeJob decodes a job the server sent, strictly: exactly the nine
// keys in order, each of its type (integers for the numbers).
func perDecodeJob(raw []byte) (perJob, error) {
	keys, err := jsonKeys(raw)
	if err != nil {
		return perJob{}, fmt.Errorf("job %s: %v", raw, err)
	}
	if !slices.Equal(keys, perJobKeys) {
		return perJob{}, fmt.Errorf("job %s: keys %q, want %q", raw, keys, perJobKeys)
	}
	var j perJob
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return perJob{}, fmt.Errorf("job %s: %v", raw, err)
	}
	return j, nil
}

// perMarshalJob encodes a job as go-periodic's client does: every field,
// job_id 0 and status "" included.
func perMarshalJob(j perJob) string {
	b, err := json.Marshal(j)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// perAssignment is one JOB_ASSIGN.
type perAssignment struct {
	msgID  string // of the GRAB_JOB it answers
	handle string
	raw    []byte // the job's JSON
	job    perJob
	at     time.Time
}

// perParseAssign reads a reply as JOB_ASSIGN: cmd 5, then the decimal job
// id, the separator and the job's JSON, whose job_id is that id.
func perParseAssign(r perReply) (perAssignment, error) {
	cmd, data, ok := r.command()
	if !ok || cmd != perJobAssign {
		return perAssignment{}, fmt.Errorf("not a JOB_ASSIGN: %v", r)
	}
	handle, raw, ok := bytes.Cut(data, []byte(perSep))
	if !ok {
		return perAssignment{}, fmt.Errorf("JOB_ASSIGN %q: no separator after the handle", data)
	}
	id, err := strconv.ParseInt(string(handle), 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != string(handle) {
		return perAssignment{}, fmt.Errorf("JOB_ASSIGN handle %q is not a decimal job id", handle)
	}
	j, err := perDecodeJob(raw)
	if err != nil {
		return perAssignment{}, fmt.Errorf("JOB_ASSIGN: %v", err)
	}
	if j.ID != id {
		return perAssignment{}, fmt.Errorf("JOB_ASSIGN handle %s, job_id %d", handle, j.ID)
	}
	return perAssignment{msgID: r.msgID, handle: string(handle), raw: raw, job: j, at: r.at}, nil
}

// perStat is one STATUS line: func,workers,jobs,processing.
type perStat struct{ workers, jobs, processing int }

// perParseStatus parses a STATUS body: lines "func,workers,jobs,processing\n".
func perParseStatus(body []byte) (map[string]perStat, error) {
	m := map[string]perStat{}
	s := string(body)
	if s == "" {
		return m, nil
	}
	if !strings.HasSuffix(s, "\n") {
		return nil, fmt.Errorf("STATUS %q does not end in a newline", s)
	}
	for _, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		f := strings.Split(line, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("STATUS line %q", line)
		}
		var n [3]int
		for i := range n {
			v, err := strconv.Atoi(f[i+1])
			if err != nil || v < 0 || strconv.Itoa(v) != f[i+1] {
				return nil, fmt.Errorf("STATUS line %q", line)
			}
			n[i] = v
		}
		if _, dup := m[f[0]]; dup {
			return nil, fmt.Errorf("STATUS lists %q twice", f[0])
		}
		m[f[0]] = perStat{n[0], n[1], n[2]}
	}
	return m, nil
}

// ---------------------------------------------------------------------------
// Connections

// perNet is where a Periodic listener is: ("tcp", "127.0.0.1:N") or
// ("unix", "/path").
type perNet struct{ network, addr string }

func (n perNet) String() string { return n.network + "://" + n.addr }

// perConn is a connection to the Periodic listener, as client or worker.
// Every read has a deadline, so a missing reply fails the test quickly.
type perConn struct {
	t    *testing.T
	c    net.Conn
	r    *bufio.Reader
	name string
	seq  int
}

// dialPerRaw connects without a handshake.
func dialPerRaw(t *testing.T, n perNet, name string) *perConn {
	t.Helper()
	c, err := net.DialTimeout(n.network, n.addr, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", name, n, err)
	}
	t.Cleanup(func() { c.Close() })
	return &perConn{t: t, c: c, r: bufio.NewReader(c), name: name}
}

// dialPer connects and sends the handshake (perTypeClient or perTypeWorker).
func dialPer(t *testing.T, n perNet, name string, typ byte) *perConn {
	t.Helper()
	p := dialPerRaw(t, n, name)
	p.sendPayload([]byte{typ})
	return p
}

func dialPerClient(t *testing.T, n perNet) *perConn {
	t.Helper()
	return dialPer(t, n, "client", perTypeClient)
}

func dialPerWorker(t *testing.T, n perNet, name string, funcs ...string) *perConn {
	t.Helper()
	w := dialPer(t, n, name, perTypeWorker)
	w.canDo(funcs...)
	return w
}

// write writes raw bytes.
func (p *perConn) write(b []byte) {
	p.t.Helper()
	p.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if _, err := p.c.Write(b); err != nil {
		p.t.Fatalf("%s: write: %v", p.name, err)
	}
}

// sendPayload writes one request frame.
func (p *perConn) sendPayload(payload []byte) {
	p.t.Helper()
	p.write(perFrame(perReqMagic, payload))
}

// send writes one request.
func (p *perConn) send(msgID string, cmd byte, args ...string) {
	p.t.Helper()
	p.sendPayload(perRequest(msgID, cmd, args...))
}

// newID returns a message id not used before on this connection.
func (p *perConn) newID() string {
	p.seq++
	return "m" + strconv.Itoa(p.seq)
}

// tryRecv reads one reply within timeout.
func (p *perConn) tryRecv(timeout time.Duration) (perReply, error) {
	p.c.SetReadDeadline(time.Now().Add(timeout))
	payload, err := perReadFrame(p.r, perResMagic, perReadLimit)
	if err != nil {
		return perReply{}, err
	}
	r, err := perParseReply(payload)
	r.at = time.Now()
	return r, err
}

// recv reads one reply, failing the test if none comes within timeout.
func (p *perConn) recv(timeout time.Duration) perReply {
	p.t.Helper()
	r, err := p.tryRecv(timeout)
	if err != nil {
		p.t.Fatalf("%s: receive: %v", p.name, err)
	}
	return r
}

// expectBody reads one reply and checks its message id and body exactly.
func (p *perConn) expectBody(msgID, body string) perReply {
	p.t.Helper()
	r := p.recv(perReplyTimeout)
	if r.msgID != msgID || string(r.body) != body {
		p.t.Fatalf("%s: got %v, want msgID %q body %q", p.name, r, msgID, body)
	}
	return r
}

// expectCmd reads one reply and checks that it is exactly msgID, the
// separator and cmd.
func (p *perConn) expectCmd(msgID string, cmd byte) {
	p.t.Helper()
	p.expectBody(msgID, string([]byte{cmd}))
}

// call sends a command with a fresh message id and returns the reply, which
// must echo that id.
func (p *perConn) call(cmd byte, args ...string) perReply {
	p.t.Helper()
	id := p.newID()
	p.send(id, cmd, args...)
	r := p.recv(perReplyTimeout)
	if r.msgID != id {
		p.t.Fatalf("%s: command %d sent as %q answered %v", p.name, cmd, id, r)
	}
	return r
}

// ping sends PING and waits for PONG: every request sent before it on this
// connection has been handled.
func (p *perConn) ping() {
	p.t.Helper()
	id := p.newID()
	p.send(id, perPing)
	p.expectCmd(id, perPong)
}

// waitClosed waits until the server closes the connection, which must send
// nothing more.
func (p *perConn) waitClosed(timeout time.Duration) error {
	p.c.SetReadDeadline(time.Now().Add(timeout))
	b, err := p.r.ReadByte()
	switch {
	case err == io.EOF, errors.Is(err, syscall.ECONNRESET):
		return nil
	case err == nil:
		rest, _ := p.r.Peek(p.r.Buffered())
		return fmt.Errorf("got data %q instead", append([]byte{b}, rest...))
	}
	return err
}

// --- client commands

// submit sends SUBMIT_JOB with the job's JSON and expects SUCCESS.
func (p *perConn) submit(j perJob) {
	p.t.Helper()
	p.submitJSON(perMarshalJob(j))
}

// submitJSON sends SUBMIT_JOB with raw JSON and expects SUCCESS.
func (p *perConn) submitJSON(raw string) {
	p.t.Helper()
	r := p.call(perSubmitJob, raw)
	if cmd, _, ok := r.command(); !ok || cmd != perSuccess || len(r.body) != 1 {
		p.t.Fatalf("%s: SUBMIT_JOB %s answered %v, want SUCCESS", p.name, raw, r)
	}
}

// status sends STATUS and parses the reply.
func (p *perConn) status() (map[string]perStat, string) {
	p.t.Helper()
	r := p.call(perStatus)
	m, err := perParseStatus(r.body)
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	return m, string(r.body)
}

// waitStatus polls STATUS until fn's line is want (or, with absent, until
// there is no line for fn). Another connection's effect on the scheduler is
// not ordered with this one's requests, hence the polling.
func (p *perConn) waitStatus(fn string, want perStat, absent bool) {
	p.t.Helper()
	what := fmt.Sprintf("STATUS line %s,%d,%d,%d", fn, want.workers, want.jobs, want.processing)
	if absent {
		what = "no STATUS line for " + fn
	}
	waitUntil(p.t, e2eWaitTimeout, what, func() (bool, string) {
		m, raw := p.status()
		got, ok := m[fn]
		if absent {
			return !ok, raw
		}
		return ok && got == want, raw
	})
}

// waitJobs polls STATUS until fn has that many jobs and running jobs,
// whatever its workers (a missing line counts as none).
func (p *perConn) waitJobs(fn string, jobs, processing int) {
	p.t.Helper()
	waitUntil(p.t, e2eWaitTimeout, fmt.Sprintf("%s: %d job(s), %d processing", fn, jobs, processing), func() (bool, string) {
		m, raw := p.status()
		return m[fn].jobs == jobs && m[fn].processing == processing, raw
	})
}

// dump sends DUMP and returns the chunks' JSON up to the EOF frame; each
// chunk is {"jobs":[...]} with 1 to 100 jobs.
func (p *perConn) dump() (chunks [][]byte, jobs []perJob) {
	p.t.Helper()
	id := p.newID()
	p.send(id, perDump)
	for {
		r := p.recv(perReplyTimeout)
		if r.msgID != id {
			p.t.Fatalf("%s: DUMP sent as %q answered %v", p.name, id, r)
		}
		if string(r.body) == "EOF" {
			return chunks, jobs
		}
		keys, err := jsonKeys(r.body)
		if err != nil || !slices.Equal(keys, []string{"jobs"}) {
			p.t.Fatalf("%s: DUMP chunk %.200q: keys %q %v", p.name, r.body, keys, err)
		}
		var c struct{ Jobs []json.RawMessage }
		if err := json.Unmarshal(r.body, &c); err != nil {
			p.t.Fatalf("%s: DUMP chunk %.200q: %v", p.name, r.body, err)
		}
		if len(c.Jobs) < 1 || len(c.Jobs) > 100 {
			p.t.Fatalf("%s: DUMP chunk of %d jobs, want 1 to 100", p.name, len(c.Jobs))
		}
		for _, raw := range c.Jobs {
			j, err := perDecodeJob(raw)
			if err != nil {
				p.t.Fatalf("%s: DUMP: %v", p.name, err)
			}
			jobs = append(jobs, j)
		}
		chunks = append(chunks, r.body)
	}
}

// --- worker commands

// canDo registers functions (no reply).
func (p *perConn) canDo(funcs ...string) {
	p.t.Helper()
	for _, f := range funcs {
		p.send(p.newID(), perCanDo, f)
	}
}

// grab sends a GRAB_JOB, answered whenever a job is due.
func (p *perConn) grab(msgID string) {
	p.t.Helper()
	p.send(msgID, perGrabJob)
}

// expectAssign reads the next reply, which must be a JOB_ASSIGN.
func (p *perConn) expectAssign(timeout time.Duration) perAssignment {
	p.t.Helper()
	r := p.recv(timeout)
	a, err := perParseAssign(r)
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	return a
}

// grabOne sends one GRAB_JOB and waits for its JOB_ASSIGN.
func (p *perConn) grabOne(timeout time.Duration) perAssignment {
	p.t.Helper()
	id := p.newID()
	p.grab(id)
	a := p.expectAssign(timeout)
	if a.msgID != id {
		p.t.Fatalf("%s: GRAB_JOB %q answered as %q", p.name, id, a.msgID)
	}
	return a
}

func (p *perConn) workDone(handle string) { p.t.Helper(); p.send(p.newID(), perWorkDone, handle) }
func (p *perConn) workFail(handle string) { p.t.Helper(); p.send(p.newID(), perWorkFail, handle) }

// schedLater sends SCHED_LATER handle, delay, step.
func (p *perConn) schedLater(handle string, delay, step int) {
	p.t.Helper()
	p.send(p.newID(), perSchedLater, handle, strconv.Itoa(delay), strconv.Itoa(step))
}

// ---------------------------------------------------------------------------
// The client's own tests (no server).

func TestPeriodicClientEncoding(t *testing.T) {
	// go-periodic's Agent.Send of PING for agent "abc", and of SUBMIT_JOB.
	if got, want := perRequest("abc", perPing), []byte("abc\x00\x01\x09"); !bytes.Equal(got, want) {
		t.Errorf("PING: %q, want %q", got, want)
	}
	if got, want := perRequest("", perSchedLater, "12", "3", "1"), []byte("\x00\x01\x02\x00\x0112\x00\x013\x00\x011"); !bytes.Equal(got, want) {
		t.Errorf("SCHED_LATER: %q, want %q", got, want)
	}
	if got, want := perFrame(perReqMagic, []byte{2}), []byte("\x00REQ\x00\x00\x00\x01\x02"); !bytes.Equal(got, want) {
		t.Errorf("handshake: %q, want %q", got, want)
	}
	big := bytes.Repeat([]byte("x"), 0x10203)
	if got := perFrame(perResMagic, big); !bytes.Equal(got[:8], []byte("\x00RES\x00\x01\x02\x03")) || len(got) != 8+len(big) {
		t.Errorf("header of a 0x10203-byte frame: %q", got[:8])
	}
	if got, want := perMarshalJob(perJob{Name: "n", Func: "f", Workload: "a<b"}),
		`{"job_id":0,"name":"n","func":"f","workload":"a\u003cb","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":""}`; got != want {
		t.Errorf("job JSON %s, want %s", got, want)
	}
}

func TestPeriodicClientDecoding(t *testing.T) {
	frame := func(s string) io.Reader { return strings.NewReader(s) }
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "\x00RES\x00\x00\x00\x03id\x00", want: "id\x00"},
		{in: "\x00RES\x80\x00\x00\x02ab", want: "ab"}, // top bit ignored
		{in: "\x00REQ\x00\x00\x00\x00", err: "magic"},
		{in: "\x00RES\x01\x00\x00\x01", err: "limit"},
		{in: "\x00RES\x00\x00\x00\x05ab", err: "unexpected EOF"},
	} {
		got, err := perReadFrame(frame(tc.in), perResMagic, perReadLimit)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %q, %v; want error %q", tc.in, got, err, tc.err)
			}
		} else if err != nil || string(got) != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}

	// The message id ends at the first separator, a NUL before it
	// included.
	r, err := perParseReply([]byte("a\x00\x00\x01\x05\x00\x017\x00\x01{}"))
	if err != nil || r.msgID != "a\x00" {
		t.Fatalf("reply: %v %v", r, err)
	}
	if cmd, data, ok := r.command(); !ok || cmd != perJobAssign || string(data) != "7\x00\x01{}" {
		t.Errorf("command: %d %q %v", cmd, data, ok)
	}
	if _, _, ok := (perReply{body: []byte("f,1,2,3\n")}).command(); ok {
		t.Error("a STATUS body read as a command")
	}
	if _, err := perParseReply([]byte("no separator")); err == nil {
		t.Error("a reply without separator parsed")
	}

	good := `{"job_id":7,"name":"n","func":"f","workload":"w","timeout":1,"sched_at":2,"run_at":3,"counter":4,"status":"ready"}`
	a, err := perParseAssign(perReply{msgID: "g", body: []byte("\x05\x00\x017\x00\x01" + good)})
	if err != nil || a.handle != "7" || a.job != (perJob{7, "n", "f", "w", 1, 2, 3, 4, "ready"}) {
		t.Errorf("assign: %+v %v", a, err)
	}
	for _, bad := range []string{
		"\x05\x00\x018\x00\x01" + good,  // handle != job_id
		"\x05\x00\x0107\x00\x01" + good, // not canonical decimal
		"\x05\x00\x017" + good,          // no separator
		"\x10",                          // SUCCESS
		"\x05\x00\x017\x00\x01" + `{"name":"n","job_id":7,"func":"f","workload":"w","timeout":1,"sched_at":2,"run_at":3,"counter":4,"status":"ready"}`,
		"\x05\x00\x017\x00\x01" + `{"job_id":7,"name":"n","func":"f","workload":"w","timeout":1,"sched_at":2,"run_at":3,"counter":4}`,
		"\x05\x00\x017\x00\x01" + `{"job_id":7,"name":"n","func":"f","workload":"w","timeout":1.5,"sched_at":2,"run_at":3,"counter":4,"status":"ready"}`,
		"\x05\x00\x017\x00\x01" + good + " {}",
	} {
		if a, err := perParseAssign(perReply{body: []byte(bad)}); err == nil {
			t.Errorf("%q parsed as %+v", bad, a)
		}
	}

	m, err := perParseStatus([]byte("f,1,2,0\ng h,0,0,0\n"))
	if err != nil || len(m) != 2 || m["f"] != (perStat{1, 2, 0}) || m["g h"] != (perStat{}) {
		t.Errorf("status: %v %v", m, err)
	}
	for _, bad := range []string{"f,1,2,0", "f,1,2\n", "f,1,2,x\n", "f,1,2,-1\n", "f,1,1,1\nf,1,1,1\n"} {
		if m, err := perParseStatus([]byte(bad)); err == nil {
			t.Errorf("status %q parsed as %v", bad, m)
		}
	}
}

// The client against a scripted peer over a pipe: pipelined requests, a
// reply read in pieces, and the close check.
func TestPeriodicClientConn(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	p := &perConn{t: t, c: a, r: bufio.NewReader(a), name: "client"}
	got := make(chan []byte, 1)
	go func() {
		defer b.Close()
		br := bufio.NewReader(b)
		var in []byte
		for range 2 {
			f, err := perReadFrame(br, perReqMagic, perReadLimit)
			if err != nil {
				got <- nil
				return
			}
			in = append(in, f...)
			in = append(in, '|')
		}
		got <- in
		out := perFrame(perResMagic, []byte("m1\x00\x01\x0a"))
		for _, c := range out { // a byte at a time
			b.Write([]byte{c})
		}
	}()
	p.sendPayload([]byte{perTypeClient})
	p.ping()
	if g := <-got; string(g) != "\x01|m1\x00\x01\x09|" {
		t.Errorf("peer read %q", g)
	}
	if err := p.waitClosed(time.Second); err != nil {
		t.Errorf("waitClosed: %v", err)
	}
}
