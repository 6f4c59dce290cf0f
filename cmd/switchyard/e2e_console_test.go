package main

// The operator console in a real headless Chromium, driven over the
// DevTools protocol: with load running, the page shows the stuck queue,
// the workers and what they hold, and the failures; each action is
// clicked without the token (the page asks for it; a cancelled or wrong
// one does nothing) and with it, and each does what it says to the
// server. Screenshots are kept as test artifacts.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/engine/ops/opstest"
)

// cdp is a Chromium driven over --remote-debugging-pipe: requests go on
// its descriptor 3, answers and events come on 4, each a JSON message
// ended by a NUL. No WebSocket, no library.
type cdp struct {
	t       *testing.T
	cmd     *exec.Cmd
	w       io.WriteCloser
	session string
	seq     atomic.Int64
	mu      sync.Mutex
	waiting map[int64]chan cdpAnswer
}

type cdpAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startCDP starts a headless Chromium on url and attaches to its page.
func startCDP(t *testing.T, bin, url string) *cdp {
	t.Helper()
	toChrome, toChromeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromChromeR, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--hide-scrollbars", "--user-data-dir="+t.TempDir(), "--window-size=1400,1400",
		"--remote-debugging-pipe", url)
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // its 3 and 4
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	c := &cdp{t: t, cmd: cmd, w: toChromeW, waiting: map[int64]chan cdpAnswer{}}
	go c.read(bufio.NewReader(fromChromeR))
	t.Cleanup(func() {
		toChromeW.Close()
		cancel()
		cmd.Wait()
		fromChromeR.Close()
		if t.Failed() {
			t.Logf("chromium's stderr:\n%s", tail(stderr.String(), 4<<10))
		}
	})
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
		} `json:"targetInfos"`
	}
	var page string
	waitUntil(t, 30*time.Second, "chromium's page target", func() (bool, string) {
		c.call("", "Target.getTargets", nil, &targets)
		for _, ti := range targets.TargetInfos {
			if ti.Type == "page" {
				page = ti.TargetID
			}
		}
		return page != "", fmt.Sprint(targets)
	})
	var att struct {
		SessionID string `json:"sessionId"`
	}
	c.call("", "Target.attachToTarget", map[string]any{"targetId": page, "flatten": true}, &att)
	c.session = att.SessionID
	return c
}

// read hands each answer to its caller; events are not needed.
func (c *cdp) read(r *bufio.Reader) {
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m struct {
			ID int64 `json:"id"`
			cdpAnswer
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue
		}
		c.mu.Lock()
		ch := c.waiting[m.ID]
		delete(c.waiting, m.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- m.cdpAnswer
		}
	}
}

// call sends method with params (to the page's session unless session is
// "") and decodes its result into out.
func (c *cdp) call(session, method string, params any, out any) {
	c.t.Helper()
	if err := c.try(session, method, params, out); err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
}

func (c *cdp) try(session, method string, params any, out any) error {
	id := c.seq.Add(1)
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	ch := make(chan cdpAnswer, 1)
	c.mu.Lock()
	c.waiting[id] = ch
	c.mu.Unlock()
	if _, err := c.w.Write(append(b, 0)); err != nil {
		return err
	}
	select {
	case a := <-ch:
		if a.Error != nil {
			return errors.New(a.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(a.Result, out)
		}
		return nil
	case <-time.After(30 * time.Second):
		return errors.New("no answer in 30s")
	}
}

// eval runs a script in the page and returns its value (a promise's,
// once it settles) as JSON.
func (c *cdp) eval(script string) json.RawMessage {
	c.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	c.call(c.session, "Runtime.evaluate", map[string]any{"expression": script, "returnByValue": true, "awaitPromise": true}, &r)
	if r.Exception != nil {
		c.t.Fatalf("script %q: %s %s", script, r.Exception.Text, r.Exception.Exception.Description)
	}
	return r.Result.Value
}

// waitFor polls a script until it returns true.
func (c *cdp) waitFor(what, script string) {
	c.t.Helper()
	// Before the page has loaded (or while it redraws) the script may
	// throw: that is a no, not a failure.
	wrapped := "(() => { try { return (" + script + "); } catch (e) { return String(e); } })()"
	waitUntil(c.t, 30*time.Second, what, func() (bool, string) {
		v := c.eval(wrapped)
		return string(v) == "true", string(v)
	})
}

// screenshot keeps the page as it is now in the test's artifacts.
func (c *cdp) screenshot(name string) {
	c.t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	c.call(c.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || len(png) == 0 {
		c.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(c.t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("screenshot: %s", path)
}

// rawPacket writes one Gearman request; for the load goroutine, which
// must not call t.Fatal.
func writeRaw(w io.Writer, typ uint32, args ...string) error {
	body := strings.Join(args, "\x00")
	b := make([]byte, 12, 12+len(body))
	copy(b, "\x00REQ")
	binary.BigEndian.PutUint32(b[4:], typ)
	binary.BigEndian.PutUint32(b[8:], uint32(len(body)))
	_, err := w.Write(append(b, body...))
	return err
}

func readRaw(r *bufio.Reader) (uint32, []byte, error) {
	var h [12]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(h[8:]))
	_, err := io.ReadFull(r, body)
	return binary.BigEndian.Uint32(h[4:]), body, err
}

// runLoad submits background jobs of fn and has a worker complete them,
// until stop is closed or max jobs are done; it returns how many were.
func runLoad(addr, fn string, max int, stop <-chan struct{}) (int, error) {
	cl, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	wk, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	defer wk.Close()
	cr, wr := bufio.NewReader(cl), bufio.NewReader(wk)
	if err := writeRaw(wk, pCanDo, fn); err != nil {
		return 0, err
	}
	done := 0
	for done < max {
		select {
		case <-stop:
			return done, nil
		default:
		}
		cl.SetDeadline(time.Now().Add(10 * time.Second))
		wk.SetDeadline(time.Now().Add(10 * time.Second))
		if err := writeRaw(cl, pSubmitJobBg, fn, "", "x"); err != nil {
			return done, err
		}
		if typ, _, err := readRaw(cr); err != nil || typ != pJobCreated {
			return done, fmt.Errorf("submit: %d %v", typ, err)
		}
		if err := writeRaw(wk, pGrabJob); err != nil {
			return done, err
		}
		typ, body, err := readRaw(wr)
		if err != nil {
			return done, err
		}
		if typ != pJobAssign {
			continue // NO_JOB: the job went to no one yet; submit another
		}
		handle, _, _ := strings.Cut(string(body), "\x00")
		if err := writeRaw(wk, pWorkComplete, handle, "ok"); err != nil {
			return done, err
		}
		done++
		time.Sleep(20 * time.Millisecond) // a steady trickle, not a flood: the page is what is tested
	}
	return done, nil
}

// funcState reads one function from /api/function.
func funcState(t *testing.T, maddr, fn string) (total int, paused bool) {
	t.Helper()
	code, body := opstest.Get(t, "http://"+maddr+"/api/function?name="+fn)
	if code != 200 {
		t.Fatalf("/api/function?name=%s: %d %s", fn, code, body)
	}
	var d struct {
		Function struct {
			Total  int  `json:"total"`
			Paused bool `json:"paused"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatal(err)
	}
	return d.Function.Total, d.Function.Paused
}

func TestE2EConsoleActions(t *testing.T) {
	t.Parallel()
	if isGearmand(t) {
		t.Skip("gearmand has no status page")
	}
	bin := requireTool(t, "chromium")
	tokenFile := filepath.Join(t.TempDir(), "ops-token")
	const token = "open-sesame-42"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, maddr := startMetrics(t, "-q", "builtin", "--ops-token-file", tokenFile)
	addr := srv.addr

	// cons-stuck: 4 jobs, no worker; cons-busy: a worker holding one job;
	// cons-fail: an exception with its text; cons-load: load all along.
	c := dialGear(t, addr, "client")
	for i := range 4 {
		c.submit(pSubmitJobBg, "cons-stuck", fmt.Sprint("stuck-", i), "x")
	}
	c.submit(pSubmitJobBg, "cons-busy", "", "x")
	c.submit(pSubmitJobBg, "cons-fail", "", "x")
	busy := dialGear(t, addr, "busy worker")
	busy.send(pSetClientID, "busy-host")
	busy.send(pCanDo, "cons-busy")
	busy.grabJob(10 * time.Second)
	fail := dialGear(t, addr, "failing worker")
	fail.send(pCanDo, "cons-fail")
	h := fail.grabJob(10 * time.Second)
	fail.send(pWorkException, h[0], "disk quota exceeded")
	fail.echo()

	stop := make(chan struct{})
	loadDone := make(chan error, 1)
	go func() {
		_, err := runLoad(addr, "cons-load", 20000, stop)
		loadDone <- err
	}()
	defer func() {
		close(stop)
		if err := <-loadDone; err != nil {
			t.Errorf("load: %v", err)
		}
	}()

	page := startCDP(t, bin, "http://"+maddr+"/?q=cons-")
	page.waitFor("the page loaded", `document.body.dataset.loaded === "1"`)
	page.waitFor("the stuck queue highlighted", `(() => {
		const r = document.querySelector('tr[data-function="cons-stuck"]');
		return !!r && r.dataset.stuck === "1" && r.classList.contains("stuck");
	})()`)
	page.waitFor("the busy worker and its job in the connections", `[...document.querySelectorAll("#conns tbody tr")].some((r) =>
		r.textContent.includes("busy-host") && r.querySelector('[data-col="holding"]').textContent.includes("cons-busy"))`)
	page.waitFor("the exception's text in the failures", `[...document.querySelectorAll("#failures tbody tr")].some((r) =>
		r.textContent.includes("cons-fail") && r.textContent.includes("WORK_EXCEPTION: disk quota exceeded"))`)
	page.waitFor("completions of the load", `(() => {
		const r = document.querySelector('tr[data-function="cons-load"] [data-col="completed"]');
		return !!r && Number(r.dataset.value) > 0;
	})()`)
	page.waitFor("the action buttons", `!!document.querySelector('tr[data-function="cons-stuck"] button[data-action="pause"]') &&
		!document.querySelector('tr[data-function="cons-stuck"] td.acts').hidden`)
	page.screenshot("console-load.png")

	click := func(sel string) {
		t.Helper()
		if v := page.eval(`(() => { const b = document.querySelector(` + jsString(sel) + `); if (!b) return false; b.click(); return true; })()`); string(v) != "true" {
			t.Fatalf("nothing to click at %s", sel)
		}
	}
	dialogOpen := `document.getElementById("token-dialog").open`
	pauseButton := `tr[data-function="cons-stuck"] button[data-action="pause"]`

	// Without the token: the page asks; cancelled, nothing happens.
	click(pauseButton)
	page.waitFor("the page asks for the token", dialogOpen)
	page.screenshot("console-token-dialog.png")
	click("#token-cancel")
	page.waitFor("the action given up", `document.body.dataset.lastAction === "pause:cancelled"`)
	if _, paused := funcState(t, maddr, "cons-stuck"); paused {
		t.Fatal("paused without a token")
	}
	// A wrong token: the server says 401, the page asks again.
	click(pauseButton)
	page.waitFor("the page asks for the token", dialogOpen)
	page.eval(`document.getElementById("token-input").value = "wrong"; document.getElementById("token-ok").click(); true`)
	page.waitFor("the wrong token turned down and asked again", `document.body.dataset.lastAction === "pause:401" && `+dialogOpen+
		` && !document.getElementById("token-error").hidden`)
	click("#token-cancel")
	if _, paused := funcState(t, maddr, "cons-stuck"); paused {
		t.Fatal("paused with a wrong token")
	}

	// With the token: pause.
	click(pauseButton)
	page.waitFor("the page asks for the token", dialogOpen)
	page.eval(`document.getElementById("token-input").value = ` + jsString(token) + `; document.getElementById("token-ok").click(); true`)
	page.waitFor("the pause done", `document.body.dataset.lastAction === "pause:200"`)
	if _, paused := funcState(t, maddr, "cons-stuck"); !paused {
		t.Fatal("not paused")
	}
	page.waitFor("the row shows the pause", `document.querySelector('tr[data-function="cons-stuck"]').dataset.paused === "1"`)
	page.screenshot("console-paused.png")

	// The token is kept for the tab: resume asks for nothing.
	click(`tr[data-function="cons-stuck"] button[data-action="resume"]`)
	page.waitFor("the resume done", `document.body.dataset.lastAction === "resume:200"`)
	if _, paused := funcState(t, maddr, "cons-stuck"); paused {
		t.Fatal("still paused")
	}

	// Cancel the first waiting job from the function's detail.
	click(`tr[data-function="cons-stuck"] td[data-col="name"]`)
	page.waitFor("the waiting jobs", `document.querySelectorAll("#waiting tbody tr").length === 4 &&
		!document.querySelector("#waiting tbody td.acts").hidden`)
	page.screenshot("console-detail.png")
	click(`#waiting tbody tr:first-child button[data-action="cancel"]`)
	page.waitFor("the cancel done", `document.body.dataset.lastAction === "cancel:200"`)
	if total, _ := funcState(t, maddr, "cons-stuck"); total != 3 {
		t.Fatalf("%d jobs after a cancel, want 3", total)
	}

	// Drop what waits (the page asks first: yes).
	page.eval(`window.confirm = () => true; true`)
	click(`tr[data-function="cons-stuck"] button[data-action="drop"]`)
	page.waitFor("the drop done", `document.body.dataset.lastAction === "drop:200"`)
	if total, _ := funcState(t, maddr, "cons-stuck"); total != 0 {
		t.Fatalf("%d jobs after the drop, want 0", total)
	}
	page.waitFor("the row no longer stuck", `document.querySelector('tr[data-function="cons-stuck"]').dataset.stuck === "0"`)
	page.screenshot("console-after.png")

	// Each action the server did is in its log.
	for _, a := range []string{"pause", "resume", "cancel", "drop"} {
		waitUntil(t, 10*time.Second, "the "+a+" logged", func() (bool, string) {
			log := srv.stderr.String()
			return strings.Contains(log, "ops action\t{\"action\": \""+a+"\""), tail(log, 2<<10)
		})
	}
}

// jsString quotes s for a script.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
