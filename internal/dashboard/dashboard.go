package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/trainyard/trainyard/client"
	"github.com/trainyard/trainyard/internal/auth"
)

// Backend is where the dashboard reads jobs and stops them: the job server's client.
type Backend interface {
	List(ctx context.Context, status ...client.JobStatus) ([]client.Job, error)
	ListPage(ctx context.Context, opts client.ListOptions) (client.JobList, error)
	Get(ctx context.Context, ref string) (client.JobDetail, error)
	Stop(ctx context.Context, ref string) (client.Job, error)
	// Delete deletes a job that has ended, with its record (its run folder stays).
	Delete(ctx context.Context, ref string) error
	Logs(ctx context.Context, id string, opts client.LogOptions) (string, error)
	Follow(ctx context.Context, ref string, w io.Writer, opts client.LogOptions) error
	Results(ctx context.Context, ref string, opts client.ResultOptions) (client.ResultList, error)
	Node(ctx context.Context) (client.Node, error)
}

// Happening is an event or a condition of a job, as Kubernetes records them.
type Happening struct {
	Time time.Time
	// Kind is "Normal" or "Warning" for an event, "Condition" for a condition.
	Kind    string
	Reason  string
	Message string
	// Count is how many times an event happened (1 for a condition).
	Count int
}

// HappeningSource is a Backend that also knows its jobs' events and conditions (a
// cluster's): a job's page shows them.
type HappeningSource interface {
	Happenings(ctx context.Context, ref string) ([]Happening, error)
}

// RankUseSource is a Backend that measures the GPUs of a job's ranks itself (a cluster's
// workers, each read in its pod), by rank.
type RankUseSource interface {
	RankUse(ctx context.Context, ref string) (map[int]*client.GPUUse, error)
}

// CheckpointSource is a Backend that also lists every checkpoint a job committed, kept or
// deleted (the server, local runs): a job's page shows them.
type CheckpointSource interface {
	Checkpoints(ctx context.Context, ref string) (client.Checkpoints, error)
}

// WholeLogSource is a Backend that can send a job's whole log, however long (the
// server, local runs): the download link gets all of it, not its last 16 MiB.
type WholeLogSource interface {
	WriteLog(ctx context.Context, id string, opts client.LogOptions, w io.Writer) error
}

// Config is what a dashboard needs.
type Config struct {
	// Backend serves the jobs.
	Backend Backend
	// Token, when set, signs a browser in over TLS (the server's token); over plain HTTP
	// only sign-in links do (SignIns).
	Token string
	// SignIns are the one-time codes of sign-in links; nil makes a set of its own (see
	// Handler.SignInLink).
	SignIns *auth.SignIns
	// SignInHelp tells, on the sign-in page, how to get a sign-in link: "Run `trainyard
	// open` ...".
	SignInHelp string
	// TokenHelp tells where the token is, when a wrong one is given; "" names the server's
	// token file.
	TokenHelp string
	// CookieName is the session cookie's name (see CookieName); "" is CookiePrefix.
	CookieName string
	// Logger receives sign-ins, refusals and errors; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// ReadOnly hides the buttons that change jobs (local runs are only watched).
	ReadOnly bool
	// Place names where the jobs live, shown in every page's header: "gpu-box:8265",
	// "~/trainyard_results".
	Place string
}

//go:embed assets
var assets embed.FS

// Handler serves the dashboard's pages.
type Handler struct {
	cfg      Config
	log      *slog.Logger
	sessions *sessions
	throttle *throttle
	pages    *template.Template
	mux      *http.ServeMux
	samples  *history
}

// New returns the dashboard's handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Backend == nil {
		return nil, errors.New("dashboard: a backend is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SignIns == nil {
		cfg.SignIns = auth.NewSignIns(cfg.Now)
	}
	if cfg.TokenHelp == "" {
		cfg.TokenHelp = "It is in the server's token file (by default ~/.config/trainyard/token)."
	}
	if cfg.CookieName == "" {
		cfg.CookieName = CookiePrefix
	}
	pages, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, log: cfg.Logger, sessions: newSessions(cfg.CookieName, []byte(cfg.Token), cfg.Now),
		throttle: newThrottle(cfg.Now, cfg.Logger), pages: pages, mux: http.NewServeMux(), samples: newHistory(HistorySamples)}
	static, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	h.mux.HandleFunc("GET /login", h.loginPage)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.signedIn(h.logout))
	h.mux.HandleFunc("GET /{$}", h.signedIn(h.jobsPage))
	h.mux.HandleFunc("GET /jobs/{id}", h.signedIn(h.jobPage))
	h.mux.HandleFunc("GET /jobs/{id}/status.json", h.signedIn(h.statusJSON))
	h.mux.HandleFunc("GET /jobs/{id}/log", h.signedIn(h.logText))
	h.mux.HandleFunc("GET /jobs/{id}/follow", h.signedIn(h.follow))
	h.mux.HandleFunc("POST /jobs/{id}/stop", h.signedIn(h.stop))
	h.mux.HandleFunc("POST /jobs/{id}/delete", h.signedIn(h.deleteJob))
	h.mux.HandleFunc("GET /jobs/{id}/results.json", h.signedIn(h.resultsJSON))
	h.mux.HandleFunc("GET /compare", h.signedIn(h.comparePage))
	h.mux.HandleFunc("GET /machine", h.signedIn(h.machinePage))
	h.mux.HandleFunc("GET /machine/samples.json", h.signedIn(h.samplesJSON))
	h.mux.HandleFunc("/", h.signedIn(func(w http.ResponseWriter, r *http.Request, _ string) {
		h.fail(w, r, http.StatusNotFound, "There is no page "+r.URL.Path+".")
	}))
	return h, nil
}

// SignInLink returns the path of a new one-time sign-in link ("/login#code=...") and when
// it expires.
func (h *Handler) SignInLink() auth.SignInLink { return h.cfg.SignIns.Link() }

// ServeHTTP serves a request, with the headers every page gets.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// signedIn wraps a page that needs a session: without one, a GET goes to the sign-in page
// and anything else is refused; a POST must carry the session's CSRF token.
func (h *Handler) signedIn(next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		session, ok := h.sessions.valid(r)
		switch {
		case !ok && r.Method == http.MethodGet:
			http.Redirect(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		case !ok:
			h.fail(w, r, http.StatusUnauthorized, "Sign in first.")
		case r.Method != http.MethodGet && !h.sessions.checkCSRF(r, session):
			h.log.Warn("dashboard: refused a request without its CSRF token", "path", r.URL.Path, "client", r.RemoteAddr)
			h.fail(w, r, http.StatusForbidden, "This request did not come from a dashboard page (its CSRF token or origin is wrong). Reload the page and try again.")
		default:
			next(w, r, session)
		}
	}
}

// page is what every template gets.
type page struct {
	Title    string
	CSRF     string
	Data     any
	Message  string
	ReadOnly bool
	Place    string
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, p page) {
	p.ReadOnly, p.Place = h.cfg.ReadOnly, h.cfg.Place
	var b bytes.Buffer // whole, so that a failed render is a 500, not half a page
	if err := h.pages.ExecuteTemplate(&b, name, p); err != nil {
		h.log.Error("dashboard: render a page", "page", name, "err", err)
		http.Error(w, "the dashboard failed to render this page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = b.WriteTo(w)
}

// fail answers an error page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := ""
	if s, ok := h.sessions.valid(r); ok {
		csrf = h.sessions.csrf(s)
	}
	h.render(w, status, "error.html", page{Title: http.StatusText(status), CSRF: csrf, Message: msg})
}

// backendError answers an error of the backend: 404 for a job it does not know.
func (h *Handler) backendError(w http.ResponseWriter, r *http.Request, err error) {
	if client.IsNotFound(err) {
		h.fail(w, r, http.StatusNotFound, err.Error())
		return
	}
	if ae, ok := errors.AsType[*client.APIError](err); ok && ae.Status == http.StatusConflict {
		h.fail(w, r, http.StatusConflict, err.Error()) // such as deleting a job that runs
		return
	}
	h.log.Error("dashboard: the server's API failed", "path", r.URL.Path, "err", err)
	h.fail(w, r, http.StatusBadGateway, err.Error())
}
