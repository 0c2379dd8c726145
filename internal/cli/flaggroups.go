package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// groupAnnotation marks a flag with the heading of its group in --help.
const groupAnnotation = "trainyard_help_group"

// flagGroup is a heading of --help and the flags listed under it.
type flagGroup struct {
	heading string
	flags   []string
}

// groupFlags lists a command's flags in --help under the headings of groups, in their
// order, after the flags of no group (the common ones, under "Flags:").
func groupFlags(cmd *cobra.Command, groups ...flagGroup) {
	for i, g := range groups {
		for _, name := range g.flags {
			f := cmd.Flags().Lookup(name)
			if f == nil {
				panic("groupFlags: no flag --" + name) // a programming error, caught by every test of --help
			}
			f.Annotations = map[string][]string{groupAnnotation: {fmt.Sprintf("%02d", i) + g.heading}}
		}
	}
}

// flagUsages writes the flags of fs for --help, wrapped to helpWidth: the flags of no
// group first, then each group under its heading (see groupFlags).
func flagUsages(fs *pflag.FlagSet) string {
	groups := map[string]*pflag.FlagSet{"": pflag.NewFlagSet("", pflag.ContinueOnError)}
	fs.VisitAll(func(f *pflag.Flag) {
		g := ""
		if v := f.Annotations[groupAnnotation]; len(v) == 1 {
			g = v[0]
		}
		if groups[g] == nil {
			groups[g] = pflag.NewFlagSet(g, pflag.ContinueOnError)
		}
		groups[g].AddFlag(f)
	})
	var b strings.Builder
	b.WriteString(groups[""].FlagUsagesWrapped(helpWidth))
	keys := make([]string, 0, len(groups))
	for k := range groups {
		if k != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // the numbers in front keep groupFlags' order
	for _, k := range keys {
		b.WriteString("\n" + k[2:] + ":\n")
		b.WriteString(groups[k].FlagUsagesWrapped(helpWidth))
	}
	return b.String()
}
