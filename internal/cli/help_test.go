package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// doubledDefault is a flag whose description states its default and pflag states it
// again: "(default: 1) (default 1)".
var doubledDefault = regexp.MustCompile(`\(default[^)]*\).*\(default `)

// Every command's help fits in helpWidth columns and states each default once.
func TestHelpTexts(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk(NewRoot(IO{}), nil)
	for _, path := range paths {
		name := strings.Join(append([]string{"trainyard"}, path...), " ")
		t.Run(name, func(t *testing.T) {
			code, out, errOut := trainyard(append(path, "--help")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, line := range strings.Split(out, "\n") {
				if len(line) > helpWidth {
					t.Errorf("a line of %d columns, more than %d:\n%s", len(line), helpWidth, line)
				}
				if doubledDefault.MatchString(line) {
					t.Errorf("a default said twice:\n%s", line)
				}
			}
		})
	}
}
