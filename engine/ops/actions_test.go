package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"switchyard/sched"
)

// post POSTs body to url with the headers (name, value pairs) and returns
// the status and the decoded answer.
func post(t *testing.T, url, body string, headers ...string) (int, actionResp) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var a actionResp
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("POST %s: %d %q: %v", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, a
}

// The actions need the token, in its header, from no other site; each
// does what it says to the scheduler and is logged.
func TestActions(t *testing.T) {
	sc := sched.New(sched.Config{Tick: -1})
	defer sc.Close()
	core, logs := observer.New(zap.InfoLevel)
	srv := startOps(t, Config{Sched: sc, Token: []byte("s3cret"), Log: zap.New(core)})
	base := "http://" + srv.Addr().String() + "/api/actions/"
	c := sc.NewClient(nopListener{})
	var ids []uint64
	for range 5 {
		id, err := c.Submit(&sched.SubmitReq{Func: []byte("f"), Background: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	w := sc.NewWorker(nopWaker{})
	w.CanDo([]byte("f"), 0)
	tok := []string{TokenHeader, "s3cret"}
	for _, tc := range []struct {
		name, action, body string
		headers            []string
		code               int
	}{
		{"no token", "pause", `{"function":"f"}`, nil, 401},
		{"wrong token", "pause", `{"function":"f"}`, []string{TokenHeader, "s3creT"}, 401},
		{"token as a bearer", "pause", `{"function":"f"}`, []string{"Authorization", "Bearer s3cret"}, 401},
		{"cross-origin", "pause", `{"function":"f"}`, append([]string{"Origin", "http://evil.example"}, tok...), 403},
		{"cross-site fetch", "pause", `{"function":"f"}`, append([]string{"Sec-Fetch-Site", "cross-site"}, tok...), 403},
		{"unknown function", "pause", `{"function":"nobody"}`, tok, 404},
		{"unknown action", "explode", `{"function":"f"}`, tok, 404},
		{"bad body", "pause", `{"function":`, tok, 400},
		{"pause", "pause", `{"function":"f"}`, tok, 200},
	} {
		if code, a := post(t, base+tc.action, tc.body, tc.headers...); code != tc.code {
			t.Errorf("%s: %d %+v, want %d", tc.name, code, a, tc.code)
		}
	}
	if st, _ := sc.FuncStatOf([]byte("f")); !st.Paused {
		t.Fatal("not paused")
	}
	if j := w.Grab(); j != nil {
		t.Fatal("a paused function handed out a job")
	}
	// Same origin, as the page sends it.
	if code, _ := post(t, base+"resume", `{"function":"f"}`, append([]string{"Origin", "http://" + srv.Addr().String()}, tok...)...); code != 200 {
		t.Fatalf("resume: %d", code)
	}
	if j := w.Grab(); j == nil || j.ID() != ids[0] {
		t.Fatal("resumed, yet no job")
	}
	// Cancel by number and by handle; a job gone is a 404.
	for i, id := range []string{fmt.Sprint(ids[1]), fmt.Sprintf(`"H:host:%d"`, ids[2])} {
		if code, a := post(t, base+"cancel", `{"id":`+id+`}`, tok...); code != 200 {
			t.Fatalf("cancel %s: %d %+v", id, code, a)
		}
		if sc.Status(ids[1+i]).Known {
			t.Fatalf("job %d is still there", ids[1+i])
		}
	}
	if code, _ := post(t, base+"cancel", `{"id":`+fmt.Sprint(ids[1])+`}`, tok...); code != 404 {
		t.Fatalf("cancelling a job gone: %d", code)
	}
	if code, _ := post(t, base+"cancel", `{"id":"nope"}`, tok...); code != 400 {
		t.Fatalf("cancelling no job: %d", code)
	}
	code, a := post(t, base+"drop", `{"function":"f"}`, tok...)
	if code != 200 || a.Dropped == nil || *a.Dropped != 2 {
		t.Fatalf("drop: %d %+v", code, a)
	}
	if st, _ := sc.FuncStatOf([]byte("f")); st.Total() != 1 || st.Running != 1 {
		t.Fatalf("after the drop: %+v", st)
	}
	// Each done, and each refused for its token, is logged.
	var done, refused int
	for _, e := range logs.All() {
		switch e.Message {
		case "ops action":
			done++
		case "ops action refused: wrong or missing token", "ops action refused: cross-origin":
			refused++
		}
	}
	if done != 5 || refused != 5 {
		t.Errorf("logged %d actions done, %d refused; want 5, 5", done, refused)
	}

	// Without a token the actions are off.
	off := startOps(t, Config{Sched: sc})
	if code, _ := post(t, "http://"+off.Addr().String()+"/api/actions/pause", `{"function":"f"}`, tok...); code != 403 {
		t.Fatalf("actions without a token file: %d", code)
	}
	// And a GET is no action.
	resp, err := http.Get(base + "pause")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 4 {
		t.Fatalf("GET of an action: %d", resp.StatusCode)
	}
}
