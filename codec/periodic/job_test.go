package periodic

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"switchyard/codec/periodic/internal/driver"
)

// awkward are strings that encoding/json writes other than as they are, and
// some it writes as they are that a careless encoder would not.
var awkward = []string{
	"",
	"plain",
	`"quoted"`,
	`back\slash`,
	"/slash/",
	"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f",
	"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f",
	"\b\f\n\r\t",
	" ~\x7f",
	"<script>alert('x')</script> & more",
	"line\u2028separator\u2029paragraph",
	"\u2027\u202a almost",
	"héllo wörld ✓ 日本語 🎉",
	"\ufffd already a replacement",
	"\xff",
	"bad \xc3\x28 sequence",
	"truncated \xe2\x82",
	"\xed\xa0\x80 surrogate in UTF-8",
	"\xf4\x90\x80\x80 beyond U+10FFFF",
	"\xc0\xaf overlong",
	"trailing \xf0\x9f\x98",
	"{\"to\":\"a@b\",\"n\":[1,2]}",
	"a" + Sep + "b",
	strings.Repeat("long workload <&> \"\\\n ", 4000),
}

var extremeInts = []int64{0, 1, -1, 42, 1500000000, math.MaxInt64, math.MinInt64, math.MaxInt32 + 1, -1e18}

// marshalReal is what the real server writes for j.
func marshalReal(t testing.TB, j *Job) []byte {
	rj := toDriver(j)
	b, err := json.Marshal(rj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toDriver(j *Job) driver.Job {
	status := "ready"
	if j.Processing {
		status = "processing"
	}
	return driver.Job{ID: j.ID, Name: string(j.Name), Func: string(j.Func), Args: string(j.Workload),
		Timeout: j.Timeout, SchedAt: j.SchedAt, RunAt: j.RunAt, Counter: j.Counter, Status: status}
}

func TestAppendJobExample(t *testing.T) {
	j := Job{ID: 1, Name: []byte("n"), Func: []byte("f"), Workload: []byte("w")}
	want := `{"job_id":1,"name":"n","func":"f","workload":"w","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":"ready"}`
	if got := AppendJob(nil, &j); string(got) != want {
		t.Errorf("AppendJob =\n%s\nwant\n%s", got, want)
	}
}

// TestAppendJobMarshal compares AppendJob with encoding/json.Marshal of the
// real struct, for every awkward string in every string field and extreme
// numbers in every number field.
func TestAppendJobMarshal(t *testing.T) {
	check := func(j *Job) {
		t.Helper()
		want := marshalReal(t, j)
		got := AppendJob([]byte("prefix"), j)
		if string(got) != "prefix"+string(want) {
			t.Fatalf("AppendJob(%+v) =\n%q\nencoding/json:\n%q", *j, got[6:], want)
		}
	}
	for _, s := range awkward {
		b := []byte(s)
		check(&Job{Name: b})
		check(&Job{Func: b, Processing: true})
		check(&Job{Workload: b, Name: []byte("n"), Func: []byte("f")})
	}
	for _, n := range extremeInts {
		check(&Job{ID: n, Timeout: n, SchedAt: n, RunAt: n, Counter: n})
		check(&Job{ID: -n, Counter: n / 3, Processing: true})
	}
	// Every single byte and every rune around the ones escaped.
	for c := 0; c < 256; c++ {
		check(&Job{Workload: []byte{byte(c), 'x', byte(c)}})
	}
	for r := rune(0x2000); r < 0x2100; r++ {
		check(&Job{Name: []byte(string(r))})
	}
}

// TestAppendJobIgnoresStatus: the status written is Processing's, whatever
// Status holds from a decode.
func TestAppendJobIgnoresStatus(t *testing.T) {
	j := Job{Status: []byte("processing")}
	if got := string(AppendJob(nil, &j)); !strings.HasSuffix(got, `"status":"ready"}`) {
		t.Errorf("AppendJob with Status processing, Processing false = %s", got)
	}
}

func TestAppendJobList(t *testing.T) {
	jobs := []Job{
		{ID: 1, Name: []byte("a"), Func: []byte("f"), Workload: []byte("<x>"), Processing: true, RunAt: 1500000001},
		{ID: 2, Name: []byte("b"), Func: []byte("f"), SchedAt: 1500000000, Counter: 3},
		{ID: 3, Name: []byte("c\n"), Func: []byte("g")},
	}
	for n := 1; n <= len(jobs); n++ {
		rjs := make([]driver.Job, n)
		dst := AppendJobListStart([]byte("id" + Sep))
		for i := range jobs[:n] {
			rjs[i] = toDriver(&jobs[i])
			dst = AppendJobListItem(dst, &jobs[i])
		}
		dst = AppendJobListEnd(dst)
		want, err := json.Marshal(map[string][]driver.Job{"jobs": rjs})
		if err != nil {
			t.Fatal(err)
		}
		if string(dst) != "id"+Sep+string(want) {
			t.Errorf("%d jobs:\n%s\nencoding/json:\n%s", n, dst, want)
		}
	}
}

// TestAppendJobAssign: the reply to GRAB_JOB is the real server's
// handleJobAssign: msgID Sep 5 Sep decimal id Sep job JSON.
func TestAppendJobAssign(t *testing.T) {
	j := Job{ID: 7, Name: []byte("report-42"), Func: []byte("mail"), Workload: []byte(`{"to":"a@b"}`),
		Timeout: 30, SchedAt: 1500000000}
	want := rawFrame(ResMagic, agentB+Sep+"\x05"+Sep+"7"+Sep+assignJSON)
	if got := AppendJobAssign([]byte("x"), []byte(agentB), &j); string(got) != "x"+want {
		t.Errorf("AppendJobAssign =\n%q\nwant\n%q", got[1:], want)
	}
	// What go-periodic makes of it: JOB_ASSIGN, then handle and JSON.
	p, _, _, _ := ParseFrame([]byte(want), ResMagic, 0)
	var m Message
	if err := ParseMessage(p, &m); err != nil || m.Cmd != JobAssign {
		t.Fatalf("ParseMessage = %v %v", m.Cmd, err)
	}
	handle, job, _ := NextArg(m.Data)
	if string(handle) != "7" || string(job) != assignJSON {
		t.Errorf("handle %q job %q", handle, job)
	}
}
