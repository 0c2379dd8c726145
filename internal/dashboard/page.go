package dashboard

import (
	"cmp"
	"slices"
	"strings"

	"github.com/trainyard/trainyard/client"
)

// PageOf returns a page of jobs as the server's API pages its list (client.ListOptions:
// statuses, words to search in the ID, name, entrypoint, message and status, an order,
// offset and limit), for backends that hold their jobs in memory.
func PageOf(jobs []client.Job, opts client.ListOptions) client.JobList {
	words := strings.Fields(strings.ToLower(opts.Search))
	jobs = slices.DeleteFunc(slices.Clone(jobs), func(j client.Job) bool {
		if len(opts.Statuses) > 0 && !slices.Contains(opts.Statuses, j.Status) {
			return true
		}
		text := strings.ToLower(strings.Join([]string{j.ID, j.Name, j.Entrypoint, j.Message, string(j.Status)}, " "))
		return slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(text, w) })
	})
	slices.SortStableFunc(jobs, func(a, b client.Job) int {
		switch opts.Sort {
		case "name":
			return cmp.Compare(a.Name, b.Name)
		case "status":
			return cmp.Or(cmp.Compare(a.Status, b.Status), b.SubmittedAt.Compare(a.SubmittedAt))
		case "newest":
			return b.SubmittedAt.Compare(a.SubmittedAt)
		}
		return a.SubmittedAt.Compare(b.SubmittedAt)
	})
	out := client.JobList{Total: len(jobs)}
	jobs = jobs[min(opts.Offset, len(jobs)):]
	if opts.Limit > 0 && len(jobs) > opts.Limit {
		jobs = jobs[:opts.Limit]
	}
	out.Jobs = jobs
	return out
}
