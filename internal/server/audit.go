package server

import (
	"net/http"

	"github.com/trainyard/trainyard/internal/store"
)

// The audit trail: what clients did to jobs, and the requests the server refused, one log
// line each, with the client's address. No line holds a token.

// Actions that the audit trail records.
const (
	actionSubmit = "submit"
	actionStop   = "stop"
	actionDelete = "delete"
)

// audit logs that the client of r did action to job j: submitted, stopped or deleted it.
func (s *Server) audit(r *http.Request, action string, j *store.Job) {
	s.log.Info("audit", "action", action, "job", j.ID, "name", j.Name, "client", r.RemoteAddr,
		"method", r.Method, "path", r.URL.Path, "userAgent", r.UserAgent())
}

// refused logs a request refused with status (401 or 403) and the reason the client was
// told. The path is logged without its query, where a misplaced token could be.
func (s *Server) refused(r *http.Request, status int, reason string) {
	s.log.Warn("refused request", "status", status, "client", r.RemoteAddr, "method", r.Method,
		"path", r.URL.Path, "userAgent", r.UserAgent(), "reason", reason)
}
