package periodic

import (
	"bytes"
	"slices"
	"testing"
)

// wireFrame is one whole frame of the protocol and what ParseMessage makes
// of its payload.
type wireFrame struct {
	name   string
	bytes  string
	magic  string
	id     string
	cmd    Command
	data   string
	noData bool  // Data must be nil, not just empty
	err    error // ParseMessage's error; the other fields are then unused

	// enc, when set, writes the frame with this package's encoders.
	enc func() []byte
}

// Agent ids as go-periodic makes them (shortid.Generate).
const (
	agentA = "Nk8mL2-Gg"
	agentB = "4yQ_h1wE"
)

// Job JSON as go-periodic's Client.SubmitJob and RemoveJob send it: the
// json.Marshal of a driver.Job with only some fields set.
const (
	submitJSON = `{"job_id":0,"name":"report-42","func":"mail","workload":"{\"to\":\"a@b\"}","timeout":30,"sched_at":1500000000,"run_at":0,"counter":0,"status":""}`
	removeJSON = `{"job_id":0,"name":"report-42","func":"mail","workload":"","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":""}`
	assignJSON = `{"job_id":7,"name":"report-42","func":"mail","workload":"{\"to\":\"a@b\"}","timeout":30,"sched_at":1500000000,"run_at":0,"counter":0,"status":"ready"}`
	dumpJSON   = `{"jobs":[` + assignJSON + `]}`
)

// wireFrames returns every frame the tables know: each request go-periodic
// sends (built by its rules: agent id, Sep, command byte, and Sep and data
// when data is not nil) and each reply the real server sends (built by its
// handlers' rules), plus the payloads on which the real server panics.
func wireFrames() []wireFrame {
	req := func(name, id string, cmd Command, data ...string) wireFrame {
		p := id + Sep + string([]byte{byte(cmd)})
		f := wireFrame{name: name, magic: ReqMagic, id: id, cmd: cmd, noData: true}
		var args [][]byte
		if len(data) > 0 {
			p += Sep + data[0]
			f.data, f.noData = data[0], data[0] == ""
			args = bytes.Split([]byte(data[0]), []byte(Sep))
		}
		f.bytes = rawFrame(ReqMagic, p)
		f.enc = func() []byte { return AppendRequest(nil, []byte(id), cmd, args...) }
		return f
	}
	res := func(name, id string, cmd Command, data ...string) wireFrame {
		f := req(name, id, cmd, data...)
		f.magic, f.bytes = ResMagic, ResMagic+f.bytes[len(ReqMagic):]
		f.enc = func() []byte { return AppendReply(nil, []byte(id), cmd) }
		if len(data) > 0 {
			f.enc = nil // JOB_ASSIGN: TestAppendJobAssign
		}
		return f
	}
	// STATUS, DUMP chunks and EOF carry no command byte: the client finds
	// UNKNOWN and the text, or the text's only byte as the command.
	text := func(name, id, body string) wireFrame {
		f := wireFrame{name: name, bytes: rawFrame(ResMagic, id+Sep+body), magic: ResMagic, id: id, cmd: Unknown, data: body,
			enc: func() []byte { return AppendData(nil, []byte(id), []byte(body)) }}
		if len(body) == 1 {
			f.cmd, f.data, f.noData = Command(body[0]), "", true
		}
		return f
	}
	bad := func(name, magic, payload string, err error) wireFrame {
		return wireFrame{name: name, bytes: rawFrame(magic, payload), magic: magic, err: err}
	}
	return []wireFrame{
		// Handshakes have no separator; the engine reads their byte itself.
		bad("handshake client", ReqMagic, "\x01", ErrNoSeparator),
		bad("handshake worker", ReqMagic, "\x02", ErrNoSeparator),

		req("client PING", agentA, Ping),
		req("client SUBMIT_JOB", agentA, SubmitJob, submitJSON),
		req("client STATUS", agentA, Status),
		req("client DROP_FUNC", agentA, DropFunc, "mail"),
		req("client REMOVE_JOB", agentB, RemoveJob, removeJSON),
		req("client DUMP", agentA, Dump),
		req("client LOAD", agentA, Load, dumpJSON),
		req("worker GRAB_JOB", agentB, GrabJob),
		req("worker CAN_DO", agentB, CanDo, "mail"),
		req("worker CANT_DO", agentB, CantDo, "mail"),
		req("worker WORK_DONE", agentB, WorkDone, "7"),
		req("worker WORK_FAIL", agentB, WorkFail, "7"),
		req("worker SCHED_LATER", agentB, SchedLater, "7"+Sep+"60"),
		req("worker SCHED_LATER step", agentB, SchedLater, "7"+Sep+"60"+Sep+"1"),
		req("worker SLEEP", agentB, Sleep),
		req("worker PING", agentB, Ping),
		req("CAN_DO empty data", agentB, CanDo, ""),
		req("empty id", "", Ping),
		req("id with a NUL", "a\x00b", Ping),
		req("data with Seps", agentA, CanDo, "a"+Sep+Sep+"b"+Sep),
		req("command byte 200", agentA, 200),

		res("server PONG", agentA, Pong),
		res("server SUCCESS", agentA, Success),
		res("server UNKNOWN", agentA, Unknown),
		res("server NOOP", agentB, Noop),
		res("server JOB_ASSIGN", agentB, JobAssign, "7"+Sep+assignJSON),
		text("server STATUS", agentA, "mail,1,2,0\nsms,0,1,0\n"),
		text("server STATUS empty", agentA, ""),
		text("server DUMP chunk", agentA, dumpJSON),
		text("server DUMP EOF", agentA, "EOF"),
		text("server error text", agentA, "job func and name are required"),
		bad("server bare error", ResMagic, "invalid character 'x' looking for beginning of value", ErrNoSeparator),

		// What the real ParseCommand makes of odd payloads.
		{name: "two parts, long second", bytes: rawFrame(ReqMagic, "id"+Sep+"ab"), magic: ReqMagic,
			id: "id", cmd: Unknown, data: "ab"},
		{name: "three parts, long second", bytes: rawFrame(ReqMagic, "id"+Sep+"\x07x"+Sep+"mail"), magic: ReqMagic,
			id: "id", cmd: CanDo, data: "mail"},
		{name: "three parts, empty third", bytes: rawFrame(ReqMagic, "id"+Sep+"\x0d"+Sep), magic: ReqMagic,
			id: "id", cmd: SubmitJob, noData: true},
		{name: "only a Sep", bytes: rawFrame(ReqMagic, Sep), magic: ReqMagic, cmd: Unknown},
		{name: "Sep then a lone NUL", bytes: rawFrame(ReqMagic, "id"+Sep+"\x00"), magic: ReqMagic,
			id: "id", cmd: Noop, noData: true},
		{name: "NUL NUL 1", bytes: rawFrame(ReqMagic, "id\x00"+Sep+"\x09"), magic: ReqMagic,
			id: "id\x00", cmd: Ping, noData: true},
		bad("no separator", ReqMagic, "id\x09", ErrNoSeparator),
		bad("empty payload", ReqMagic, "", ErrNoSeparator),
		bad("NUL without 1", ReqMagic, "id\x00\x09", ErrNoSeparator),
		bad("empty command, three parts", ReqMagic, "id"+Sep+Sep+"data", ErrNoCommand),
		bad("two Seps", ReqMagic, Sep+Sep, ErrNoCommand),
	}
}

func checkMessage(t *testing.T, f wireFrame, m *Message, err error) {
	t.Helper()
	if err != f.err {
		t.Fatalf("%s: ParseMessage error %v, want %v", f.name, err, f.err)
	}
	if err != nil {
		return
	}
	if string(m.ID) != f.id || m.Cmd != f.cmd || string(m.Data) != f.data || f.noData != (m.Data == nil) {
		t.Fatalf("%s: ParseMessage = {%q %v %q (nil %v)}, want {%q %v %q (nil %v)}",
			f.name, m.ID, m.Cmd, m.Data, m.Data == nil, f.id, f.cmd, f.data, f.noData)
	}
	if cap(m.ID) != len(m.ID) {
		t.Fatalf("%s: ID cap %d > len %d", f.name, cap(m.ID), len(m.ID))
	}
}

func TestParseMessage(t *testing.T) {
	for _, f := range wireFrames() {
		p, n, _, err := ParseFrame([]byte(f.bytes), f.magic, 0)
		if err != nil || n != len(f.bytes) {
			t.Fatalf("%s: ParseFrame = %d, %v", f.name, n, err)
		}
		var m Message
		checkMessage(t, f, &m, ParseMessage(p, &m))
		// A Message reused from another frame keeps nothing of it.
		m = Message{ID: []byte("old"), Cmd: Load, Data: []byte("old")}
		checkMessage(t, f, &m, ParseMessage(p, &m))
	}
}

// refParseCommand is the real server's protocol.ParseCommand, rewritten with
// the bytes package as the reference for ParseMessage, panics turned into
// its errors.
func refParseCommand(payload []byte) (id []byte, cmd Command, data []byte, err error) {
	parts := bytes.SplitN(payload, []byte(Sep), 3)
	if len(parts) <= 1 {
		return nil, 0, nil, ErrNoSeparator
	}
	id = parts[0]
	if len(parts) == 2 && len(parts[1]) != 1 {
		return id, Unknown, parts[1], nil
	}
	if len(parts[1]) == 0 {
		return nil, 0, nil, ErrNoCommand
	}
	cmd = Command(parts[1][0])
	if len(parts) == 3 && len(parts[2]) > 0 {
		data = parts[2]
	}
	return id, cmd, data, nil
}

// TestParseMessageReference compares ParseMessage with the reference on
// every short payload over the bytes that matter: 0, 1 and two others.
func TestParseMessageReference(t *testing.T) {
	alphabet := []byte{0, 1, 7, 'x'}
	var payload []byte
	var walk func(n int)
	walk = func(n int) {
		checkAgainstReference(t, payload)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			payload = append(payload, c)
			walk(n - 1)
			payload = payload[:len(payload)-1]
		}
	}
	walk(7)
}

func checkAgainstReference(t *testing.T, payload []byte) {
	t.Helper()
	var m Message
	err := ParseMessage(payload, &m)
	id, cmd, data, rerr := refParseCommand(payload)
	if err != rerr {
		t.Fatalf("ParseMessage(%q) error %v, reference %v", payload, err, rerr)
	}
	if err != nil {
		return
	}
	if !bytes.Equal(m.ID, id) || m.Cmd != cmd || !bytes.Equal(m.Data, data) || (m.Data == nil) != (data == nil) {
		t.Fatalf("ParseMessage(%q) = {%q %v %q}, reference {%q %v %q}", payload, m.ID, m.Cmd, m.Data, id, cmd, data)
	}
}

func TestNextArg(t *testing.T) {
	for _, tc := range []struct {
		data, arg, rest string
		restNil, ok     bool
	}{
		{"", "", "", true, false},
		{"7", "7", "", true, true},
		{"7" + Sep + "60", "7", "60", false, true},
		{"7" + Sep, "7", "", false, true},
		{Sep + "60", "", "60", false, true},
		{"7" + Sep + "60" + Sep + "1", "7", "60" + Sep + "1", false, true},
		{"a\x00b\x01", "a\x00b\x01", "", true, true},
	} {
		arg, rest, ok := NextArg([]byte(tc.data))
		if string(arg) != tc.arg || string(rest) != tc.rest || (rest == nil) != tc.restNil || ok != tc.ok {
			t.Errorf("NextArg(%q) = (%q, %q nil=%v, %v), want (%q, %q nil=%v, %v)",
				tc.data, arg, rest, rest == nil, ok, tc.arg, tc.rest, tc.restNil, tc.ok)
		}
		if cap(arg) != len(arg) {
			t.Errorf("NextArg(%q): arg cap %d > len %d", tc.data, cap(arg), len(arg))
		}
	}
}

func TestSplitArgs(t *testing.T) {
	for _, data := range []string{
		"", "7", "7" + Sep, "7" + Sep + "60", "7" + Sep + "60" + Sep + "1",
		"7" + Sep + "60" + Sep + "1" + Sep + "9", Sep + Sep + Sep, "\x00\x00\x01\x01", "\x01\x00",
	} {
		for n := 1; n <= 4; n++ {
			parts := make([][]byte, n)
			got := parts[:SplitArgs([]byte(data), parts)]
			want := bytes.SplitN([]byte(data), []byte(Sep), n)
			if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("SplitArgs(%q, %d) = %q, bytes.SplitN gives %q", data, n, got, want)
			}
		}
	}
	if n := SplitArgs([]byte("a"+Sep+"b"), nil); n != 0 {
		t.Errorf("SplitArgs into no parts = %d", n)
	}
}

// TestEncodeFrames writes each frame of the tables that the encoders can
// write and compares bytes; with a prefix in dst, which must stay.
func TestEncodeFrames(t *testing.T) {
	for _, f := range wireFrames() {
		if f.enc == nil {
			continue
		}
		if got := f.enc(); string(got) != f.bytes {
			t.Errorf("%s: encoded\n%q\nwant\n%q", f.name, got, f.bytes)
		}
	}
	if got := AppendReply([]byte("x"), []byte(agentA), Pong); string(got) != "x"+rawFrame(ResMagic, agentA+Sep+"\x0a") {
		t.Errorf("AppendReply after a prefix = %q", got)
	}
	if got := AppendData([]byte("x"), []byte(agentA), []byte("EOF")); string(got) != "x"+rawFrame(ResMagic, agentA+Sep+"EOF") {
		t.Errorf("AppendData after a prefix = %q", got)
	}
	if got := AppendRequest([]byte("x"), []byte(agentA), Ping); string(got) != "x"+rawFrame(ReqMagic, agentA+Sep+"\x09") {
		t.Errorf("AppendRequest after a prefix = %q", got)
	}
}

func TestAppendRequestArgs(t *testing.T) {
	got := AppendRequest(nil, []byte(agentB), SchedLater, []byte("7"), []byte("60"), []byte("1"))
	want := rawFrame(ReqMagic, agentB+Sep+"\x02"+Sep+"7"+Sep+"60"+Sep+"1")
	if string(got) != want {
		t.Errorf("AppendRequest = %q, want %q", got, want)
	}
}
