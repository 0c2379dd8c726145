package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/gitsource"
	"github.com/trainyard/trainyard/internal/podworker"
	"github.com/trainyard/trainyard/internal/workload"
)

func newCopySelfCommand(g *globals) *cobra.Command {
	var src gitsource.Source
	var dest string
	cmd := &cobra.Command{
		Use:   "copy-self DIR",
		Short: "Copy this trainyard binary to DIR/trainyard (the operator's init container)",
		Long: `Copy the running trainyard binary to DIR/trainyard, mode 0755, atomically.

The operator's init container runs it (trainyard copy-self ` + workload.BinDir + `) to put the
static binary into an emptyDir the worker container starts from: the operator's image has
no shell and no cp.

With --git-url it then clones the job's code into --git-dest, at --git-rev (or the tip of
--git-branch), with the credentials in ` + gitsource.EnvUsername + ` and ` + gitsource.EnvPassword + `,
and leaves "` + workload.CommitPrefix + `<sha>" in ` + workload.TerminationLog + ` for the operator.`,
		Args:   cobra.ExactArgs(1),
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := podworker.CopySelf(args[0])
			if err != nil {
				return &exitError{code: ExitFailed, err: err}
			}
			fmt.Fprintf(g.io.Out, "trainyard: copied to %s\n", path)
			if src.URL == "" {
				return nil
			}
			return cloneSource(cmd.Context(), g, src.FromEnv(os.Environ()), dest)
		},
	}
	cmd.Flags().StringVar(&src.URL, "git-url", "", "clone this repository")
	cmd.Flags().StringVar(&src.Branch, "git-branch", "", "its branch (default: its default branch)")
	cmd.Flags().StringVar(&src.Revision, "git-rev", "", "the commit to check out (default: the branch's tip)")
	cmd.Flags().StringVar(&dest, "git-dest", "", "the folder to clone into")
	return cmd
}

// cloneSource clones the job's code and says which commit it checked out, in the pod's log
// and its termination message. A source no retry can fix (an unknown branch, refused
// credentials) exits with ExitUsage, as a worker refusing its input does.
func cloneSource(ctx context.Context, g *globals, src gitsource.Source, dest string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	commit, err := gitsource.Fetch(ctx, src, dest)
	if err != nil {
		_ = os.WriteFile(workload.TerminationLog, []byte(err.Error()), 0o644)
		return &exitError{code: ExitUsage, err: err}
	}
	_ = os.WriteFile(workload.TerminationLog, []byte(workload.CommitPrefix+commit), 0o644)
	fmt.Fprintf(g.io.Out, "trainyard: cloned %s at commit %s into %s\n", src.URL, commit, dest)
	return nil
}
