package jobs

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trainyard/trainyard/internal/scheduler"
	"github.com/trainyard/trainyard/internal/store"
)

// idle returns a Service that is never run: submitted jobs stay pending.
func idle(t *testing.T, node scheduler.Node) (*Service, *store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "jobs.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := New(Config{Store: st, StateDir: dir, Binary: "/bin/false", Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

// submitNamed submits a job with the ID and name to an idle service.
func submitNamed(t *testing.T, svc *Service, id, name string) error {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	job := e.job("true", "")
	job.Name = name
	_, err := svc.Submit(Submission{ID: id, Job: job})
	return err
}

func TestSubmitRefusesATakenName(t *testing.T) {
	svc, _ := idle(t, scheduler.Node{MilliCPU: 2000})
	if err := submitNamed(t, svc, "first", "mnist"); err != nil {
		t.Fatal(err)
	}
	err := submitNamed(t, svc, "second", "mnist")
	var taken *store.NameTakenError
	if !errors.As(err, &taken) || taken.Name != "mnist" || !cmp.Equal(taken.IDs, []string{"first"}) {
		t.Fatalf("a second job named mnist: %v, want a *store.NameTakenError naming job first", err)
	}
	for _, id := range []string{"third", "fourth"} {
		if err := submitNamed(t, svc, id, ""); err != nil {
			t.Errorf("a job without a name: %v", err)
		}
	}
	if _, err := svc.Stop("first"); err != nil {
		t.Fatal(err)
	}
	if err := submitNamed(t, svc, "fifth", "mnist"); !errors.As(err, &taken) {
		t.Errorf("the name of a stopped job that was not deleted: %v, want refused", err)
	}
	if err := svc.Delete("first"); err != nil {
		t.Fatal(err)
	}
	if err := submitNamed(t, svc, "sixth", "mnist"); err != nil {
		t.Errorf("the name of a deleted job: %v", err)
	}
}

func TestFind(t *testing.T) {
	svc, st := idle(t, scheduler.Node{MilliCPU: 2000})
	for _, j := range []struct{ id, name string }{{"raysubmit_a", "mnist"}, {"bert", "bert-large"}, {"mnist-2", "mnist-2"}, {"other", "bert"}} {
		if err := submitNamed(t, svc, j.id, j.name); err != nil {
			t.Fatal(err)
		}
	}
	// Two jobs of one name, as a server before the rule could hold.
	for _, id := range []string{"old-1", "old-2"} {
		if err := st.Create(&store.Job{ID: id, Name: "sweep", Spec: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		ref     string
		want    string
		wantErr error
		msg     string
	}{
		"an ID":                         {ref: "raysubmit_a", want: "raysubmit_a"},
		"a name":                        {ref: "mnist", want: "raysubmit_a"},
		"an ID before another's name":   {ref: "bert", want: "bert"},
		"a name that is also its ID":    {ref: "mnist-2", want: "mnist-2"},
		"neither":                       {ref: "nope", wantErr: store.ErrNotFound, msg: "no job with id or name 'nope': job not found"},
		"a name of two jobs":            {ref: "sweep", wantErr: ErrAmbiguous, msg: "2 jobs are named 'sweep': old-1, old-2; give the ID of one of them"},
		"a prefix of a name is no name": {ref: "bert-", wantErr: store.ErrNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j, err := svc.Find(tc.ref)
			switch {
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) || (tc.msg != "" && err.Error() != tc.msg) {
					t.Errorf("Find(%q) = %v, want %v: %q", tc.ref, err, tc.wantErr, tc.msg)
				}
			case err != nil:
				t.Errorf("Find(%q): %v", tc.ref, err)
			case j.ID != tc.want:
				t.Errorf("Find(%q) = job %s, want %s", tc.ref, j.ID, tc.want)
			}
		})
	}
}
