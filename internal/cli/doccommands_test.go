package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every trainyard command in the shell blocks of README.md and docs/*.md parses: its
// subcommand exists and takes the flags it is given (run with --help, which parses the
// flags and prints the help without doing anything). A doc that drifts from the CLI fails
// here.
func TestDocCommandsParse(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	docs = append(docs, "../../README.md")
	n := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range shellCommands(string(data)) {
			args, ok := trainyardArgs(line)
			if !ok {
				continue
			}
			n++
			var out, errOut bytes.Buffer
			argv := withHelp(NewRoot(IO{}), args)
			if code := Main(context.Background(), argv, IO{In: strings.NewReader(""), Out: &out, Err: &errOut}); code != 0 {
				t.Errorf("%s: `trainyard %s` does not parse (exit %d): %s", filepath.Base(doc), strings.Join(args, " "), code,
					strings.TrimSpace(errOut.String()))
			}
		}
	}
	if n < 20 {
		t.Fatalf("found %d trainyard commands in the docs; the extraction is broken", n)
	}
}

// withHelp puts --help right after the subcommand that args name, such as "submit --kube ...":
// "submit --help --kube ...".
func withHelp(root *cobra.Command, args []string) []string {
	cmd, i := root, 0
	for ; i < len(args); i++ {
		next := subcommand(cmd, args[i])
		if next == nil {
			break
		}
		cmd = next
	}
	return append(append(append([]string{}, args[:i]...), "--help"), args[i:]...)
}

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

var (
	fence         = regexp.MustCompile("(?s)```(?:sh|bash|shell|console)\n(.*?)```")
	shellOperator = regexp.MustCompile(`\s*;\s|\s(?:&&|\|\||\|)\s`) // ; && || |
	assignment    = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)        // VAR=value before a command
)

// shellCommands returns the commands of the docs' shell blocks: continuation lines joined,
// comments dropped, split at ; && || and |.
func shellCommands(doc string) []string {
	var cmds []string
	for _, m := range fence.FindAllStringSubmatch(doc, -1) {
		block := strings.ReplaceAll(m[1], "\\\n", " ")
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimPrefix(strings.TrimSpace(line), "$ ")
			line = stripComment(line)
			for _, part := range shellOperator.Split(line, -1) {
				cmds = append(cmds, strings.TrimSpace(part))
			}
		}
	}
	return cmds
}

// stripComment drops a # comment (a # at the start or after a space, outside quotes).
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' '):
			return strings.TrimSpace(line[:i])
		}
	}
	return line
}

// trainyardArgs splits a command into words (quotes respected) and returns the arguments
// after "trainyard" (leading VAR=value assignments skipped), up to a "--" or a shell
// operator; ok is false for a command that is not trainyard's.
func trainyardArgs(cmd string) ([]string, bool) {
	words := splitWords(cmd)
	for len(words) > 0 && assignment.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 || (words[0] != "trainyard" && words[0] != "./bin/trainyard" && words[0] != "bin/trainyard") {
		return nil, false
	}
	var args []string
	for _, w := range words[1:] {
		if w == "--" || w == "&" || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") {
			break
		}
		if w = strings.Trim(w, "[]"); w != "" { // [--rank 1]: optional, as the docs write it
			args = append(args, w)
		}
	}
	return args, true
}

// splitWords splits s at spaces outside single and double quotes, dropping the quotes.
func splitWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
