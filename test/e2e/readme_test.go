package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainyard/trainyard/internal/reporting"
)

// readmeSnippets returns the ```python blocks of README.md's section that starts with
// heading, up to the next heading of any level.
func readmeSnippets(t *testing.T, heading string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		snippets      []string
		in, inSection bool
		block         strings.Builder
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case in && line == "```":
			snippets = append(snippets, block.String())
			in = false
		case in:
			block.WriteString(line + "\n")
		case line == heading:
			inSection = true
		case inSection && strings.HasPrefix(line, "#"):
			inSection = false
		case inSection && line == "```python":
			block.Reset()
			in = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(snippets) == 0 {
		t.Fatalf("README.md has no python snippet under %q", heading)
	}
	return snippets
}

// The snippet of README.md's "The training API" runs as written, after a prelude that
// defines what it leaves to the reader (build_model, loader, train_one_epoch, epochs):
// with 1 worker, where the model is not wrapped in DDP, and then resumed with 2, where
// it is, from the checkpoint the single worker saved.
func TestReadmeTrainingAPISnippet(t *testing.T) {
	needTorch(t)
	prelude, err := os.ReadFile(filepath.Join(repoRoot(t), "test", "e2e", "testdata", "readme_training_api.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir, storage := t.TempDir(), t.TempDir()
	for i, snippet := range readmeSnippets(t, "## The training API") {
		script := filepath.Join(dir, "snippet.py")
		if err := os.WriteFile(script, append(prelude, snippet...), 0o644); err != nil {
			t.Fatal(err)
		}
		name := "readme" + string(rune('0'+i))
		code, out := run(t, dir, []string{"README_EPOCHS=2"},
			"run", "--storage-path", storage, "--name", name, "--workers", "1", "--", python, script)
		if code != 0 {
			t.Fatalf("snippet %d, 1 worker: exit %d:\n%s\n%s", i, code, snippet, out)
		}
		code, out = run(t, dir, []string{"README_EPOCHS=3"},
			"run", "--storage-path", storage, "--name", name, "--workers", "2", "--resume", "--", python, script)
		if code != 0 {
			t.Fatalf("snippet %d, resumed with 2 workers: exit %d:\n%s\n%s", i, code, snippet, out)
		}
		rows, err := reporting.ReadResults(filepath.Join(storage, name))
		if err != nil {
			t.Fatal(err)
		}
		var epochs []float64
		for _, r := range rows {
			epochs = append(epochs, r.Metrics["epoch"])
		}
		if len(epochs) != 3 || epochs[0] != 1 || epochs[1] != 2 || epochs[2] != 3 {
			t.Errorf("snippet %d: epochs reported %v, want [1 2 3] (2 with 1 worker, then 3 resumed with 2):\n%s", i, epochs, out)
		}
	}
}
