package periodic

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"switchyard/codec/periodic/internal/driver"
)

// fromJob is j as the real struct, Status as decoded.
func fromJob(j *Job) driver.Job {
	return driver.Job{ID: j.ID, Name: string(j.Name), Func: string(j.Func), Args: string(j.Workload),
		Timeout: j.Timeout, SchedAt: j.SchedAt, RunAt: j.RunAt, Counter: j.Counter, Status: string(j.Status)}
}

// sameError reports whether got is want: both nil, or the same type with the
// same fields (the message, and the offset of a syntax or type error).
func sameError(got, want error) bool {
	return reflect.DeepEqual(got, want)
}

// diffDecodeJob decodes data with DecodeJob and with encoding/json into the
// real struct and reports how they differ, or "".
func diffDecodeJob(data []byte) string {
	var want driver.Job
	werr := json.Unmarshal(data, &want)
	// A Job full of another decode's leftovers: nothing may leak through.
	j := Job{ID: 9, Name: []byte("old"), Status: []byte("processing"), Processing: true, Counter: 3}
	err := DecodeJob(data, &j)
	switch {
	case !sameError(err, werr):
		return fmt.Sprintf("error %#v (%v)\nencoding/json: %#v (%v)", err, err, werr, werr)
	case fromJob(&j) != want:
		return fmt.Sprintf("job %+v\nencoding/json: %+v (error %v)", fromJob(&j), want, werr)
	case j.Processing != (want.Status == "processing"):
		return fmt.Sprintf("Processing %v for status %q", j.Processing, want.Status)
	}
	return ""
}

// decodeCases are job texts for the differential tests: what go-periodic
// sends, and every way encoding/json's acceptance can be tested.
var decodeCases = []string{
	submitJSON, removeJSON, assignJSON,
	`{"job_id":1,"name":"n","func":"f","workload":"w","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":"ready"}`,
	`{"job_id":1,"status":"processing"}`, `{"status":"Processing"}`, `{"status":"processing "}`,
	`{}`, `null`, ` null `, `{"name":"n"}`, `{"func":"f","name":"n"}`,
	// case-varied and unknown keys
	`{"NAME":"a","Func":"b","WorkLoad":"c","JOB_ID":2,"Sched_At":3,"RUN_AT":4,"Counter":5,"TimeOut":6,"STATUS":"processing"}`,
	`{"Name":"a","name":"b"}`, `{"name":"a","NAME":"b"}`, `{"nAmE":"x"}`, `{"job-id":1}`, `{"jobid":1}`,
	`{"Args":"x"}`, `{"ID":5}`, `{"id":5}`, `{"job_id ":1}`, `{" name":"x"}`,
	`{"ſtatus":"processing"}`, `{"worKload":"x"}`, `{"wor\u212aload":"kelvin"}`, `{"\u006eame":"esc"}`,
	`{"na\u006de":"esc"}`, `{"name\u0000":"x"}`, "{\"name\xff\":\"x\"}", `{"":1}`,
	`{"extra":1,"name":"n"}`, `{"extra":{"a":[1,2,{"b":null}],"c":"d"},"name":"n"}`, `{"x":[[[[]]]],"name":"n"}`,
	`{"x":true,"y":false,"z":null,"w":-1.5e+10,"v":"s\"\u1234"}`,
	// nulls
	`{"name":null}`, `{"name":"a","name":null}`, `{"job_id":5,"job_id":null}`, `{"job_id":null,"name":null,"status":null}`,
	// numbers
	`{"job_id":0}`, `{"job_id":-0}`, `{"job_id":9223372036854775807}`, `{"job_id":9223372036854775808}`,
	`{"job_id":-9223372036854775808}`, `{"job_id":-9223372036854775809}`, `{"counter":99999999999999999999}`,
	`{"job_id":1.0}`, `{"job_id":1.5}`, `{"job_id":1e3}`, `{"job_id":1E3}`, `{"job_id":-1e-3}`, `{"timeout":0.0}`,
	`{"job_id":01}`, `{"job_id":-}`, `{"job_id":+1}`, `{"job_id":.5}`, `{"job_id":1.}`, `{"job_id":0x10}`,
	`{"job_id":Infinity}`, `{"job_id":NaN}`, `{"job_id":1,"job_id":2}`, `{"job_id":1e400}`,
	// wrong types
	`{"job_id":"1"}`, `{"job_id":true}`, `{"job_id":[1]}`, `{"job_id":{}}`, `{"name":1}`, `{"name":true}`,
	`{"name":["a"]}`, `{"name":{"a":1}}`, `{"status":false}`, `{"name":1,"func":"f","job_id":"x"}`,
	`{"job_id":"x","name":1}`, `[]`, `[{"name":"n"}]`, `"job"`, `1`, `true`, `false`,
	// strings
	`{"name":""}`, `{"name":"\"\\\/\b\f\n\r\t"}`, `{"name":"\u0041\u00e9\u20ac"}`, `{"name":"\uD83D\uDE00"}`,
	`{"name":"\uD83D"}`, `{"name":"\uDE00\uD83D"}`, `{"name":"\uD83D\uD83D\uDE00"}`, `{"name":"\uD83Dx"}`,
	`{"name":"<>&\u003c\u003e\u0026"}`, `{"name":"\u2028\u2029"}`, "{\"name\":\"\u2028\"}", `{"name":"é ✓ 🎉"}`,
	"{\"name\":\"\xff\"}", "{\"name\":\"a\xc3\x28\"}", "{\"name\":\"\xed\xa0\x80\"}", "{\"name\":\"\xe2\x82\"}",
	"{\"name\":\"\x00\"}", "{\"name\":\"\x1f\"}", "{\"name\":\"\t\"}", "{\"name\":\"\x7f\"}", `{"name":"\x"}`,
	`{"name":"\'"}`, `{"name":"\u12"}`, `{"name":"unterminated}`, `{"name":"a","func":"\u0062","workload":"\n"}`,
	`{"workload":"{\"to\":\"a@b\",\"n\":[1,2]}"}`,
	// whitespace everywhere
	" \t\r\n{ \t\r\n\"name\" \t\r\n: \t\r\n\"n\" \t\r\n, \t\r\n\"job_id\" \n:\n 5 \n} \t\r\n",
	"{\"name\":\"n\"}\n", "\n{}", "{\f}", "{\"name\":\"n\"}\v", "\u00a0{}", "\xef\xbb\xbf{}",
	// broken
	``, ` `, `{`, `}`, `{"name"}`, `{"name":}`, `{"name":"n",}`, `{,"name":"n"}`, `{"name":"n" "func":"f"}`,
	`{"name":"n"}}`, `{"name":"n"}x`, `{"name":"n"} {}`, `{"name":"n"}null`, `{"name":"n"]`, `{name:"n"}`,
	`{'name':'n'}`, `{"job_id":1 2}`, `{"job_id":tru}`, `{"job_id":nul}`, `{"name":nulls}`, `{"x":[1,]}`,
	`{"x":{"a"}}`, `{"x":[}`, `{"job_id":"x"} junk`, `{"job_id":1.5,`, `nul`, `nullx`, `{"x":[1}`,
	// deep values under an unknown key, around the depth limit
	`{"x":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `,"name":"deep"}`,
	`{"x":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `,"name":"deep"}`,
	`{"x":` + strings.Repeat(`{"a":`, maxDepth-1) + "1" + strings.Repeat("}", maxDepth-1) + `}`,
	`{"job_id":` + strings.Repeat("[", 50) + strings.Repeat("]", 50) + `}`,
	// duplicates
	`{"name":"a","name":"b","NAME":"c"}`, `{"status":"processing","status":"ready"}`,
	`{"status":"ready","Status":"processing"}`, `{"job_id":1,"JOB_ID":"x","job_id":3}`,
	// long
	`{"name":"` + strings.Repeat("a", 100000) + `","workload":"` + strings.Repeat(`\"\u00e9`, 10000) + `"}`,
}

func TestDecodeJobDifferential(t *testing.T) {
	for _, s := range decodeCases {
		if d := diffDecodeJob([]byte(s)); d != "" {
			t.Errorf("DecodeJob(%.200q):\n%s", s, d)
		}
	}
}

// TestDecodeJobErrorTexts pins the texts the real server sends for bad
// SUBMIT_JOB JSON, which the engine passes on.
func TestDecodeJobErrorTexts(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"job_id":"1"}`, "json: cannot unmarshal string into Go struct field Job.job_id of type int64"},
		{`{"name":1}`, "json: cannot unmarshal number into Go struct field Job.name of type string"},
		{`{"timeout":1.5}`, "json: cannot unmarshal number 1.5 into Go struct field Job.timeout of type int64"},
		{`[]`, "json: cannot unmarshal array into Go value of type driver.Job"},
		{``, "unexpected end of JSON input"},
		{`{"name":"n"}x`, "invalid character 'x' after top-level value"},
		{`{"name" "n"}`, "invalid character '\"' after object key"},
	} {
		var j Job
		if err := DecodeJob([]byte(tc.in), &j); err == nil || err.Error() != tc.want {
			t.Errorf("DecodeJob(%q) error %v, want %q", tc.in, err, tc.want)
		}
	}
}

// within reports whether s lies inside buf (empty s always does).
func within(buf, s []byte) bool {
	if len(s) == 0 {
		return true
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	p := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return p >= lo && p+uintptr(len(s)) <= lo+uintptr(len(buf))
}

// TestDecodeJobViews: strings without escapes are views into the input,
// capped; escaped ones are not, and later ones do not clobber earlier ones.
func TestDecodeJobViews(t *testing.T) {
	data := []byte(`{"name":"plain","func":"esc\u0061ped","workload":"more\nescapes","status":"processing"}`)
	var j Job
	if err := DecodeJob(data, &j); err != nil {
		t.Fatal(err)
	}
	if !within(data, j.Name) || !within(data, j.Status) || within(data, j.Func) || within(data, j.Workload) {
		t.Errorf("views: name %v status %v func %v workload %v",
			within(data, j.Name), within(data, j.Status), within(data, j.Func), within(data, j.Workload))
	}
	if string(j.Func) != "escaped" || string(j.Workload) != "more\nescapes" || !j.Processing {
		t.Errorf("decoded %q %q %v", j.Func, j.Workload, j.Processing)
	}
	for _, b := range [][]byte{j.Name, j.Func, j.Workload, j.Status} {
		if cap(b) != len(b) {
			t.Errorf("%q: cap %d > len %d", b, cap(b), len(b))
		}
	}
}

// TestDecodeJobAllocs: the fast path allocates nothing, escapes included
// once the scratch has grown.
func TestDecodeJobAllocs(t *testing.T) {
	for _, s := range []string{submitJSON, assignJSON, `{"NAME":"x","extra":[1,{"a":null}]}`, `null`} {
		data := []byte(s)
		var j Job
		if n := testing.AllocsPerRun(100, func() {
			if err := DecodeJob(data, &j); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("DecodeJob(%s): %v allocs", s, n)
		}
	}
}

// diffDecodeJobList runs DecodeJobList and encoding/json's Unmarshal into
// the real server's map[string][]driver.Job, and reports how they differ.
func diffDecodeJobList(data []byte) string {
	var m map[string][]driver.Job
	werr := json.Unmarshal(data, &m)
	var got []driver.Job
	err := DecodeJobList(data, func(j *Job) error {
		if j.Processing != (string(j.Status) == "processing") {
			return errors.New("Processing disagrees with Status")
		}
		got = append(got, fromJob(j))
		return nil
	})
	switch {
	case !sameError(err, werr):
		return fmt.Sprintf("error %#v (%v)\nencoding/json: %#v (%v)", err, err, werr, werr)
	case err != nil && got != nil:
		return fmt.Sprintf("error %v after %d jobs: not all or nothing", err, len(got))
	case err == nil && !(len(got) == 0 && len(m["jobs"]) == 0) && !reflect.DeepEqual(got, m["jobs"]):
		return fmt.Sprintf("jobs %+v\nencoding/json: %+v", got, m["jobs"])
	}
	return ""
}

var listCases = []string{
	dumpJSON, `{"jobs":[` + submitJSON + `,` + removeJSON + `,` + assignJSON + `]}`,
	`null`, ` null `, `{}`, `{"jobs":null}`, `{"jobs":[]}`, `{"jobs":[null]}`, `{"jobs":[{}]}`,
	`{"jobs":[null,{"name":"a"},null]}`, `{"jobs":[{"name":"a"}],"jobs":[{"name":"b"}]}`,
	`{"jobs":[{"name":"a"}],"jobs":null}`, `{"jobs":null,"jobs":[{"name":"c"}]}`, `{"jobs":[{"name":"a"}],"jobs":[]}`,
	`{"Jobs":[{"name":"a"}]}`, `{"JOBS":[{"name":"a"}],"jobs":[{"name":"b"}]}`, `{"\u006aobs":[{"name":"esc"}]}`,
	`{"jobs\u0000":[{"name":"a"}]}`, "{\"jobs\xff\":[]}", `{"jobs ":[]}`, `{"other":[{"name":"x"}],"jobs":[{"name":"y"}]}`,
	`{"other":null,"jobs":[{"name":"y"}]}`,
	// type errors: every key's value must be a job list
	`{"jobs":[1]}`, `{"jobs":["x"]}`, `{"jobs":[true]}`, `{"jobs":[[]]}`, `{"jobs":[[{"name":"a"}]]}`,
	`{"jobs":"x"}`, `{"jobs":1}`, `{"jobs":false}`, `{"jobs":{}}`, `{"jobs":{"name":"a"}}`, `{"other":5,"jobs":[]}`,
	`{"jobs":[{"job_id":"x"}]}`, `{"jobs":[{"name":"a"},{"job_id":1.5,"name":"b"}]}`,
	`{"jobs":[{"job_id":"x"},{"name":1}]}`, `{"jobs":[1,{"name":1}]}`, `{"jobs":[{"name":1},2]}`,
	`{"x":"y","jobs":[{"job_id":"x"}]}`, `{"jobs":[{"job_id":"x"}],"x":"y"}`, `{"jobs":[{"job_id":"x"}],"jobs":[]}`,
	`{"jobs":[{"JOB_ID":9,"Name":"case"}]}`, `{"jobs":[{"name":"\uD83D\uDE00","workload":"\u003c\n"}]}`,
	`{"jobs":[{"extra":{"deep":[1,2,{"x":null}]},"name":"n"}]}`, `{"jobs":[{"wor\u212aload":"kelvin"}]}`,
	`{"jobs":[{"job_id":99999999999999999999}]}`,
	// top level not an object
	`[]`, `[{"name":"a"}]`, `"jobs"`, `1`, `true`, `[1,2`,
	// syntax errors, also after type errors (syntax wins)
	``, ` `, `{`, `{"jobs":[}`, `{"jobs":[{"name":"a"}]`, `{"jobs":[{"name":"a"},]}`, `{"jobs":[{"name":"a"}]}x`,
	`{"jobs":[{"job_id":"x"}],}`, `{"jobs":[1],"x":[}`, `{"jobs":{"a":}}`, `{"jobs":[{"name":}]}`, `{"jobs" [] }`,
	`{"jobs":[nul]}`, `{"jobs":nul}`, `{"jobs":[{"name":"a"} {"name":"b"}]}`, `{"jobs":[{"x":[1,]}]}`,
	"{\"jobs\":[{\"name\":\"\x01\"}]}", `{"jobs":[{"job_id":01}]}`, `{"jobs":[{"job_id":1,"job_id":"x"}]} {`,
	// whitespace everywhere
	" \t\n{ \r\n\"jobs\" \t: \n[ \n{ \"name\" : \"a\" } \n, \tnull \n] \n, \"x\" : [ ] } \n",
	// depth around the limit inside a job, which sits 3 levels down
	`{"jobs":[{"x":` + strings.Repeat("[", maxDepth-3) + strings.Repeat("]", maxDepth-3) + `,"name":"deep"}]}`,
	`{"jobs":[{"x":` + strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2) + `,"name":"deep"}]}`,
	`{"jobs":[{"job_id":"x","x":` + strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2) + `}]}`,
	`{"jobs":[` + strings.Repeat("[", maxDepth-2) + strings.Repeat("]", maxDepth-2) + `]}`,
	`{"jobs":[` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `]}`,
	`{"x":` + strings.Repeat(`{"a":`, maxDepth-1) + `1` + strings.Repeat("}", maxDepth-1) + `}`,
	`{"x":` + strings.Repeat(`{"a":`, maxDepth) + `1` + strings.Repeat("}", maxDepth) + `}`,
}

func TestDecodeJobListDifferential(t *testing.T) {
	for _, s := range listCases {
		if d := diffDecodeJobList([]byte(s)); d != "" {
			t.Errorf("DecodeJobList(%.200q):\n%s", s, d)
		}
	}
	// Each single job is a list of one, and of one after a null.
	for _, s := range decodeCases {
		for _, l := range []string{`{"jobs":[` + s + `]}`, `{"jobs":[null,` + s + `]}`} {
			if d := diffDecodeJobList([]byte(l)); d != "" {
				t.Errorf("DecodeJobList(%.200q):\n%s", l, d)
			}
		}
	}
}

func TestDecodeJobListFnError(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := DecodeJobList([]byte(`{"jobs":[{"name":"a"},{"name":"b"},{"name":"c"}]}`), func(j *Job) error {
		calls++
		if string(j.Name) == "b" {
			return stop
		}
		return nil
	})
	if err != stop || calls != 2 {
		t.Errorf("DecodeJobList = %v after %d calls, want stop after 2", err, calls)
	}
}

// bigList is a LOAD payload of n jobs, every third with escapes to unquote.
func bigList(n int) []byte {
	b := AppendJobListStart(nil)
	for i := range n {
		j := Job{ID: int64(i), Name: fmt.Appendf(nil, "job-%d", i), Func: []byte("mail"), SchedAt: 1500000000}
		if i%3 == 0 {
			j.Workload = []byte(`{"to":"<a@b>"}`)
		}
		b = AppendJobListItem(b, &j)
	}
	return AppendJobListEnd(b)
}

// TestDecodeJobListMemory: what DecodeJobList allocates does not grow with
// the number of jobs.
func TestDecodeJobListMemory(t *testing.T) {
	small, large := bigList(10), bigList(20000)
	count := 0
	fn := func(*Job) error { count++; return nil }
	a := testing.AllocsPerRun(5, func() { _ = DecodeJobList(small, fn) })
	b := testing.AllocsPerRun(5, func() { _ = DecodeJobList(large, fn) })
	if b > a {
		t.Errorf("allocs: %v for 10 jobs, %v for 20000", a, b)
	}
	if count != 6*(10+20000) {
		t.Errorf("%d calls", count)
	}
}

// TestDecodeJobFastPath: the hand-written scanner is sure of what
// go-periodic sends and of the usual variations; the differential tests alone
// would pass if it left everything to encoding/json.
func TestDecodeJobFastPath(t *testing.T) {
	for _, s := range []string{
		submitJSON, removeJSON, assignJSON, `{}`, `null`, ` { } `,
		`{"NAME":"a","Func":"b","WorkLoad":"c","JOB_ID":2,"Sched_At":3,"RUN_AT":4,"Counter":5,"TimeOut":6,"STATUS":"x"}`,
		`{"extra":{"a":[1,2,{"b":null}],"c":"d"},"name":"n","more":-1.5e+10}`,
		`{"name":null,"job_id":null}`, `{"name":"a","name":"b"}`, `{"job_id":-9223372036854775808}`,
		`{"name":"\uD83D\uDE00 \uD83D \n \u00e9"}`, "{\"name\":\"\xff é\"}",
		" \t\r\n{ \"name\" : \"n\" , \"job_id\" : 5 } \n",
	} {
		var j Job
		d := []byte(s)
		end, ok := decodeJobAt(d, skipSpace(d, 0), 0, &j)
		if !ok || skipSpace(d, end) != len(d) {
			t.Errorf("fast path not sure of %s", s)
		}
	}
}

// TestFieldOf matches every key of up to 9 bytes over an alphabet of the
// names' letters in both cases and near misses against a plain
// strings.EqualFold over the names (ASCII only: the same as encoding/json's
// fold for ASCII).
func TestFieldOf(t *testing.T) {
	ref := func(k []byte) int {
		for f, name := range fieldNames {
			if strings.EqualFold(string(k), name) {
				return f
			}
		}
		return fieldNone
	}
	for f, name := range fieldNames {
		for _, k := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:], name[:len(name)-1] + "X", "@" + name[1:], name[:len(name)-1] + "\x7f"} {
			if got := fieldOf([]byte(k)); got != ref([]byte(k)) {
				t.Errorf("fieldOf(%q) = %d, want %d (%d)", k, got, ref([]byte(k)), f)
			}
		}
	}
	// Every variant whose bytes differ from a name's by bit 0x20.
	for _, name := range fieldNames {
		for mask := 0; mask < 1<<len(name); mask++ {
			k := []byte(name)
			for i := range k {
				if mask&(1<<i) != 0 {
					k[i] ^= 0x20
				}
			}
			if got, want := fieldOf(k), ref(k); got != want {
				t.Errorf("fieldOf(%q) = %d, want %d", k, got, want)
			}
		}
	}
}
