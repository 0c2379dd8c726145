package server

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/store"
)

// A page of the job list: search by words in any field, order, offset and limit.
func TestPageQuery(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	jobs := func() []*store.Job {
		return []*store.Job{
			{ID: "a", Name: "mnist-lr1", Status: store.Running, SubmittedAt: t0},
			{ID: "b", Name: "cifar", Status: store.Failed, Message: "rank 1 exited 3", SubmittedAt: t0.Add(time.Minute)},
			{ID: "c", Name: "mnist-lr2", Status: store.Succeeded, SubmittedAt: t0.Add(2 * time.Minute)},
		}
	}
	ids := func(js []*store.Job) (out []string) {
		for _, j := range js {
			out = append(out, j.ID)
		}
		return out
	}
	cases := []struct {
		query         string
		limit         int
		want          []string
		wantMatchesIn int
	}{
		{"q=MNIST+lr2", 0, []string{"c"}, 1},
		{"q=exited", 0, []string{"b"}, 1},
		{"sort=newest", 0, []string{"c", "b", "a"}, 3},
		{"sort=name", 0, []string{"b", "a", "c"}, 3},
		{"sort=status", 0, []string{"b", "a", "c"}, 3},
		{"sort=newest&offset=1", 1, []string{"b"}, 3},
		{"offset=5", 0, nil, 3},
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.query)
		p, err := readPageQuery(q)
		if err != nil || !p.paged() {
			t.Fatalf("%s: %v, paged %v", c.query, err, p.paged())
		}
		matched := p.apply(jobs())
		got := ids(window(matched, p.offset, c.limit))
		if !cmp.Equal(got, c.want) || len(matched) != c.wantMatchesIn {
			t.Errorf("%s limit %d: %v of %d, want %v of %d", c.query, c.limit, got, len(matched), c.want, c.wantMatchesIn)
		}
	}
	for _, bad := range []string{"sort=size", "offset=-1", "offset=x"} {
		q, _ := url.ParseQuery(bad)
		if _, err := readPageQuery(q); err == nil || !strings.Contains(err.Error(), "use") && !strings.Contains(err.Error(), "whole number") {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if p, _ := readPageQuery(url.Values{}); p.paged() {
		t.Error("a plain list is paged")
	}
}
