package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/client"
)

// PageSize is how many jobs a page of the job list shows.
const PageSize = 50

// listQuery is what the job list shows: a filter, a search, an order and a page.
type listQuery struct {
	Status string // one status, or "" for all
	Search string
	Sort   string // "submitted" (newest first), "name", "status"
	Page   int    // 1-based
}

// readListQuery reads the job list's query, or says what is wrong with it.
func readListQuery(q url.Values) (listQuery, error) {
	lq := listQuery{Status: strings.ToUpper(q.Get("status")), Search: strings.TrimSpace(q.Get("q")),
		Sort: cmp.Or(q.Get("sort"), "submitted"), Page: 1}
	if lq.Status != "" && !slices.Contains(statuses, lq.Status) {
		return lq, fmt.Errorf("status %q: choose one of %s", lq.Status, strings.Join(statuses, ", "))
	}
	if !slices.Contains([]string{"submitted", "name", "status"}, lq.Sort) {
		return lq, fmt.Errorf("sort %q: choose submitted, name or status", lq.Sort)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return lq, fmt.Errorf("page %q: a whole number from 1", v)
		}
		lq.Page = n
	}
	return lq, nil
}

var statuses = []string{"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"}

// link returns the list's URL with one parameter changed (and the page reset unless it
// is the page that changes).
func (lq listQuery) link(key, value string) string {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("status", lq.Status)
	set("q", lq.Search)
	if lq.Sort != "submitted" {
		set("sort", lq.Sort)
	}
	if key == "page" {
		set("page", value)
	} else {
		v.Del(key)
		set(key, value)
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// jobRow is one row of the job list.
type jobRow struct {
	client.Job
	Result *client.Result
}

// jobList is the job list page's data.
type jobList struct {
	Query       listQuery
	Statuses    []string
	Rows        []jobRow
	Total       int
	Page, Pages int
	Prev, Next  string
}

func (l jobList) Link(key, value string) string { return l.Query.link(key, value) }

func (h *Handler) jobsPage(w http.ResponseWriter, r *http.Request, session string) {
	lq, err := readListQuery(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	opts := client.ListOptions{Search: lq.Search, Sort: apiSort[lq.Sort], Offset: (lq.Page - 1) * PageSize, Limit: PageSize}
	if lq.Status != "" {
		opts.Statuses = []client.JobStatus{client.JobStatus(lq.Status)}
	}
	list, err := h.cfg.Backend.ListPage(r.Context(), opts)
	if err != nil {
		h.backendError(w, r, err)
		return
	}
	l := jobList{Query: lq, Statuses: statuses, Total: list.Total, Page: lq.Page}
	l.Pages = max(1, (list.Total+PageSize-1)/PageSize)
	for _, j := range list.Jobs {
		row := jobRow{Job: j}
		if j.StartedAt != nil {
			if d, err := h.cfg.Backend.Get(r.Context(), j.ID); err == nil {
				row.Result = d.Results
			}
		}
		l.Rows = append(l.Rows, row)
	}
	if lq.Page > 1 {
		l.Prev = lq.link("page", strconv.Itoa(lq.Page-1))
	}
	if lq.Page < l.Pages {
		l.Next = lq.link("page", strconv.Itoa(lq.Page+1))
	}
	h.render(w, http.StatusOK, "jobs.html", page{Title: "Jobs", CSRF: h.sessions.csrf(session), Data: l})
}

// apiSort maps the list's orders to the API's.
var apiSort = map[string]string{"submitted": "newest", "name": "name", "status": "status"}

// jobView is a job's page data.
type jobView struct {
	client.JobDetail
	Ranks   []int
	Rank    string // the rank whose log is shown, "" for the console
	LogTail string
	Ended   bool
	Points  int // the most points per curve, 0 for the server's default (?points=)
	// Use is what each rank's GPUs of the last attempt are doing now, by rank, while the
	// job runs and the machine measures its GPUs.
	Use map[int]*client.GPUUse
	// Happenings are the job's events and conditions, when the backend knows them.
	Happenings []Happening
	// Checkpoints are every checkpoint the job committed, when the backend knows them.
	CheckpointList *client.Checkpoints
}

// MaxPoints is the most points per curve a job's page may ask for (?points=).
const MaxPoints = 200000

// LogLines is how many lines of the log a job's page shows before following it.
const LogLines = 500

func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request, session string) {
	d, err := h.cfg.Backend.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.backendError(w, r, err)
		return
	}
	v := jobView{JobDetail: d, Rank: r.URL.Query().Get("rank"), Ended: d.Job.EndedAt != nil}
	if p := r.URL.Query().Get("points"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 2 || n > MaxPoints {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("points %q: a whole number from 2 to %d", p, MaxPoints))
			return
		}
		v.Points = n
	}
	if d.Run != nil && len(d.Run.Attempts) > 0 {
		for _, rk := range d.Run.Attempts[len(d.Run.Attempts)-1].Ranks {
			v.Ranks = append(v.Ranks, rk.Rank)
		}
	}
	if cs, ok := h.cfg.Backend.(CheckpointSource); ok && d.Job.StartedAt != nil {
		if list, err := cs.Checkpoints(r.Context(), d.Job.ID); err == nil {
			v.CheckpointList = &list
		} else {
			h.log.Warn("dashboard: read a job's checkpoints", "job", d.Job.ID, "err", err)
		}
	}
	if hs, ok := h.cfg.Backend.(HappeningSource); ok {
		if v.Happenings, err = hs.Happenings(r.Context(), d.Job.ID); err != nil {
			h.log.Warn("dashboard: read a job's events", "job", d.Job.ID, "err", err)
		}
	}
	if v.Ranks != nil && !v.Ended {
		v.Use = h.rankUse(r, d)
	}
	opts, err := logOptions(v.Rank, LogLines)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if d.Job.StartedAt != nil {
		if v.LogTail, err = h.cfg.Backend.Logs(r.Context(), d.Job.ID, opts); err != nil && !client.IsNotFound(err) {
			v.LogTail = "(the log cannot be read: " + err.Error() + ")"
		}
	}
	title := cmp.Or(d.Job.Name, d.Job.ID)
	h.render(w, http.StatusOK, "job.html", page{Title: title, CSRF: h.sessions.csrf(session), Data: v})
}

// rankUse returns what the GPUs of each rank of the job's last attempt are doing, or nil
// when the machine does not say.
func (h *Handler) rankUse(r *http.Request, d client.JobDetail) map[int]*client.GPUUse {
	if rs, ok := h.cfg.Backend.(RankUseSource); ok {
		use, err := rs.RankUse(r.Context(), d.Job.ID)
		if err != nil || len(use) == 0 {
			return nil
		}
		return use
	}
	n, err := h.cfg.Backend.Node(r.Context())
	if err != nil || len(n.GPUs.Utilization) == 0 {
		return nil
	}
	out := map[int]*client.GPUUse{}
	for _, rk := range d.Run.Attempts[len(d.Run.Attempts)-1].Ranks {
		if u, ok := client.UseOf(client.GPUList(rk.GPUs), n.GPUs.Utilization); ok {
			out[rk.Rank] = &u
		}
	}
	return out
}

// logOptions reads a rank ("" for the console log) and a number of lines.
func logOptions(rank string, tail int) (client.LogOptions, error) {
	opts := client.LogOptions{Tail: tail}
	if rank == "" {
		return opts, nil
	}
	n, err := strconv.Atoi(rank)
	if err != nil || n < 0 {
		return opts, fmt.Errorf("rank %q: a rank number, 0 or more", rank)
	}
	opts.Rank = &n
	return opts, nil
}

// logText answers a job's log as text: its last 16 MiB, or, with ?download=1, all of it
// (when the backend can send it) as a file to save.
func (h *Handler) logText(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("id")
	opts, err := logOptions(r.URL.Query().Get("rank"), 0)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	download := r.URL.Query().Get("download") != ""
	if whole, ok := h.cfg.Backend.(WholeLogSource); ok && download {
		if _, err := h.cfg.Backend.Get(r.Context(), id); err != nil { // before any byte is sent
			h.backendError(w, r, err)
			return
		}
		setDownload(w, id)
		if err := whole.WriteLog(r.Context(), id, opts, w); err != nil {
			h.log.Warn("dashboard: send a whole log", "job", id, "err", err)
		}
		return
	}
	text, err := h.cfg.Backend.Logs(r.Context(), id, opts)
	if err != nil {
		h.backendError(w, r, err)
		return
	}
	if download {
		setDownload(w, id)
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
	}
	_, _ = w.Write([]byte(text))
}

// setDownload sets the headers of a log sent as a file to save. Logs are never cached: a
// browser's cache is no place for what a job printed.
func setDownload(w http.ResponseWriter, id string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="trainyard-`+safeFileName(id)+`.log"`)
}

// safeFileName keeps letters, digits, '-', '_' and '.' of s.
func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, s)
}

// stop stops a job and goes back to its page.
func (h *Handler) stop(w http.ResponseWriter, r *http.Request, _ string) {
	if h.readOnly(w, r) {
		return
	}
	j, err := h.cfg.Backend.Stop(r.Context(), r.PathValue("id"))
	if err != nil {
		h.backendError(w, r, err)
		return
	}
	h.log.Info("dashboard: stop", "job", j.ID, "client", r.RemoteAddr)
	http.Redirect(w, r, "/jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
}

// deleteJob deletes an ended job (the Delete button), then shows the job list.
func (h *Handler) deleteJob(w http.ResponseWriter, r *http.Request, _ string) {
	if h.readOnly(w, r) {
		return
	}
	id := r.PathValue("id")
	if err := h.cfg.Backend.Delete(r.Context(), id); err != nil {
		h.backendError(w, r, err)
		return
	}
	h.log.Info("dashboard: delete", "job", id, "client", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// readOnly answers 405 to a request that would change a job of a read-only dashboard
// (local runs are only watched), and reports whether it did.
func (h *Handler) readOnly(w http.ResponseWriter, r *http.Request) bool {
	if !h.cfg.ReadOnly {
		return false
	}
	w.Header().Set("Allow", "GET, HEAD")
	h.fail(w, r, http.StatusMethodNotAllowed, "This dashboard only shows jobs: stop or delete them where they run.")
	return true
}
