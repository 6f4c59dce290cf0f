package ops

import (
	"errors"
	"net/http"

	"go.uber.org/zap"
)

// Cluster is a cluster node as the operator endpoints see it: its state
// for /api/cluster, and the membership changes an operator makes there.
type Cluster interface {
	// Status is the node's state, as JSON.
	Status() any
	// AddVoter adds a node, or changes its address; Remove takes one out.
	// Both need the node to lead: ErrNotLeader (or an error wrapping it)
	// otherwise.
	AddVoter(id, addr string) error
	Remove(id string) error
}

// ErrNotLeader is what Cluster's changes return on a node that does not
// lead: the API answers 409, naming the leader in the status.
var ErrNotLeader = errors.New("this node is not the leader")

// serveCluster is GET /api/cluster: the node's Raft state, its members
// and their lag.
func (s *Server) serveCluster(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.cfg.Cluster.Status())
}

// addMember is POST /api/cluster/members with form values id and addr:
// the node joins as a voter, and catches up from the others. As the
// actions, it needs the token (authorize): a plain form post from another
// site's page cannot carry it.
func (s *Server) addMember(w http.ResponseWriter, r *http.Request) {
	if !s.authorizeMembership(w, r, "add") {
		return
	}
	id, addr := r.FormValue("id"), r.FormValue("addr")
	if id == "" || addr == "" {
		http.Error(w, "want form values id and addr (HOST:PORT of its --cluster-listen)", http.StatusBadRequest)
		return
	}
	err := s.cfg.Cluster.AddVoter(id, addr)
	s.membership(w, "add", id, addr, err)
}

// removeMember is DELETE /api/cluster/members/{id}.
func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	if !s.authorizeMembership(w, r, "remove") {
		return
	}
	id := r.PathValue("id")
	err := s.cfg.Cluster.Remove(id)
	s.membership(w, "remove", id, "", err)
}

// authorizeMembership answers a membership change that authorize refuses.
func (s *Server) authorizeMembership(w http.ResponseWriter, r *http.Request, what string) bool {
	log := s.cfg.Log.With(zap.String("change", what), zap.String("remote", r.RemoteAddr))
	code, why := s.authorize(r, log, "cluster membership change")
	if len(s.cfg.Token) == 0 {
		why = "membership changes are off: start switchyard with --ops-token-file"
		log.Log(s.cfg.ActionLevel, "cluster membership change refused: "+why)
	}
	if code == 0 {
		return true
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, why, code)
	return false
}

func (s *Server) membership(w http.ResponseWriter, what, id, addr string, err error) {
	s.cfg.Log.Warn("cluster membership change asked over HTTP", zap.String("change", what), zap.String("node", id),
		zap.String("addr", addr), zap.Error(err))
	switch {
	case errors.Is(err, ErrNotLeader):
		http.Error(w, err.Error()+": ask the leader (GET /api/cluster names it)", http.StatusConflict)
	case err != nil:
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
	default:
		writeJSON(w, s.cfg.Cluster.Status())
	}
}
