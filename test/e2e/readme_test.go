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

// numberWords are the counts a heading may spell out.
var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}

// A README heading that counts commands ("## Three commands") lists that many in the
// shell block under it, and no paragraph of the README starts halfway through a sentence
// ("and ...", "or ...").
func TestReadmeSaysWhatItLists(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	headings := 0
	for i, line := range lines {
		if i > 0 && lines[i-1] == "" {
			for _, word := range []string{"and ", "or ", "but ", "so "} {
				if strings.HasPrefix(line, word) {
					t.Errorf("README.md:%d: a paragraph starts with %q: %s", i+1, word, line)
				}
			}
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[0] != "##" || fields[2] != "commands" {
			continue
		}
		want, ok := numberWords[strings.ToLower(fields[1])]
		if !ok {
			continue
		}
		headings++
		got, j := 0, i+1
		for j < len(lines) && lines[j] != "```sh" && !strings.HasPrefix(lines[j], "#") {
			j++
		}
		if j == len(lines) || lines[j] != "```sh" {
			t.Errorf("README.md:%d: %q has no shell block under it", i+1, line)
			continue
		}
		for j++; j < len(lines) && lines[j] != "```"; j++ {
			if s := strings.TrimSpace(lines[j]); s != "" && !strings.HasPrefix(s, "#") {
				got++
			}
		}
		if got != want {
			t.Errorf("README.md:%d: %q, but the shell block under it has %d commands", i+1, line, got)
		}
	}
	if headings == 0 {
		t.Error(`README.md has no "## <number> commands" heading`)
	}
}
