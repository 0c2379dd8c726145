package jobspec

import (
	"fmt"

	"github.com/spf13/pflag"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/gitsource"
)

// SyncFlags are Arena's flags that fetch the job's code: --sync-mode git --sync-source URL,
// and the branch or commit to check out.
type SyncFlags struct {
	Mode, Source, Branch, Revision string
}

func (f *SyncFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.Mode, "sync-mode", "", "how to fetch the code, as Arena's --sync-mode: git (the only mode; implied by --sync-source)")
	fs.StringVar(&f.Source, "sync-source", "", "clone this git repository (https://, http:// or file://) into code/<repo> of the\n"+
		"working folder (locally: of the run folder, where the workers then start); credentials from\n"+
		gitsource.EnvUsername+" and "+gitsource.EnvPassword)
	fs.StringVar(&f.Branch, "sync-branch", "", "with --sync-source: the branch to clone (default: the repository's default branch)")
	fs.StringVar(&f.Revision, "sync-rev", "", "with --sync-source: the commit to check out, a full SHA (default: the branch's tip when submitted)")
}

// apply sets spec.source.git from the flags; a job file's source stays when no flag is given.
func (f *SyncFlags) apply(s *v1.TrainJobSpec) error {
	switch f.Mode {
	case "", "git":
	case "rsync", "hdfs":
		return fmt.Errorf("--sync-mode %s: Trainyard fetches code with git only; push the code to a repository and give "+
			"--sync-mode git --sync-source URL, or put it on a volume (--data)", f.Mode)
	default:
		return fmt.Errorf("--sync-mode %q: the only mode is git", f.Mode)
	}
	if f.Source == "" {
		switch {
		case f.Mode == "git" && (s.Source == nil || s.Source.Git == nil):
			return fmt.Errorf("--sync-mode git needs --sync-source URL, the repository to clone")
		case (f.Branch != "" || f.Revision != "") && (s.Source == nil || s.Source.Git == nil):
			return fmt.Errorf("--sync-branch and --sync-rev need --sync-source URL, the repository to clone")
		}
	}
	if f.Source == "" && f.Branch == "" && f.Revision == "" {
		return nil
	}
	if s.Source == nil {
		s.Source = &v1.SourceSpec{}
	}
	if f.Source != "" {
		s.Source.Git = &v1.GitSource{URL: f.Source}
	}
	if f.Branch != "" {
		s.Source.Git.Branch, s.Source.Git.Revision = f.Branch, ""
	}
	if f.Revision != "" {
		s.Source.Git.Revision = f.Revision
	}
	return nil
}

// GitSource returns the job's git source for gitsource, or false when it has none.
// Credentials are not part of the spec; add them with Source.FromEnv.
func GitSource(s *v1.TrainJobSpec) (gitsource.Source, bool) {
	if s.Source == nil || s.Source.Git == nil {
		return gitsource.Source{}, false
	}
	g := s.Source.Git
	return gitsource.Source{URL: g.URL, Branch: g.Branch, Revision: g.Revision}, true
}

// CodeDir is where the git source is cloned below the workers' working folder:
// code/<repository name>, as Arena's git-sync.
func CodeDir(workingDir, url string) string {
	return workingDir + "/code/" + gitsource.RepoName(url)
}
