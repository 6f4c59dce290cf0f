package periodic

import (
	"encoding/json"
	"errors"
	"reflect"

	"switchyard/codec/periodic/internal/driver"
)

// The job's fields, in the real struct's order, and their JSON names.
const (
	fieldID = iota
	fieldName
	fieldFunc
	fieldWorkload
	fieldTimeout
	fieldSchedAt
	fieldRunAt
	fieldCounter
	fieldStatus
	fieldNone
)

var fieldNames = [fieldNone]string{"job_id", "name", "func", "workload", "timeout", "sched_at", "run_at", "counter", "status"}

// fieldOf returns the field a key names. encoding/json matches a key exactly
// or else case-insensitively; for an ASCII key against these lowercase names
// both come to an ASCII case fold. (Non-ASCII keys never get here: 'ſ' and the
// Kelvin sign fold to 's' and 'k' in encoding/json.) The length and first
// letter (lowercased by |0x20 if it is a letter) leave one name to compare.
func fieldOf(key []byte) int {
	if len(key) < 4 || len(key) > 8 {
		return fieldNone
	}
	var f int
	switch len(key)<<8 | int(key[0]|0x20) {
	case 4<<8 | 'n':
		f = fieldName
	case 4<<8 | 'f':
		f = fieldFunc
	case 6<<8 | 'j':
		f = fieldID
	case 6<<8 | 'r':
		f = fieldRunAt
	case 6<<8 | 's':
		f = fieldStatus
	case 7<<8 | 't':
		f = fieldTimeout
	case 7<<8 | 'c':
		f = fieldCounter
	case 8<<8 | 'w':
		f = fieldWorkload
	case 8<<8 | 's':
		f = fieldSchedAt
	default:
		return fieldNone
	}
	if !asciiFoldEqual(key, fieldNames[f]) {
		return fieldNone
	}
	return f
}

// asciiFoldEqual reports whether key equals lower, a lowercase name of the
// same length, up to ASCII case.
func asciiFoldEqual(key []byte, lower string) bool {
	if string(key) == lower {
		return true
	}
	for i, c := range key {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// DecodeJob decodes data into j as encoding/json.Unmarshal decodes it into a
// zero driver.Job of the real server: keys matched exactly or else without
// regard to case, unknown keys ignored, null leaving a field as it is, the
// last of duplicate keys winning, numbers for int64 fields integers in range,
// strings unescaped with invalid UTF-8 and lone surrogates made U+FFFD.
//
// A hand-written scanner decodes what it is sure of without allocating (see
// Job for how long the byte fields stay valid). Anything else, errors
// included, goes to encoding/json: the error is its own, text and all ("json:
// cannot unmarshal string into Go struct field Job.job_id of type int64", as
// the real server sends it), and j holds what encoding/json had decoded when
// it stopped.
func DecodeJob(data []byte, j *Job) error {
	j.reset()
	if end, ok := decodeJobAt(data, skipSpace(data, 0), 0, j); ok && skipSpace(data, end) == len(data) {
		return nil
	}
	return decodeJobSlow(data, j)
}

// decodeJobAt decodes the job object (or null) at d[i], with depth objects
// and arrays open around it, and returns the index after it. ok false means
// not sure: j is then half decoded.
func decodeJobAt(d []byte, i, depth int, j *Job) (end int, ok bool) {
	if i >= len(d) {
		return i, false
	}
	if d[i] == 'n' {
		return i + 4, hasLiteral(d, i, "null")
	}
	if d[i] != '{' {
		return i, false
	}
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return i, false
		}
		// A key of plain ASCII is matched here; any other byte (an escape,
		// non-ASCII that encoding/json may fold, a control byte) is unusual
		// enough to leave to encoding/json.
		k := i + 1
		for k < len(d) && strPlain[d[k]] {
			k++
		}
		if k >= len(d) || d[k] != '"' {
			return i, false
		}
		f := fieldOf(d[i+1 : k])
		i = skipSpace(d, k+1)
		if i >= len(d) || d[i] != ':' {
			return i, false
		}
		if i = skipSpace(d, i+1); i >= len(d) {
			return i, false
		}
		switch {
		case f == fieldNone:
			i, ok = skipValue(d, i, depth+1)
		case d[i] == 'n': // null leaves the field as it is
			i, ok = i+4, hasLiteral(d, i, "null")
		case f == fieldID, f >= fieldTimeout && f <= fieldCounter:
			var n int64
			if i, n, ok = parseInt(d, i); ok {
				*j.intField(f) = n
			}
		default:
			var s []byte
			if i, s, ok = j.decodeString(d, i); ok {
				*j.bytesField(f) = s
			}
		}
		if !ok {
			return i, false
		}
		if i = skipSpace(d, i); i >= len(d) {
			return i, false
		}
		switch d[i] {
		case '}':
			j.Processing = string(j.Status) == "processing"
			return i + 1, true
		case ',':
			i = skipSpace(d, i+1)
		default:
			return i, false
		}
	}
}

func (j *Job) intField(f int) *int64 {
	switch f {
	case fieldID:
		return &j.ID
	case fieldTimeout:
		return &j.Timeout
	case fieldSchedAt:
		return &j.SchedAt
	case fieldRunAt:
		return &j.RunAt
	}
	return &j.Counter
}

func (j *Job) bytesField(f int) *[]byte {
	switch f {
	case fieldName:
		return &j.Name
	case fieldFunc:
		return &j.Func
	case fieldWorkload:
		return &j.Workload
	}
	return &j.Status
}

// decodeString decodes the string at d[i] (a string is all a []byte field
// takes): a view into d when it needs no unescaping, else into j's scratch.
func (j *Job) decodeString(d []byte, i int) (end int, s []byte, ok bool) {
	if d[i] != '"' {
		return i, nil, false
	}
	end, plain, ok := scanString(d, i)
	if !ok {
		return end, nil, false
	}
	s = d[i+1 : end-1 : end-1]
	if !plain {
		n := len(j.buf)
		j.buf = appendUnquoted(j.buf, s)
		s = j.buf[n:len(j.buf):len(j.buf)]
	}
	return end, s, true
}

// decodeJobSlow decodes data with encoding/json into the real struct and
// copies the result into j, whatever the error.
func decodeJobSlow(data []byte, j *Job) error {
	var rj driver.Job
	err := json.Unmarshal(data, &rj)
	j.fromDriver(&rj)
	return err
}

// fromDriver sets j to rj, its strings copied into j's scratch.
func (j *Job) fromDriver(rj *driver.Job) {
	j.reset()
	j.ID, j.Timeout, j.SchedAt, j.RunAt, j.Counter = rj.ID, rj.Timeout, rj.SchedAt, rj.RunAt, rj.Counter
	j.Name = j.keep(rj.Name)
	j.Func = j.keep(rj.Func)
	j.Workload = j.keep(rj.Args)
	j.Status = j.keep(rj.Status)
	j.Processing = rj.Status == "processing"
}

func (j *Job) keep(s string) []byte {
	n := len(j.buf)
	j.buf = append(j.buf, s...)
	return j.buf[n:len(j.buf):len(j.buf)]
}

// The types whose names encoding/json's errors carry for a LOAD payload.
var (
	jobType     = reflect.TypeFor[driver.Job]()
	jobListType = reflect.TypeFor[[]driver.Job]()
)

// DecodeJobList decodes a LOAD payload, {"jobs":[JOB,...]}, as
// encoding/json.Unmarshal decodes it into the real server's
// map[string][]driver.Job, and calls fn with each job of the "jobs" key:
// the key matched exactly (after unescaping), the last "jobs" winning, a null
// list holding no jobs and a null element a zero Job. Every other key's value
// must decode as a job list too, as it must for Unmarshal.
//
// It is all or nothing: a first pass checks the whole input, and fn is called
// only when it decodes without error; otherwise the error is encoding/json's,
// text and all (a syntax error before any type error, else the first type
// error). fn's error stops the second pass and is returned. The *Job given to
// fn is reused: its fields are valid until fn returns.
//
// Memory does not grow with the number of jobs: no list is built. (Only for
// input whose top level is not an object does encoding/json decode it all,
// and it then skips a list without keeping it.)
func DecodeJobList(data []byte, fn func(*Job) error) error {
	var j Job
	jobsAt, err, sure := checkJobList(data, &j)
	switch {
	case !sure:
		return decodeJobListSlow(data, fn)
	case err != nil:
		return err
	case jobsAt < 0:
		return nil
	}
	i := skipSpace(data, jobsAt+1)
	if data[i] == ']' {
		return nil
	}
	for {
		j.reset()
		end, ok := decodeJobAt(data, i, 2, &j)
		if !ok {
			// The check pass decoded this element with encoding/json
			// without error.
			end, _ = skipValue(data, i, 2)
			decodeJobSlow(data[i:end], &j)
		}
		if err := fn(&j); err != nil {
			return err
		}
		i = skipSpace(data, end)
		if data[i] == ']' {
			return nil
		}
		i = skipSpace(data, i+1) // past the ','
	}
}

// checkJobList is DecodeJobList's first pass. It returns the index of the '['
// of the last "jobs" list (-1 for none or null) and the first type error, or
// sure == false for anything it leaves to encoding/json: a top level that is
// not an object or null, and syntax errors. j is scratch.
func checkJobList(d []byte, j *Job) (jobsAt int, typeErr error, sure bool) {
	jobsAt = -1
	i := skipSpace(d, 0)
	if hasLiteral(d, i, "null") {
		return -1, nil, skipSpace(d, i+4) == len(d)
	}
	if i >= len(d) || d[i] != '{' {
		return -1, nil, false
	}
	if i = skipSpace(d, i+1); i < len(d) && d[i] == '}' {
		return -1, nil, skipSpace(d, i+1) == len(d)
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return -1, nil, false
		}
		end, plain, ok := scanString(d, i)
		if !ok {
			return -1, nil, false
		}
		key := d[i+1 : end-1]
		if !plain {
			var kb [8]byte
			key = appendUnquoted(kb[:0], key)
		}
		isJobs := string(key) == "jobs"
		i = skipSpace(d, end)
		if i >= len(d) || d[i] != ':' {
			return -1, nil, false
		}
		if i = skipSpace(d, i+1); i >= len(d) {
			return -1, nil, false
		}
		var err error
		switch c := d[i]; c {
		case 'n': // a null list
			if isJobs {
				jobsAt = -1
			}
			end, ok = i+4, hasLiteral(d, i, "null")
		case '[':
			if isJobs {
				jobsAt = i
			}
			end, err, ok = checkJobArray(d, i, j)
		case '{':
			err = &json.UnmarshalTypeError{Value: "object", Type: jobListType, Offset: int64(i + 1)}
			end, ok = skipValue(d, i, 1)
		default:
			end, ok = skipScalar(d, i)
			err = &json.UnmarshalTypeError{Value: scalarKind(c), Type: jobListType, Offset: int64(end)}
		}
		if !ok {
			return -1, nil, false
		}
		if typeErr == nil {
			typeErr = err
		}
		if i = skipSpace(d, end); i >= len(d) {
			return -1, nil, false
		}
		switch d[i] {
		case '}':
			return jobsAt, typeErr, skipSpace(d, i+1) == len(d)
		case ',':
			i = skipSpace(d, i+1)
		default:
			return -1, nil, false
		}
	}
}

// checkJobArray checks the job list at d[i] == '[' in the top object and
// returns the index after it and its first type error; ok is false where
// encoding/json must decide.
func checkJobArray(d []byte, i int, j *Job) (end int, typeErr error, ok bool) {
	if i = skipSpace(d, i+1); i < len(d) && d[i] == ']' {
		return i + 1, nil, true
	}
	for {
		if i >= len(d) {
			return i, nil, false
		}
		var err error
		switch c := d[i]; {
		case c == '{' && typeErr == nil:
			j.reset()
			if end, ok = decodeJobAt(d, i, 2, j); ok {
				break
			}
			if end, ok = skipValue(d, i, 2); ok {
				err, ok = unmarshalJobAt(d, i, end)
			}
		case c == '{', c == 'n':
			// Only the syntax matters after a type error; null is a zero job.
			end, ok = skipValue(d, i, 2)
		case c == '[':
			err = &json.UnmarshalTypeError{Value: "array", Type: jobType, Offset: int64(i + 1)}
			end, ok = skipValue(d, i, 2)
		default:
			end, ok = skipScalar(d, i)
			err = &json.UnmarshalTypeError{Value: scalarKind(c), Type: jobType, Offset: int64(end)}
		}
		if !ok {
			return end, nil, false
		}
		if typeErr == nil {
			typeErr = err
		}
		if i = skipSpace(d, end); i >= len(d) {
			return i, nil, false
		}
		switch d[i] {
		case ']':
			return i + 1, typeErr, true
		case ',':
			i = skipSpace(d, i+1)
		default:
			return i, nil, false
		}
	}
}

// unmarshalJobAt decodes the job object d[i:end], which skipValue accepted,
// with encoding/json, and returns its type error as decoding the whole input
// would report it. Decoding the object alone gives the same error (the field
// path starts at the job: map keys and list indexes are not part of it) but
// counts its offset from the object's start. ok is false for any other error.
func unmarshalJobAt(d []byte, i, end int) (err error, ok bool) {
	var rj driver.Job
	err = json.Unmarshal(d[i:end], &rj)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil, true
	case errors.As(err, &te):
		te.Offset += int64(i)
		return err, true
	}
	return nil, false
}

// scalarKind names a scalar by its first byte as encoding/json's type errors
// do.
func scalarKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// decodeJobListSlow is DecodeJobList by encoding/json: exact, and it builds
// the list only when the input is valid JSON with an object at the top, which
// checkJobList leaves here only if it disagrees with encoding/json.
func decodeJobListSlow(data []byte, fn func(*Job) error) error {
	var m map[string][]driver.Job
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	var j Job
	for i := range m["jobs"] {
		j.fromDriver(&m["jobs"][i])
		if err := fn(&j); err != nil {
			return err
		}
	}
	return nil
}
