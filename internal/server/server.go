package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trainyard/trainyard/internal/auth"
	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/jobspec"
	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/upload"
)

// Config is what a Server needs. Jobs, Token, Packages and StateDir are required.
type Config struct {
	// Jobs is the engine that runs the jobs.
	Jobs *jobs.Service
	// Token is the bearer token every request but GET /healthz must carry.
	Token string
	// Auth adjusts the token and Host checks (listen address, allowed hosts). The server
	// adds auth.HealthPath to its ExemptPaths.
	Auth auth.Options
	// Packages keeps the zip archives that Ray clients upload.
	Packages *upload.Store
	// PackageLimits bound an uploaded package and what it unpacks to; the zero value is
	// upload.DefaultLimits.
	PackageLimits upload.Limits
	// UploadQuota is the most bytes that stored packages and the working folders unpacked
	// from them may take; an upload or a submission past it is refused (507) until jobs
	// are deleted. 0 means DefaultUploadQuota.
	UploadQuota int64
	// StateDir is the server's own folder; jobs submitted with a package get their
	// working folder under StateDir/workdirs.
	StateDir string
	// StoragePath is the folder that holds the runs of jobs that do not name one; empty
	// means jobspec.DefaultStoragePath.
	StoragePath string
	// BodyRate is how slowly a client may send a request body before it is cut off
	// (408); the zero value is DefaultBodyRate.
	BodyRate BodyRate
	// Node is what /api/v1/node and /metrics report of this machine.
	Node NodeConfig
	// Version is trainyard's version, reported by /api/version.
	Version string
	// SignIns, when set, are the dashboard's one-time sign-in codes: POST
	// /api/v1/signin-links makes a link with one (see auth.SignIns). Without them that
	// endpoint answers 404.
	SignIns *auth.SignIns
	// Logger receives the server's errors and its audit trail: one Info line for every
	// submit, stop and delete, one Warn line for every request refused with 401 or 403;
	// nil discards them.
	Logger *slog.Logger
}

// NodeConfig is what the server reports of this machine.
type NodeConfig struct {
	// Resources is what the machine offers to jobs: the jobs.Service's scheduler.Node.
	Resources scheduler.Node
	// Utilization, when set, reports the GPUs' current use for /api/v1/node (from NVML,
	// say); nil leaves utilization out.
	Utilization func(ctx context.Context) ([]GPUUtilization, error)
}

// Server answers the Ray Jobs API and the native API. Its methods are safe for
// concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	workdirs string // StateDir/workdirs: working folders unpacked from packages
	quota    *uploadQuota
	stateDir string // StateDir with its symlinks resolved, which no job's runs may touch
	handler  http.Handler

	tailWriteTimeout time.Duration // how long one write to a log tail may take
	tails            atomic.Int64  // log tails being served

	mu       sync.Mutex
	restarts map[string]restartCount // by job ID, for /metrics
}

// New checks cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Jobs == nil:
		return nil, errors.New("server: no jobs service")
	case cfg.Token == "":
		return nil, errors.New("server: no token")
	case cfg.Packages == nil:
		return nil, errors.New("server: no package store")
	case cfg.StateDir == "":
		return nil, errors.New("server: no state folder")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.StoragePath == "" {
		cfg.StoragePath = jobspec.DefaultStoragePath
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &Server{cfg: cfg, log: cfg.Logger, workdirs: filepath.Join(cfg.StateDir, "workdirs"),
		restarts: map[string]restartCount{}, tailWriteTimeout: tailWriteTimeout}
	if err := os.MkdirAll(s.workdirs, 0o700); err != nil {
		return nil, fmt.Errorf("server: create the working folders' folder: %w", err)
	}
	quota, err := newUploadQuota(cfg.UploadQuota, cfg.Packages, s.workdirs, s.log)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s.quota = quota
	s.stateDir = resolvePath(cfg.StateDir)
	opts := cfg.Auth
	opts.ExemptPaths = append(slices.Clip(opts.ExemptPaths), auth.HealthPath)
	opts.OnRefuse = s.refused
	opts.RayPath = isRayPath
	s.handler = LimitBodyRate(cfg.BodyRate, auth.Middleware(cfg.Token, opts, s.routes()))
	return s, nil
}

// Handler returns the server's HTTP handler: every endpoint, behind auth.Middleware,
// behind the pace that request bodies must keep (Config.BodyRate).
func (s *Server) Handler() http.Handler { return s.handler }

// routes registers every endpoint.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	s.rayRoutes(mux)
	s.nativeRoutes(mux)
	mux.HandleFunc("GET "+auth.HealthPath, func(w http.ResponseWriter, _ *http.Request) { writeText(w, "ok\n") })
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		a := native
		if isRayPath(r.URL.Path) {
			a = ray
		}
		s.writeError(w, r, a, refuse(errNoEndpoint, "no endpoint %s %s; see the API in the trainyard docs", r.Method, r.URL.Path))
	})
	return mux
}

// rayRoutes registers Ray's Jobs API. Ray's clients send a trailing slash to submit and
// list; both forms are served.
func (s *Server) rayRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/version", s.rayVersion)
	for _, p := range []string{"/api/jobs", "/api/jobs/{$}"} {
		mux.HandleFunc("POST "+p, s.raySubmit)
		mux.HandleFunc("GET "+p, s.rayList)
	}
	mux.HandleFunc("GET /api/jobs/{id}", s.rayGet)
	mux.HandleFunc("POST /api/jobs/{id}/stop", s.rayStop)
	mux.HandleFunc("DELETE /api/jobs/{id}", s.rayDelete)
	mux.HandleFunc("GET /api/jobs/{id}/logs", s.rayLogs)
	mux.HandleFunc("GET /api/jobs/{id}/logs/tail", s.rayTail)
	mux.HandleFunc("GET /api/packages/{protocol}/{name}", s.getPackage)
	mux.HandleFunc("PUT /api/packages/{protocol}/{name}", s.putPackage)
}

// nativeRoutes registers the native API.
func (s *Server) nativeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/jobs", s.submit)
	mux.HandleFunc("GET /api/v1/jobs", s.list)
	mux.HandleFunc("GET /api/v1/jobs/{id}", s.get)
	mux.HandleFunc("POST /api/v1/jobs/{id}/stop", s.stop)
	mux.HandleFunc("DELETE /api/v1/jobs/{id}", s.delete)
	mux.HandleFunc("GET /api/v1/jobs/{id}/results", s.results)
	mux.HandleFunc("GET /api/v1/jobs/{id}/checkpoints", s.checkpoints)
	mux.HandleFunc("GET /api/v1/jobs/{id}/logs", s.logs)
	mux.HandleFunc("GET /api/v1/jobs/{id}/logs/tail", s.nativeTail)
	mux.HandleFunc("GET /api/v1/node", s.node)
	mux.HandleFunc("POST "+auth.SignInPath, s.signInLink)
}

// signInLink answers POST /api/v1/signin-links with a one-time sign-in code to the
// dashboard (201), sealed to the request (auth.Seal), which has passed the token's
// checks, like every other: only the client that signed it can open the code.
func (s *Server) signInLink(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SignIns == nil {
		s.writeError(w, r, native, refuse(errNoEndpoint, "this server has no dashboard to sign in to"))
		return
	}
	code, expires := s.cfg.SignIns.Issue()
	sealed, err := auth.Seal(r.Context(), code)
	if err != nil {
		s.cfg.SignIns.Redeem(code) // drop it unused
		s.writeError(w, r, native, err)
		return
	}
	s.log.Info("made a dashboard sign-in link", "client", r.RemoteAddr, "user_agent", r.UserAgent())
	writeJSON(w, http.StatusCreated, auth.SealedSignIn{Path: auth.LoginPath, SealedCode: sealed, Expires: expires.UTC()})
}
