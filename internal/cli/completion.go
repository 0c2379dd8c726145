package cli

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/rundir"
)

// completionTimeout bounds how long completing a job name waits for the server.
const completionTimeout = 2 * time.Second

// flagValues are the values the shells' completion offers for flags of these names (for
// -o/--output, those of the words here that its help names).
var flagValues = map[string][]string{
	"log-level":         {"debug", "info", "warn", "error"},
	"output":            {"json", "yaml", "wide"},
	"image-pull-policy": {"Always", "IfNotPresent", "Never"},
	"pod-policy":        {"restricted", "off"},
	"dry-run":           {"client", "server"},
}

// addCompletions teaches 'trainyard completion bash|zsh|fish' what to offer beyond the
// commands and flags: the values of the flags in flagValues, and for a command's first
// argument the run names under its --storage-path (its use names RUN) and the server's
// job names and IDs (its use names ID, NAME or JOB). Completion never prints errors: an
// unreachable server offers nothing.
func addCompletions(cmd *cobra.Command) {
	for name, values := range flagValues {
		f := cmd.Flags().Lookup(name)
		if f == nil {
			f = cmd.PersistentFlags().Lookup(name)
		}
		if f == nil {
			continue
		}
		offered := slices.DeleteFunc(slices.Clone(values), func(v string) bool {
			return name == "output" && !strings.Contains(f.Usage, v)
		})
		_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(offered, cobra.ShellCompDirectiveNoFileComp))
	}
	if cmd.ValidArgsFunction == nil && cmd.Runnable() {
		words := strings.Fields(cmd.Use)
		if len(words) > 1 {
			cmd.ValidArgsFunction = completeArg(words[1])
		}
	}
	for _, c := range cmd.Commands() {
		addCompletions(c)
	}
}

// completeArg returns the completion of a first argument named arg in a command's use.
func completeArg(arg string) cobra.CompletionFunc {
	runs, jobs := strings.Contains(arg, "RUN"), strings.Contains(arg, "ID") || strings.Contains(arg, "NAME") || strings.Contains(arg, "JOB")
	if !runs && !jobs {
		return nil
	}
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		if runs {
			out = append(out, runNames(cmd)...)
		}
		if jobs && cmd.Flags().Lookup("address") != nil {
			out = append(out, jobNames(cmd)...)
		}
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}

// runNames lists the runs under the command's --storage-path: the folders with a run.json.
func runNames(cmd *cobra.Command) []string {
	f := cmd.Flags().Lookup("storage-path")
	if f == nil {
		return nil
	}
	dir, err := expandHome(f.Value.String())
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if _, err := os.Lstat(filepath.Join(dir, e.Name(), rundir.RecordFile)); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	return names
}

// jobNames lists the names and IDs of the jobs of the server the command's flags name.
func jobNames(cmd *cobra.Command) []string {
	flag := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	remote := remoteOptions{address: flag("address"), tokenFile: flag("token-file"), caCert: flag("ca-cert")}
	c, err := remote.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	jobs, err := c.List(ctx)
	if err != nil {
		return nil
	}
	var names []string
	for _, j := range jobs {
		names = append(names, j.ID)
		if j.Name != "" {
			names = append(names, j.Name)
		}
	}
	return names
}
