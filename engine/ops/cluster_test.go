package ops

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"switchyard/sched"
)

// fakeCluster records the membership changes asked of it.
type fakeCluster struct {
	mu      sync.Mutex
	changes []string
}

func (f *fakeCluster) Status() any { return map[string]string{"role": "leader"} }

func (f *fakeCluster) AddVoter(id, addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, "add "+id+" "+addr)
	return nil
}

func (f *fakeCluster) Remove(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, "remove "+id)
	return nil
}

func (f *fakeCluster) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.changes
	f.changes = nil
	return out
}

// TestMembershipNeedsToken: POST and DELETE /api/cluster/members need the
// ops token, as the actions do, and refuse a cross-site request before
// they look at it (a form posted by another site's page, even one that
// guessed the token); GET /api/cluster stays open. Without a token
// configured, membership changes are off.
func TestMembershipNeedsToken(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	const token = "s3cret"
	form := "id=evil&addr=127.0.0.1%3A17004"
	for _, tt := range []struct {
		name         string
		token        string // configured
		method, path string
		body         string
		headers      []string
		code         int
		change       string // what reached the cluster, "" nothing
	}{
		{"add, no token", token, "POST", "/api/cluster/members", form, nil, http.StatusUnauthorized, ""},
		{"add, wrong token", token, "POST", "/api/cluster/members", form, []string{TokenHeader, "guess"}, http.StatusUnauthorized, ""},
		{"add, cross-site form", token, "POST", "/api/cluster/members", form,
			[]string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden, ""},
		{"add, cross-origin with the token", token, "POST", "/api/cluster/members", form,
			[]string{"Origin", "http://evil.example", TokenHeader, token}, http.StatusForbidden, ""},
		{"add, same-site page with the token", token, "POST", "/api/cluster/members", form,
			[]string{"Sec-Fetch-Site", "same-site", TokenHeader, token}, http.StatusForbidden, ""},
		{"add, the token", token, "POST", "/api/cluster/members", form, []string{TokenHeader, token}, http.StatusOK, "add evil 127.0.0.1:17004"},
		{"remove, no token", token, "DELETE", "/api/cluster/members/n1", "", nil, http.StatusUnauthorized, ""},
		{"remove, wrong token", token, "DELETE", "/api/cluster/members/n1", "", []string{TokenHeader, token + "x"}, http.StatusUnauthorized, ""},
		{"remove, cross-site", token, "DELETE", "/api/cluster/members/n1", "", []string{"Sec-Fetch-Site", "cross-site", TokenHeader, token},
			http.StatusForbidden, ""},
		{"remove, the token", token, "DELETE", "/api/cluster/members/n1", "", []string{TokenHeader, token}, http.StatusOK, "remove n1"},
		{"add, no token configured", "", "POST", "/api/cluster/members", form, []string{TokenHeader, token}, http.StatusForbidden, ""},
		{"status, no token", token, "GET", "/api/cluster", "", nil, http.StatusOK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fc := &fakeCluster{}
			core, logs := observer.New(zap.InfoLevel)
			srv := startOps(t, Config{Sched: sc, Token: []byte(tt.token), Cluster: fc, Log: zap.New(core)})
			req, err := http.NewRequest(tt.method, "http://"+srv.Addr().String()+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for i := 0; i+1 < len(tt.headers); i += 2 {
				req.Header.Set(tt.headers[i], tt.headers[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Fatalf("%s %s: %d %q, want %d", tt.method, tt.path, resp.StatusCode, body, tt.code)
			}
			got := strings.Join(fc.take(), "; ")
			if got != tt.change {
				t.Fatalf("the cluster was asked %q, want %q", got, tt.change)
			}
			if tt.code == http.StatusUnauthorized && strings.Contains(string(body), token) {
				t.Error("the refusal shows the token")
			}
			if tt.method != "GET" && logs.Len() == 0 {
				t.Error("nothing logged")
			}
		})
	}
}
