// Package testgit makes git repositories for tests with Debian's git, and serves them over
// HTTP with git's own http-backend behind basic authentication, as a private Git host does.
package testgit

import (
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo is a bare repository (what a Git host holds) and a clone of it to commit from.
type Repo struct {
	t *testing.T
	// Bare is the bare repository's folder, named <name>.git.
	Bare string
	work string
}

// New makes a bare repository named name.git in a temporary folder, with one commit of
// files on branch main. It skips the test when git is not installed.
func New(t *testing.T, name string, files map[string]string) *Repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: it makes the test's repository (apt install git)")
	}
	dir := t.TempDir()
	r := &Repo{t: t, Bare: filepath.Join(dir, name+".git"), work: filepath.Join(dir, "work")}
	r.git(dir, "init", "-q", "--bare", "-b", "main", r.Bare)
	r.git(dir, "clone", "-q", r.Bare, r.work)
	r.git(r.work, "checkout", "-q", "-b", "main")
	r.Commit("main", "first", files)
	return r
}

func (r *Repo) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit writes files on branch (made from the current commit if new), commits and pushes
// them, and returns the new commit.
func (r *Repo) Commit(branch, message string, files map[string]string) string {
	r.t.Helper()
	if r.git(r.work, "branch", "--list", branch) == "" {
		r.git(r.work, "checkout", "-q", "-b", branch)
	} else {
		r.git(r.work, "checkout", "-q", branch)
	}
	for name, text := range files {
		p := filepath.Join(r.work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git(r.work, "add", "-A")
	r.git(r.work, "commit", "-q", "--allow-empty", "-m", message)
	r.git(r.work, "push", "-q", "origin", branch)
	return r.git(r.work, "rev-parse", "HEAD")
}

// URL is the repository's file:// URL.
func (r *Repo) URL() string { return "file://" + r.Bare }

// Serve serves the repository's folder over HTTP on addr (host:port; port 0 picks one)
// until the test ends, answering only requests with user and password when user is not
// empty, and returns the repository's URL.
func (r *Repo) Serve(addr, user, password string) string {
	r.t.Helper()
	exe, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		r.t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(exe)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(r.Bare), "GIT_HTTP_EXPORT_ALL=1"}}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); user != "" && (!ok || u != user || p != password) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatalf("serve the repository: %v", err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	r.t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/" + filepath.Base(r.Bare)
}
