package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/trainyard/trainyard/client"
)

// jobStatus is what a job's page refreshes while the job has not ended (GET
// /jobs/{id}/status.json): one read of the job, however long its log or results.
type jobStatus struct {
	// Status is the job's status in lower case, as the page writes it: "running".
	Status string `json:"status"`
	// Ended is true once the job has ended: the page then stops asking.
	Ended bool `json:"ended"`
	// Message says why a job waits or how it ended.
	Message string `json:"message,omitempty"`
	// Duration is how long it ran ("-" before it started), as the page writes it.
	Duration string `json:"duration"`
}

// statusOf returns a job's status as its page shows it.
func statusOf(j client.Job) jobStatus {
	return jobStatus{Status: strings.ToLower(string(j.Status)), Ended: j.EndedAt != nil, Message: j.Message,
		Duration: durationOf(j.StartedAt, j.EndedAt)}
}

// statusJSON answers a job's status as JSON, for its page to refresh.
func (h *Handler) statusJSON(w http.ResponseWriter, r *http.Request, _ string) {
	d, err := h.cfg.Backend.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		code := http.StatusBadGateway
		if client.IsNotFound(err) {
			code = http.StatusNotFound
		} else {
			h.log.Warn("dashboard: read a job's status", "job", r.PathValue("id"), "err", err)
		}
		http.Error(w, err.Error(), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(statusOf(d.Job))
}
