package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// check against a real HTTP server on 127.0.0.1, answering as switchyard's
// /healthz does: 200 "ok", or 503 and the state.
func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			io.WriteString(w, "ok\n")
		case "/starting":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "starting\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	// A port nothing listens on: one the kernel gave, then closed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	tests := []struct {
		target string
		want   string // in the status, or in the error if fail
		fail   bool
	}{
		{srv.URL + "/healthz", "200 OK ok", false},
		{srv.URL + "/starting", "503 Service Unavailable (starting)", true},
		{srv.URL + "/nothing", "404", true},
		{"http://" + closed + "/healthz", "connection refused", true},
		{"https://" + closed + "/healthz", "want http://", true},
		{"127.0.0.1:9418", "cannot contain colon", true},
		{"http:///healthz", "want http://", true},
	}
	for _, tc := range tests {
		got, err := check(tc.target, 5*time.Second)
		if tc.fail {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("check(%s) = %q, %v; want an error with %q", tc.target, got, err, tc.want)
			}
			continue
		}
		if err != nil || !strings.Contains(got, tc.want) {
			t.Errorf("check(%s) = %q, %v; want %q", tc.target, got, err, tc.want)
		}
	}
}
