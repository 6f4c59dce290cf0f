package periodic

import (
	"strconv"
	"unicode/utf8"
)

// Job is a Periodic job as its JSON carries it: the real server's driver.Job
// with []byte instead of string fields, so that decoding needs no copies.
//
// DecodeJob sets the byte fields to views into its input where the JSON
// string needed no unescaping, and otherwise to views into a scratch buffer
// that the Job keeps and reuses: they are valid until the input changes or
// the next DecodeJob into the same Job (a copy of a Job shares its scratch).
// Copy what you keep.
type Job struct {
	ID       int64  // "job_id"
	Name     []byte // "name"; (Func, Name) is the unique key
	Func     []byte // "func"
	Workload []byte // "workload" (the real struct's Args)
	Timeout  int64  // "timeout", seconds
	SchedAt  int64  // "sched_at", unix seconds
	RunAt    int64  // "run_at", unix seconds
	Counter  int64  // "counter"

	// Processing is the job's state: "status" is "processing" when true and
	// "ready" when false. AppendJob writes it; DecodeJob sets it from Status.
	Processing bool
	// Status is the "status" string DecodeJob read, exactly (go-periodic
	// sends ""). AppendJob ignores it.
	Status []byte

	buf []byte // scratch for unescaped strings, reused by DecodeJob
}

// reset zeroes j for a new decode, keeping its scratch.
func (j *Job) reset() {
	*j = Job{buf: j.buf[:0]}
}

// AppendJob appends j's JSON exactly as encoding/json.Marshal encodes the
// real server's struct with the same values:
//
//	{"job_id":1,"name":"n","func":"f","workload":"w","timeout":0,"sched_at":0,"run_at":0,"counter":0,"status":"ready"}
//
// with status "processing" when j.Processing is set.
func AppendJob(dst []byte, j *Job) []byte {
	dst = append(dst, `{"job_id":`...)
	dst = strconv.AppendInt(dst, j.ID, 10)
	dst = append(dst, `,"name":`...)
	dst = appendString(dst, j.Name)
	dst = append(dst, `,"func":`...)
	dst = appendString(dst, j.Func)
	dst = append(dst, `,"workload":`...)
	dst = appendString(dst, j.Workload)
	dst = append(dst, `,"timeout":`...)
	dst = strconv.AppendInt(dst, j.Timeout, 10)
	dst = append(dst, `,"sched_at":`...)
	dst = strconv.AppendInt(dst, j.SchedAt, 10)
	dst = append(dst, `,"run_at":`...)
	dst = strconv.AppendInt(dst, j.RunAt, 10)
	dst = append(dst, `,"counter":`...)
	dst = strconv.AppendInt(dst, j.Counter, 10)
	if j.Processing {
		return append(dst, `,"status":"processing"}`...)
	}
	return append(dst, `,"status":"ready"}`...)
}

// AppendJobListStart, AppendJobListItem and AppendJobListEnd append a DUMP
// chunk, {"jobs":[JOB,...]}, as the real server's json.Marshal of a
// map[string][]driver.Job{"jobs": list} writes it. Call Start, then Item for
// each job (at least one: Marshal writes a nil list as null, an empty one as
// [], and the real server sends neither), then End.
func AppendJobListStart(dst []byte) []byte {
	return append(dst, `{"jobs":[`...)
}

// AppendJobListItem appends one job of a list begun with AppendJobListStart,
// with the comma it needs: none right after the '[' that Start wrote.
func AppendJobListItem(dst []byte, j *Job) []byte {
	if dst[len(dst)-1] != '[' {
		dst = append(dst, ',')
	}
	return AppendJob(dst, j)
}

// AppendJobListEnd closes a list begun with AppendJobListStart.
func AppendJobListEnd(dst []byte) []byte {
	return append(dst, ']', '}')
}

// AppendJobAssign appends the server's reply to a GRAB_JOB: ResMagic size
// msgID Sep JOB_ASSIGN Sep handle Sep job JSON, where the handle is the
// decimal job id, as the real server's worker.handleJobAssign writes it.
func AppendJobAssign(dst, msgID []byte, j *Job) []byte {
	dst, start := BeginFrame(dst, ResMagic)
	dst = append(dst, msgID...)
	dst = append(dst, Sep...)
	dst = append(dst, byte(JobAssign))
	dst = append(dst, Sep...)
	dst = strconv.AppendInt(dst, j.ID, 10)
	dst = append(dst, Sep...)
	dst = AppendJob(dst, j)
	return EndFrame(dst, start)
}

const hexDigits = "0123456789abcdef"

// plainASCII[c] is true for the ASCII bytes encoding/json writes as they are
// (with its default HTML escaping): everything from ' ' to DEL except '"',
// '\\', '<', '>' and '&'.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// appendString appends s as a JSON string the way encoding/json's
// appendString does with escapeHTML: '"' and '\\' backslashed; \b \f \n \r
// \t by name; other control bytes and <, >, & as \u00XX; each byte of
// invalid UTF-8 as \ufffd; U+2028 and U+2029 as \u2028 and \u2029; all else
// as it is.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
