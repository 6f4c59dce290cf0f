package ops

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"switchyard/sched"
)

// The operator's actions: POST /api/actions/{pause,resume,drop,cancel},
// and a cluster's membership changes (cluster.go) alike.
// They are off unless Config.Token is set (--ops-token-file). Each needs
// the token in the X-Switchyard-Token header, compared in constant time;
// a browser sends a custom header cross-origin only after a preflight,
// which this server never answers, so another site's page cannot make a
// logged-in operator's browser act (and there is no cookie to ride on
// anyway). A request whose Origin (or Sec-Fetch-Site) says it comes from
// another site is refused before the token is looked at. Each action,
// done or refused for its token, is logged.

// TokenHeader carries the ops token.
const TokenHeader = "X-Switchyard-Token"

// maxActionBody bounds an action's JSON body.
const maxActionBody = 64 << 10

// actionReq is an action's body.
type actionReq struct {
	// Function names the function to pause, resume or drop.
	Function string `json:"function"`
	// ID is the job to cancel: its number, or its Gearman handle
	// (H:host:N).
	ID json.RawMessage `json:"id"`
}

type actionResp struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
	Dropped *int   `json:"dropped,omitempty"`
}

func (s *Server) serveAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	log := s.cfg.Log.With(zap.String("action", action), zap.String("remote", r.RemoteAddr))
	fail := func(code int, why string) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(actionResp{Error: why})
	}
	if code, why := s.authorize(r, log, "ops action"); code != 0 {
		fail(code, why)
		return
	}
	var req actionReq
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxActionBody))
	if err == nil && len(body) > 0 {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		fail(http.StatusBadRequest, "body: "+err.Error())
		return
	}
	sc := s.cfg.Sched
	resp := actionResp{OK: true}
	fn := []byte(req.Function)
	switch action {
	case "pause":
		err = sc.Pause(fn)
	case "resume":
		err = sc.Resume(fn)
	case "drop":
		var n int
		n, err = sc.DropWaiting(fn)
		resp.Dropped = &n
	case "cancel":
		var id uint64
		if id, err = jobID(req.ID); err == nil {
			err = sc.Cancel(id)
		}
		log = log.With(zap.Uint64("job", id))
	default:
		fail(http.StatusNotFound, "no such action")
		return
	}
	if action != "cancel" {
		log = log.With(zap.String("function", req.Function))
	}
	switch {
	case errors.Is(err, sched.ErrNoFunction), errors.Is(err, sched.ErrNotFound):
		log.Log(s.cfg.ActionLevel, "ops action: nothing to act on", zap.Error(err))
		fail(http.StatusNotFound, err.Error())
		return
	case err != nil:
		log.Log(s.cfg.ActionLevel, "ops action refused", zap.Error(err))
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if resp.Dropped != nil {
		log = log.With(zap.Int("dropped", *resp.Dropped))
	}
	log.Log(s.cfg.ActionLevel, "ops action")
	writeJSON(w, &resp)
}

// authorize checks an operator's request as every action and membership
// change needs it: the token configured (or everything is off), the
// request not cross-site (refused before the token is looked at, so that
// a page elsewhere learns nothing of it), and the token carried. It
// returns 0, or the status and the reason of the refusal, which it logs
// as what.
func (s *Server) authorize(r *http.Request, log *zap.Logger, what string) (int, string) {
	if len(s.cfg.Token) == 0 {
		return http.StatusForbidden, "actions are off: start switchyard with --ops-token-file"
	}
	if crossSite(r) {
		log.Log(s.cfg.ActionLevel, what+" refused: cross-origin", zap.String("origin", r.Header.Get("Origin")),
			zap.String("sec-fetch-site", r.Header.Get("Sec-Fetch-Site")))
		return http.StatusForbidden, "cross-origin request"
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), s.cfg.Token) != 1 {
		log.Log(s.cfg.ActionLevel, what+" refused: wrong or missing token")
		return http.StatusUnauthorized, "wrong or missing token (" + TokenHeader + ")"
	}
	return 0, ""
}

// jobID reads a job's id: a number, or a string holding one or a Gearman
// handle (H:host:N).
func jobID(raw json.RawMessage) (uint64, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, errors.New("id: a job's number or handle is needed")
	}
	switch x := v.(type) {
	case float64:
		if x >= 1 && x == float64(uint64(x)) {
			return uint64(x), nil
		}
	case string:
		if n, err := strconv.ParseUint(x[strings.LastIndexByte(x, ':')+1:], 10, 64); err == nil {
			return n, nil
		}
	}
	return 0, errors.New("id: a job's number or handle is needed")
}

// crossSite reports whether a browser says the request comes from
// another site's page: by Sec-Fetch-Site, or an Origin whose host is not
// the one asked.
func crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false // not from a browser's cross-origin fetch
	}
	u, err := url.Parse(origin)
	return err != nil || u.Host != r.Host
}
