package gitsource

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/testgit"
)

// bareRepo makes a bare repository mnist-pytorch.git whose main branch has two commits and
// whose dev branch another, and returns its folder and main's tip.
func bareRepo(t *testing.T) (string, string) {
	t.Helper()
	r := testgit.New(t, "mnist-pytorch", map[string]string{"train.py": "print('v1')\n"})
	r.Commit("dev", "dev", map[string]string{"train.py": "print('dev')\n"})
	return r.Bare, r.Commit("main", "two", map[string]string{"train.py": "print('v2')\n"})
}

func TestResolveAndCloneFromAFolder(t *testing.T) {
	bare, tip := bareRepo(t)
	src := Source{URL: "file://" + bare}
	commit, err := Resolve(context.Background(), src)
	if err != nil || commit != tip {
		t.Fatalf("Resolve = %q, %v; want main's tip %s", commit, err, tip)
	}
	dst := filepath.Join(t.TempDir(), RepoName(src.URL))
	if got, err := Clone(context.Background(), src, dst, commit); err != nil || got != tip {
		t.Fatalf("Clone = %q, %v", got, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "train.py")); string(b) != "print('v2')\n" {
		t.Errorf("train.py = %q", b)
	}

	dev := Source{URL: src.URL, Branch: "dev"}
	devDir := filepath.Join(t.TempDir(), "x")
	if _, err := Fetch(context.Background(), dev, devDir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(devDir, "train.py")); string(b) != "print('dev')\n" {
		t.Errorf("dev's train.py = %q", b)
	}

	_, err = Resolve(context.Background(), Source{URL: src.URL, Branch: "nope"})
	if err == nil || !strings.Contains(err.Error(), `has no branch "nope"; its branches: dev, main`) {
		t.Errorf("unknown branch: %v", err)
	}
	_, err = Resolve(context.Background(), Source{URL: "file://" + filepath.Join(t.TempDir(), "none.git")})
	if err == nil || !strings.Contains(err.Error(), "no repository there") {
		t.Errorf("missing repository: %v", err)
	}
}

func TestPinnedRevisionIsCheckedOut(t *testing.T) {
	bare, tip := bareRepo(t)
	dst := filepath.Join(t.TempDir(), "c")
	src := Source{URL: "file://" + bare, Branch: "main"}
	// The branch moved on after the commit was pinned: the clone still checks the pin out.
	first, err := Clone(context.Background(), src, dst, tip)
	if err != nil || first != tip {
		t.Fatalf("Clone = %q, %v", first, err)
	}
	parent := strings.Repeat("0", 40)
	if _, err := Clone(context.Background(), src, filepath.Join(t.TempDir(), "d"), parent); err == nil {
		t.Error("a commit the repository does not have was checked out")
	}
}

// TestPrivateRepositoryOverHTTP serves the repository with git's own http-backend behind
// basic authentication, as a private Git host does.
func TestPrivateRepositoryOverHTTP(t *testing.T) {
	r := testgit.New(t, "mnist-pytorch", map[string]string{"train.py": "print('v1')\n"})
	tip := r.Commit("main", "two", map[string]string{"train.py": "print('v2')\n"})
	url := r.Serve("127.0.0.1:0", "alice", "s3cret")

	_, err := Resolve(context.Background(), Source{URL: url})
	if err == nil || !strings.Contains(err.Error(), "needs credentials: set GIT_SYNC_USERNAME and GIT_SYNC_PASSWORD") {
		t.Errorf("no credentials: %v", err)
	}
	_, err = Resolve(context.Background(), Source{URL: url, Username: "alice", Password: "wrong"})
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
		t.Errorf("wrong password: %v", err)
	}
	src := Source{URL: url}.FromEnv([]string{"GIT_SYNC_USERNAME=alice", "GIT_SYNC_PASSWORD=s3cret"})
	dst := filepath.Join(t.TempDir(), RepoName(url))
	commit, err := Fetch(context.Background(), src, dst)
	if err != nil || commit != tip {
		t.Fatalf("Fetch = %q, %v; want %s", commit, err, tip)
	}
	if _, err := os.Stat(filepath.Join(dst, "train.py")); err != nil {
		t.Error(err)
	}
}

func TestCheckRefusesBadSources(t *testing.T) {
	for _, c := range []struct {
		src  Source
		want string
	}{
		{Source{URL: "git@github.com:o/r.git"}, "not a URL"},
		{Source{URL: "ssh://git@h/o/r.git"}, "only https://, http:// and file://"},
		{Source{URL: "https://bob:pw@h/o/r.git"}, "holds credentials: put them in GIT_SYNC_USERNAME"},
		{Source{URL: "https:///r.git"}, "no host"},
		{Source{URL: "https://h/"}, "no repository name"},
		{Source{URL: "https://h/o/r.git", Revision: "abc"}, "full commit SHA"},
		{Source{URL: "https://h/o/r.git", Branch: "a..b"}, "not a valid branch name"},
	} {
		err := Check(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v) = %v; want %q", c.src, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw@") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if got := RepoName("https://h/o/mnist-pytorch.git"); got != "mnist-pytorch" {
		t.Errorf("RepoName = %q", got)
	}
}

// get's Code line: the commit a clone checked out wins over the pinned revision, which wins
// over the branch.
func TestDescribe(t *testing.T) {
	sha1, sha2 := strings.Repeat("a", 40), strings.Repeat("b", 40)
	for _, c := range []struct {
		src        Source
		checkedOut string
		want       string
	}{
		{Source{URL: "https://h/r.git", Branch: "dev", Revision: sha1}, sha2, "https://h/r.git at commit " + sha2},
		{Source{URL: "https://h/r.git", Branch: "dev", Revision: sha1}, "", "https://h/r.git at commit " + sha1},
		{Source{URL: "https://h/r.git", Branch: "dev"}, "", "https://h/r.git (branch dev)"},
		{Source{URL: "https://h/r.git"}, "", "https://h/r.git"},
	} {
		if got := c.src.Describe(c.checkedOut); got != c.want {
			t.Errorf("%+v.Describe(%q) = %q, want %q", c.src, c.checkedOut, got, c.want)
		}
	}
}
