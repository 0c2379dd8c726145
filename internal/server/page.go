package server

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/trainyard/trainyard/internal/store"
)

// pageQuery is the part of GET /api/v1/jobs's query that pages a long list.
type pageQuery struct {
	words  []string // every one must be in the job's text, lower case
	sort   string   // "", "newest", "name" or "status"
	offset int
	page   bool // ?offset= was given, even 0
}

// readPageQuery reads ?q=, ?sort= and ?offset=.
func readPageQuery(q url.Values) (pageQuery, error) {
	p := pageQuery{words: strings.Fields(strings.ToLower(q.Get("q"))), sort: q.Get("sort")}
	if !slices.Contains([]string{"", "newest", "name", "status"}, p.sort) {
		return p, invalid("sort %q: use newest, name or status (none: submit order)", truncate(p.sort, 64))
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return p, invalid("offset %q: must be a whole number, 0 or more", truncate(v, 64))
		}
		p.offset, p.page = n, true
	}
	return p, nil
}

// paged reports whether the query asks for more than a status filter and a limit.
func (p pageQuery) paged() bool { return len(p.words) > 0 || p.sort != "" || p.page }

// apply keeps the jobs that match the words, in the asked order.
func (p pageQuery) apply(jobs []*store.Job) []*store.Job {
	if len(p.words) > 0 {
		jobs = slices.DeleteFunc(jobs, func(j *store.Job) bool {
			text := strings.ToLower(strings.Join([]string{j.ID, j.Name, j.Entrypoint, j.Message, string(j.Status)}, " "))
			return slices.ContainsFunc(p.words, func(w string) bool { return !strings.Contains(text, w) })
		})
	}
	switch p.sort {
	case "newest":
		slices.Reverse(jobs)
	case "name":
		slices.SortStableFunc(jobs, func(a, b *store.Job) int { return cmp.Compare(a.Name, b.Name) })
	case "status":
		slices.Reverse(jobs)
		slices.SortStableFunc(jobs, func(a, b *store.Job) int { return cmp.Compare(a.Status, b.Status) })
	}
	return jobs
}

// window returns jobs[offset:offset+limit], clamped; limit 0 or less is no limit.
func window(jobs []*store.Job, offset, limit int) []*store.Job {
	jobs = jobs[min(offset, len(jobs)):]
	if limit > 0 && len(jobs) > limit {
		jobs = jobs[:limit]
	}
	return jobs
}
