package store

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// listFixture creates jobs a..g (Seq 1..7) and moves some, so that the status indexes
// interleave: a, d, g Pending; b Stopped; c Running; e Failed; f Succeeded (via Running).
func listFixture(t *testing.T) *Store {
	s := openTemp(t)
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		mustCreate(t, s, testJob(id).obj())
	}
	for id, st := range map[string]Status{"b": Stopped, "c": Running, "e": Failed, "f": Running} {
		if _, err := s.Update(id, setStatus(st)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Update("f", setStatus(Succeeded)); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestList(t *testing.T) {
	cases := map[string]struct {
		filter Filter
		want   []string
	}{
		"all":                  {filter: Filter{}, want: []string{"a", "b", "c", "d", "e", "f", "g"}},
		"pending":              {filter: Filter{Statuses: []Status{Pending}}, want: []string{"a", "d", "g"}},
		"terminal":             {filter: Filter{Statuses: []Status{Succeeded, Failed, Stopped}}, want: []string{"b", "e", "f"}},
		"pending and running":  {filter: Filter{Statuses: []Status{Running, Pending}}, want: []string{"a", "c", "d", "g"}},
		"repeated status":      {filter: Filter{Statuses: []Status{Pending, Pending}}, want: []string{"a", "d", "g"}},
		"running":              {filter: Filter{Statuses: []Status{Running}}, want: []string{"c"}},
		"limit":                {filter: Filter{Limit: 2}, want: []string{"a", "b"}},
		"limit with statuses":  {filter: Filter{Statuses: []Status{Pending, Failed}, Limit: 3}, want: []string{"a", "d", "e"}},
		"limit above count":    {filter: Filter{Statuses: []Status{Pending}, Limit: 10}, want: []string{"a", "d", "g"}},
		"negative limit is no": {filter: Filter{Statuses: []Status{Pending}, Limit: -1}, want: []string{"a", "d", "g"}},
	}
	s := listFixture(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := s.List(tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(got)); diff != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", tc.filter, diff)
			}
		})
	}
}

func TestListEmpty(t *testing.T) {
	s := listFixture(t)
	if err := s.Delete("c"); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(Filter{Statuses: []Status{Running}})
	if err != nil || len(got) != 0 {
		t.Errorf("List(Running) = %v, %v; want no jobs", ids(got), err)
	}
}

func TestListReturnsWholeJobs(t *testing.T) {
	s := listFixture(t)
	got, err := s.List(Filter{Statuses: []Status{Succeeded}})
	if err != nil {
		t.Fatal(err)
	}
	want := []*Job{testJob("f").status(Succeeded).stored(6, 3).obj()}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List(Succeeded) (-want +got):\n%s", diff)
	}
}

func TestListUnknownStatus(t *testing.T) {
	s := openTemp(t)
	if _, err := s.List(Filter{Statuses: []Status{"pending"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("List(pending): %v, want ErrInvalid", err)
	}
}

func TestCounts(t *testing.T) {
	s := listFixture(t)
	got, err := s.Counts()
	if err != nil {
		t.Fatal(err)
	}
	want := map[Status]int{Pending: 3, Running: 1, Stopped: 1, Succeeded: 1, Failed: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Counts (-want +got):\n%s", diff)
	}
	got, err = openTemp(t).Counts()
	if err != nil {
		t.Fatal(err)
	}
	want = map[Status]int{Pending: 0, Running: 0, Stopped: 0, Succeeded: 0, Failed: 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Counts of an empty store (-want +got):\n%s", diff)
	}
}
