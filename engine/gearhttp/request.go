package gearhttp

import (
	"net/http"
	"strings"

	codec "switchyard/codec/gearman"
	"switchyard/sched"
)

// submit is what a request asks for, read as gearmand reads it.
type submit struct {
	fn         string // the request target without its leading slashes
	unique     string // X-Gearman-Unique; "-" (coalesce on the payload) if absent or empty
	priority   sched.Priority
	background bool
	readBody   bool // POST and PUT: gearmand reads Content-Length bytes; GET and HEAD send none
}

// method is how gearmand treats a request method.
type method uint8

const (
	methodRefused method = iota // anything else: gearmand closes the connection without a word
	methodSubmit                // GET, PUT, POST
	methodHead                  // HEAD: a job too, answered without a body (and without X-Gearman-Command)
	methodTrace                 // TRACE: refused, 405 (gearmand never answers it)
)

func methodOf(m string) method {
	switch m {
	case http.MethodGet, http.MethodPut, http.MethodPost:
		return methodSubmit
	case http.MethodHead:
		return methodHead
	case http.MethodTrace:
		return methodTrace
	}
	return methodRefused
}

// parseSubmit reads the job a request submits. gearmand takes the function
// name from the raw request target: everything after the leading slashes,
// a query string included, nothing decoded. Its headers are matched
// whole and without regard to case ("X-Gearman-Background: true"); a
// header that appears again overrides the earlier one, except that one
// "true" makes the job background.
func parseSubmit(r *http.Request) submit {
	sub := submit{
		fn:       strings.TrimLeft(r.RequestURI, "/"),
		unique:   "-",
		priority: sched.Normal,
		readBody: r.Method == http.MethodPost || r.Method == http.MethodPut,
	}
	for _, v := range r.Header.Values("X-Gearman-Unique") {
		if v != "" {
			sub.unique = v
		}
	}
	for _, v := range r.Header.Values("X-Gearman-Background") {
		if strings.EqualFold(v, "true") {
			sub.background = true
		}
	}
	for _, v := range r.Header.Values("X-Gearman-Priority") {
		switch {
		case strings.EqualFold(v, "high"):
			sub.priority = sched.High
		case strings.EqualFold(v, "low"):
			sub.priority = sched.Low
		}
	}
	return sub
}

// uniqueTooLong reports a unique gearmand refuses with ARGUMENT_TOO_LARGE.
func (sub *submit) uniqueTooLong() bool { return len(sub.unique) > codec.MaxUniqueSize }

// keepAlive reports whether the client asked to keep the connection open
// ("Connection: keep-alive"). gearmand reads the header and closes anyway.
func keepAlive(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "keep-alive") {
				return true
			}
		}
	}
	return false
}
