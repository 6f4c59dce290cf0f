package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
)

// The byte strings below are built by hand from the protocol's description
// (docs/periodic.md) and the real server's protocol package: magic, 4-byte big-endian size, then
// msgID \x00\x01 cmd [\x00\x01 data].

func TestWritePeriodic(t *testing.T) {
	job := `{"job_id":0,"name":"n1","func":"f","workload":"w","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":""}`
	tests := []struct {
		name  string
		write func(w *bufio.Writer) error
		want  string
	}{
		{"client handshake", func(w *bufio.Writer) error { return writePeriodicHandshake(w, periodicClient) },
			"\x00REQ\x00\x00\x00\x01\x01"},
		{"worker handshake", func(w *bufio.Writer) error { return writePeriodicHandshake(w, periodicWorker) },
			"\x00REQ\x00\x00\x00\x01\x02"},
		{"GRAB_JOB", func(w *bufio.Writer) error { return writePeriodic(w, []byte("0"), pcmdGrabJob) },
			"\x00REQ\x00\x00\x00\x04" + "0\x00\x01\x01"},
		{"PING", func(w *bufio.Writer) error { return writePeriodic(w, []byte("ping"), pcmdPing) },
			"\x00REQ\x00\x00\x00\x07" + "ping\x00\x01\x09"},
		{"CAN_DO", func(w *bufio.Writer) error { return writePeriodic(w, []byte("cando"), pcmdCanDo, []byte("fn")) },
			"\x00REQ\x00\x00\x00\x0c" + "cando\x00\x01\x07\x00\x01fn"},
		{"WORK_DONE", func(w *bufio.Writer) error { return writePeriodic(w, []byte("12"), pcmdWorkDone, []byte("4711")) },
			"\x00REQ\x00\x00\x00\x0b" + "12\x00\x01\x03\x00\x014711"},
		{"STATUS", func(w *bufio.Writer) error { return writePeriodic(w, []byte("status"), pcmdStatus) },
			"\x00REQ\x00\x00\x00\x09" + "status\x00\x01\x0e"},
		{"SUBMIT_JOB", func(w *bufio.Writer) error { return writePeriodic(w, []byte("7"), pcmdSubmitJob, []byte(job)) },
			"\x00REQ\x00\x00\x00\x74" + "7\x00\x01\x0d\x00\x01" + job},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			if err := tt.write(w); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			if got := buf.String(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestWritePeriodicError(t *testing.T) {
	failing := bufio.NewWriterSize(errWriter{}, 16)
	if err := writePeriodic(failing, []byte("1"), pcmdSubmitJob, bytes.Repeat([]byte("x"), 64)); err == nil {
		t.Error("a write to a failing connection reported no error")
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestPeriodicJobJSON: the JSON a client submits is the real server's Job,
// every field in its order, and decodes as the server decodes it.
func TestPeriodicJobJSON(t *testing.T) {
	got := appendPeriodicJob([]byte("junk"), "bench-f", []byte("c1-42"), []byte("1700000000123456789xxxx"), 1700000002)
	want := `junk{"job_id":0,"name":"c1-42","func":"bench-f","workload":"1700000000123456789xxxx","timeout":0,"sched_at":1700000002,"run_at":0,"counter":0,"status":""}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var job struct {
		ID      int64  `json:"job_id"`
		Name    string `json:"name"`
		Func    string `json:"func"`
		Args    string `json:"workload"`
		Timeout int64  `json:"timeout"`
		SchedAt int64  `json:"sched_at"`
		RunAt   int64  `json:"run_at"`
		Counter int64  `json:"counter"`
		Status  string `json:"status"`
	}
	dec := json.NewDecoder(bytes.NewReader(got[len("junk"):]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&job); err != nil {
		t.Fatal(err)
	}
	if job.Name != "c1-42" || job.Func != "bench-f" || job.Args != "1700000000123456789xxxx" || job.SchedAt != 1700000002 {
		t.Errorf("decoded %+v", job)
	}
}

// pres builds a response frame.
func pres(payload string) string {
	n := len(payload)
	return "\x00RES" + string([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) + payload
}

func TestPeriodicReader(t *testing.T) {
	assign := "3\x00\x01\x05\x00\x014711\x00\x01" + `{"job_id":4711,"name":"c0-1","func":"f","workload":"w","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":"ready"}`
	stream := pres("7\x00\x01\x10") + // SUCCESS
		pres(assign) +
		pres("status\x00\x01f,1,2,0\ng,0,5,0\n") + // STATUS: no command byte
		"\x00RES\x80\x00\x00\x04" + "p\x00\x01\x0a" // PONG, size with the top bit set
	want := []string{"7\x00\x01\x10", assign, "status\x00\x01f,1,2,0\ng,0,5,0\n", "p\x00\x01\x0a"}
	readers := map[string]func() io.Reader{
		"whole":        func() io.Reader { return strings.NewReader(stream) },
		"one byte":     func() io.Reader { return iotest.OneByteReader(strings.NewReader(stream)) },
		"half packets": func() io.Reader { return iotest.HalfReader(strings.NewReader(stream)) },
	}
	for name, reader := range readers {
		for _, size := range []int{16, 4096} { // 16: the assign is read in pieces
			t.Run(fmt.Sprintf("%s/buffer %d", name, size), func(t *testing.T) {
				pr := newPeriodicReader(reader(), size)
				for _, w := range want {
					got, err := pr.next()
					if err != nil {
						t.Fatal(err)
					}
					if string(got) != w {
						t.Errorf("got %q, want %q", got, w)
					}
				}
				if _, err := pr.next(); err != io.EOF {
					t.Errorf("after the last frame: %v, want EOF", err)
				}
			})
		}
	}
}

// timeoutReader returns a deadline error every other read, as a paced
// client's connection does when its timer goes off mid-frame.
type timeoutReader struct {
	r    io.Reader
	tick bool
}

func (t *timeoutReader) Read(p []byte) (int, error) {
	t.tick = !t.tick
	if t.tick {
		return 0, os.ErrDeadlineExceeded
	}
	return t.r.Read(p[:min(len(p), 3)])
}

func TestPeriodicReaderSurvivesDeadlines(t *testing.T) {
	frames := []string{"1\x00\x01\x10", "22\x00\x01\x10", "333\x00\x01\x10"}
	pr := newPeriodicReader(&timeoutReader{r: strings.NewReader(pres(frames[0]) + pres(frames[1]) + pres(frames[2]))}, 64)
	var got []string
	for tries := 0; len(got) < len(frames) && tries < 100; tries++ {
		payload, err := pr.next()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(payload))
	}
	if strings.Join(got, "|") != strings.Join(frames, "|") {
		t.Errorf("got %q, want %q", got, frames)
	}

	// A frame bigger than the buffer cut by a deadline is lost for good,
	// and not mistaken for a timer.
	big := pres("1\x00\x01\x05\x00\x019\x00\x01" + strings.Repeat("x", 100))
	pr = newPeriodicReader(&timeoutReader{r: strings.NewReader(big), tick: true}, 16)
	var err error
	for range 100 {
		if _, err = pr.next(); !errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
	}
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), "frame") {
		t.Errorf("a big frame cut by a deadline: %v", err)
	}
	if _, again := pr.next(); again == nil || again.Error() != err.Error() {
		t.Errorf("after a cut frame: %v, want %v again", again, err)
	}
}

func TestPeriodicReaderErrors(t *testing.T) {
	tests := []struct {
		name, stream, want string
	}{
		{"request magic", "\x00REQ\x00\x00\x00\x04" + "1\x00\x01\x10", "magic"},
		{"huge", "\x00RES\x7f\x00\x00\x00", "response payload"},
		{"truncated", "\x00RES\x00\x00\x00\x09" + "1\x00\x01", "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newPeriodicReader(strings.NewReader(tt.stream), 64).next()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestPeriodicReaderComplete(t *testing.T) {
	tests := []struct {
		name     string
		buffered string
		want     bool
	}{
		{"nothing", "", false},
		{"part of a header", "\x00RES\x00", false},
		{"header without payload", pres("7\x00\x01\x10")[:9], false},
		{"whole frame", pres("7\x00\x01\x10"), true},
		{"top bit of the size", "\x00RES\x80\x00\x00\x04" + "p\x00\x01\x0a", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := newPeriodicReader(strings.NewReader(tt.buffered), 64)
			pr.r.Peek(len(tt.buffered))
			if got := pr.complete(); got != tt.want {
				t.Errorf("complete() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParsePeriodic(t *testing.T) {
	tests := []struct {
		name, payload string
		msgID         string
		cmd           byte
		data          string
		err           bool
	}{
		{"SUCCESS", "7\x00\x01\x10", "7", pcmdSuccess, "", false},
		{"PONG", "ping\x00\x01\x0a", "ping", pcmdPong, "", false},
		{"JOB_ASSIGN", "0\x00\x01\x05\x00\x0142\x00\x01{}", "0", pcmdJobAssign, "42\x00\x01{}", false},
		{"STATUS text", "s\x00\x01f,0,1,0\n", "s", pcmdUnknown, "f,0,1,0\n", false},
		{"error text", "9\x00\x01job func and name are required", "9", pcmdUnknown, "job func and name are required", false},
		{"empty msgID", "\x00\x01\x10", "", pcmdSuccess, "", false},
		{"no separator", "7\x10", "", 0, "", true},
		{"empty command", "7\x00\x01\x00\x01data", "", 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgID, cmd, data, err := parsePeriodic([]byte(tt.payload))
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if err == nil && (string(msgID) != tt.msgID || cmd != tt.cmd || string(data) != tt.data) {
				t.Errorf("got %q %d %q, want %q %d %q", msgID, cmd, data, tt.msgID, tt.cmd, tt.data)
			}
		})
	}
}

func TestJSONScan(t *testing.T) {
	job := []byte(`{"job_id":4711,"name":"c0-1","func":"f","workload":"1700000000123456789xx","timeout":0,"sched_at":1700000002,"run_at":0,"counter":-3,"status":"ready"}`)
	for key, want := range map[string]int64{`"job_id"`: 4711, `"sched_at"`: 1700000002, `"counter"`: -3, `"run_at"`: 0} {
		if got, ok := jsonInt(job, key); !ok || got != want {
			t.Errorf("jsonInt %s = %d, %v; want %d", key, got, ok, want)
		}
	}
	if got, ok := jsonStringPrefixInt(job, `"workload"`); !ok || got != 1700000000123456789 {
		t.Errorf("workload stamp %d, %v", got, ok)
	}
	spaced := []byte(`{"sched_at" : 12, "workload": "34x"}`)
	if got, ok := jsonInt(spaced, `"sched_at"`); !ok || got != 12 {
		t.Errorf("spaced sched_at %d, %v", got, ok)
	}
	if got, ok := jsonStringPrefixInt(spaced, `"workload"`); !ok || got != 34 {
		t.Errorf("spaced workload %d, %v", got, ok)
	}
	for _, bad := range []string{`{}`, `{"sched_at":"x"}`, `{"sched_at"}`, `{"workload":"xyz"}`, `{"workload":12}`} {
		if _, ok := jsonInt([]byte(bad), `"sched_at"`); ok {
			t.Errorf("jsonInt found sched_at in %s", bad)
		}
		if _, ok := jsonStringPrefixInt([]byte(bad), `"workload"`); ok {
			t.Errorf("jsonStringPrefixInt found a workload stamp in %s", bad)
		}
	}
}

func TestParsePeriodicStatus(t *testing.T) {
	got, err := parsePeriodicStatus("f,1,1000000,0\nodd,name,0,3,1\n\n")
	if err != nil {
		t.Fatal(err)
	}
	if got["f"] != (PeriodicFuncStatus{1, 1000000, 0}) || got["odd,name"] != (PeriodicFuncStatus{0, 3, 1}) || len(got) != 2 {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"f,1,2\n", "f,1,x,0\n"} {
		if _, err := parsePeriodicStatus(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestSlotOf(t *testing.T) {
	for id, want := range map[string]int{"0": 0, "15": 15} {
		if got, ok := slotOf([]byte(id), 16); !ok || got != want {
			t.Errorf("slotOf(%q) = %d, %v", id, got, ok)
		}
	}
	for _, bad := range []string{"", "16", "-1", "1x", "ping", "9999999999"} {
		if _, ok := slotOf([]byte(bad), 16); ok {
			t.Errorf("slotOf(%q) accepted", bad)
		}
	}
}
