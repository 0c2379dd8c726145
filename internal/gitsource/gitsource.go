// Package gitsource fetches a job's code from a git repository, as Arena's git-sync does:
// it resolves a branch to the commit a run will use, clones that commit, and names the
// folder the clone goes in. It is pure Go (go-git), so the static binary clones in a pod
// whose image has no git.
package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// The variables Arena's git-sync reads the credentials of a private repository from.
const (
	EnvUsername = "GIT_SYNC_USERNAME"
	EnvPassword = "GIT_SYNC_PASSWORD"
)

// Source is a repository and the commit of it to check out.
type Source struct {
	URL string
	// Branch is the branch to follow; empty is the repository's default branch (HEAD).
	Branch string
	// Revision is a commit; when set it wins over Branch's tip.
	Revision string
	// Username and Password authenticate over HTTP(S); empty is anonymous.
	Username, Password string
}

// Describe says which repository and commit the code comes from, as get shows it: the
// commit checkedOut (what a clone checked out), else Revision, else Branch.
func (s Source) Describe(checkedOut string) string {
	at := s.Revision
	if checkedOut != "" {
		at = checkedOut
	}
	switch {
	case at != "":
		return s.shown() + " at commit " + at
	case s.Branch != "":
		return s.shown() + " (branch " + s.Branch + ")"
	}
	return s.shown()
}

var shaRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Check validates the source's fields without network access. Its errors say what to fix.
func Check(s Source) error {
	u, err := url.Parse(s.URL)
	if err != nil || s.URL == "" {
		return fmt.Errorf("git URL %q: not a URL; give https://host/owner/repo.git or file:///path/to/repo", s.shown())
	}
	switch u.Scheme {
	case "https", "http", "file":
	default:
		return fmt.Errorf("git URL %q: only https://, http:// and file:// are supported (credentials come from %s and %s)",
			s.shown(), EnvUsername, EnvPassword)
	}
	if u.User != nil {
		return fmt.Errorf("git URL %q holds credentials: put them in %s and %s instead, so they are not stored with the job",
			s.shown(), EnvUsername, EnvPassword)
	}
	if u.Scheme != "file" && u.Host == "" {
		return fmt.Errorf("git URL %q: no host", s.shown())
	}
	if RepoName(s.URL) == "" {
		return fmt.Errorf("git URL %q: no repository name in its path", s.shown())
	}
	if s.Revision != "" && !shaRE.MatchString(s.Revision) {
		return fmt.Errorf("git revision %q: give a full commit SHA (40 hex digits, lower case)", s.Revision)
	}
	if s.Branch != "" && plumbing.NewBranchReferenceName(s.Branch).Validate() != nil {
		return fmt.Errorf("git branch %q: not a valid branch name", s.Branch)
	}
	return nil
}

// userinfoRE matches the user information of a URL, parsed or not: what lies between
// "scheme://" and the first '@' before any '/'.
var userinfoRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://)[^/]*@`)

// Redact returns rawURL with any user information in it (a user name and password)
// replaced by "***", whether it parses or not, for messages and displays.
func Redact(rawURL string) string {
	return userinfoRE.ReplaceAllString(rawURL, "${1}***@")
}

// shown is the source's URL as messages show it (see Redact).
func (s Source) shown() string { return Redact(s.URL) }

// RepoName is the folder a repository is cloned into, as git-sync names it: the last
// element of the URL's path without ".git" ("https://h/o/mnist-pytorch.git" → "mnist-pytorch").
func RepoName(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	name := strings.TrimSuffix(path.Base(strings.TrimRight(u.Path, "/")), ".git")
	if name == "." || name == "/" || name == ".." {
		return ""
	}
	return name
}

func (s Source) auth() transport.AuthMethod {
	if s.Username == "" && s.Password == "" {
		return nil
	}
	return &githttp.BasicAuth{Username: s.Username, Password: s.Password}
}

// FromEnv fills the credentials from Arena's variables in env (KEY=VALUE pairs, later
// ones winning) when the source has none.
func (s Source) FromEnv(env []string) Source {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvUsername:
			s.Username = v
		case EnvPassword:
			s.Password = v
		}
	}
	return s
}

// Resolve returns the commit a run of s uses: Revision when given, else the tip of Branch
// (or of the default branch). It reads the remote's references only, so an unknown branch,
// a wrong password or a missing repository fails fast, before anything is started.
func Resolve(ctx context.Context, s Source) (string, error) {
	if err := Check(s); err != nil {
		return "", err
	}
	if s.Revision != "" {
		return s.Revision, nil
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: s.auth()})
	if err != nil {
		return "", explain(s, err)
	}
	want := plumbing.HEAD
	if s.Branch != "" {
		want = plumbing.NewBranchReferenceName(s.Branch)
	}
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	var branches []string
	for _, r := range refs {
		byName[r.Name()] = r
		if r.Name().IsBranch() {
			branches = append(branches, r.Name().Short())
		}
	}
	ref, ok := byName[want]
	for i := 0; ok && ref.Type() == plumbing.SymbolicReference && i < 5; i++ {
		ref, ok = byName[ref.Target()]
	}
	if !ok {
		sort.Strings(branches)
		if s.Branch == "" {
			return "", fmt.Errorf("git %s has no default branch (HEAD); give one with --sync-branch (its branches: %s)",
				s.shown(), list(branches))
		}
		return "", fmt.Errorf("git %s has no branch %q; its branches: %s", s.shown(), s.Branch, list(branches))
	}
	return ref.Hash().String(), nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "none (an empty repository)"
	}
	if len(names) > 20 {
		names = append(names[:20:20], "...")
	}
	return strings.Join(names, ", ")
}

// explain turns go-git's errors into ones that say what to do.
func explain(s Source, err error) error {
	switch {
	case errors.Is(err, transport.ErrAuthenticationRequired):
		if s.Username == "" {
			return fmt.Errorf("git %s needs credentials: set %s and %s", s.shown(), EnvUsername, EnvPassword)
		}
		return fmt.Errorf("git %s refused the credentials of %s (%s): check %s and %s", s.shown(), EnvUsername,
			s.Username, EnvUsername, EnvPassword)
	case errors.Is(err, transport.ErrAuthorizationFailed):
		return fmt.Errorf("git %s: user %s may not read this repository (check %s and %s)", s.shown(), s.Username,
			EnvUsername, EnvPassword)
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return fmt.Errorf("git %s: no repository there (check the URL)", s.shown())
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return fmt.Errorf("git %s is an empty repository: push a commit to it first", s.shown())
	}
	return fmt.Errorf("git %s: %w", s.shown(), err)
}

// Clone clones s into dir (which must not exist or be empty) and checks out commit, the
// one Resolve returned. It returns the commit checked out.
func Clone(ctx context.Context, s Source, dir, commit string) (string, error) {
	if err := Check(s); err != nil {
		return "", err
	}
	opts := &git.CloneOptions{URL: s.URL, Auth: s.auth(), NoCheckout: true, Tags: git.NoTags}
	if s.Branch != "" && s.Revision == "" {
		// The commit is on this branch (Resolve read its tip), unless it was force-pushed away.
		opts.ReferenceName, opts.SingleBranch = plumbing.NewBranchReferenceName(s.Branch), true
	}
	repo, err := git.PlainCloneContext(ctx, dir, false, opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", explain(s, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", s.shown(), err)
	}
	hash := plumbing.NewHash(commit)
	if err := wt.Checkout(&git.CheckoutOptions{Hash: hash, Force: true}); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("git %s: check out commit %s: %w (was it force-pushed away?)", s.shown(), commit, err)
	}
	head, err := repo.Head()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", s.shown(), err)
	}
	return head.Hash().String(), nil
}

// Fetch resolves s and clones it into dir: what a worker's init container and a local run
// do when no commit was pinned before.
func Fetch(ctx context.Context, s Source, dir string) (string, error) {
	commit, err := Resolve(ctx, s)
	if err != nil {
		return "", err
	}
	return Clone(ctx, s, dir, commit)
}

// Head returns the commit checked out in the clone at dir.
func Head(dir string) (string, error) {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return "", fmt.Errorf("open the clone %s: %w", dir, err)
	}
	head, err := repo.Head()
	if err != nil {
		return "", fmt.Errorf("the clone %s: %w", dir, err)
	}
	return head.Hash().String(), nil
}
