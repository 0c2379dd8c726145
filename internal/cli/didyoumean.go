package cli

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// maxFlagDistance is how many edits apart a mistyped flag and a flag of the command may
// be for the flag to be suggested (--worker for --workers, --gpu-per-worker for
// --gpus-per-worker).
const maxFlagDistance = 2

// suggestFlag returns "; did you mean --x?" for an unknown-flag error of c: the flags of
// c (its own and those it inherits, not hidden or deprecated ones) nearest to the one
// given, by edit distance up to maxFlagDistance, or else those it begins; "" for another
// error or when no flag is near. A long name given with one dash (-workers) is looked
// up as --workers.
func suggestFlag(c *cobra.Command, err error) string {
	typed := unknownFlag(err)
	if typed == "" {
		return ""
	}
	var near, prefixed []string
	best := maxFlagDistance
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Deprecated != "" || f.Name == typed {
			return
		}
		switch d := editDistance(typed, f.Name); {
		case d <= maxFlagDistance && d < best:
			best, near = d, []string{f.Name}
		case d <= maxFlagDistance && d == best:
			near = append(near, f.Name)
		case len(typed) > 1 && strings.HasPrefix(f.Name, typed):
			prefixed = append(prefixed, f.Name)
		}
	})
	names := near
	if len(names) == 0 {
		names = prefixed
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	if len(names) > 3 {
		names = names[:3]
	}
	for i, n := range names {
		names[i] = "--" + n
	}
	list := names[len(names)-1]
	if len(names) > 1 {
		list = strings.Join(names[:len(names)-1], ", ") + " or " + list
	}
	return fmt.Sprintf("; did you mean %s?", list)
}

// unknownFlag returns the name, without dashes, of the flag that err (pflag's) says is
// unknown: "worker" for --worker, and for -worker (a long name given with one dash); ""
// for a single unknown letter (-x) or another error.
func unknownFlag(err error) string {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return ""
	}
	if shorthands := ne.GetSpecifiedShortnames(); shorthands != "" {
		word, _, _ := strings.Cut(shorthands, "=")
		if len(word) > 1 {
			return word
		}
		return ""
	}
	return ne.GetSpecifiedName()
}

// editDistance is the Levenshtein distance between a and b: the fewest insertions,
// deletions and substitutions of bytes that turn one into the other.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
