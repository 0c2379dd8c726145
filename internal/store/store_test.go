package store

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

func TestStatusTerminal(t *testing.T) {
	got := map[Status]bool{}
	for _, st := range statuses() {
		got[st] = st.Terminal()
	}
	want := map[Status]bool{Pending: false, Running: false, Stopped: true, Succeeded: true, Failed: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Terminal (-want +got):\n%s", diff)
	}
}

func TestCreateGet(t *testing.T) {
	started := submitted.Add(time.Minute)
	cases := map[string]struct {
		job  *Job
		want *Job
	}{
		"minimal": {
			job:  testJob("a").obj(),
			want: testJob("a").stored(1, 1).obj(),
		},
		"no status is pending": {
			job:  testJob("a").status("").obj(),
			want: testJob("a").stored(1, 1).obj(),
		},
		"spec and runtime env kept byte for byte": {
			job: func() *Job {
				j := testJob("a").obj()
				j.Spec, j.RuntimeEnv = json.RawMessage("{ \"b\": 1,\n  \"a\": [] }"), json.RawMessage(" null")
				return j
			}(),
			want: func() *Job {
				j := testJob("a").stored(1, 1).obj()
				j.Spec, j.RuntimeEnv = json.RawMessage("{ \"b\": 1,\n  \"a\": [] }"), json.RawMessage(" null")
				return j
			}(),
		},
		"every field": {
			job: &Job{
				ID: "raysubmit_1", Name: "bert", Status: Running, Message: "placed",
				Priority: 7, Entrypoint: "python train.py", Spec: json.RawMessage(testSpec),
				Metadata:   map[string]string{"owner": "ana"},
				RuntimeEnv: json.RawMessage(`{"env_vars":{"A":"1"}}`),
				GPUs:       [][]int{{0, 1}, {2, 3}}, RunDir: "/data/runs/bert",
				SupervisorPID: 4242, StopRequested: true,
				SubmittedAt: submitted, StartedAt: &started,
				Seq: 99, Version: 99, // assigned by Create, whatever the caller says
			},
			want: &Job{
				ID: "raysubmit_1", Name: "bert", Status: Running, Message: "placed",
				Priority: 7, Entrypoint: "python train.py", Spec: json.RawMessage(testSpec),
				Metadata:   map[string]string{"owner": "ana"},
				RuntimeEnv: json.RawMessage(`{"env_vars":{"A":"1"}}`),
				GPUs:       [][]int{{0, 1}, {2, 3}}, RunDir: "/data/runs/bert",
				SupervisorPID: 4242, StopRequested: true,
				SubmittedAt: submitted, StartedAt: &started,
				Seq: 1, Version: 1,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, tc.job)
			if diff := cmp.Diff(tc.want, tc.job); diff != "" {
				t.Errorf("job after Create (-want +got):\n%s", diff)
			}
			got, err := s.Get(tc.want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreateRefuses(t *testing.T) {
	cases := map[string]struct {
		job  *Job
		want error
	}{
		"existing ID":    {job: testJob("a").status(Running).obj(), want: ErrExists},
		"no ID":          {job: testJob("").obj(), want: ErrInvalid},
		"unknown status": {job: testJob("b").status("pending").obj(), want: ErrInvalid},
		"no spec":        {job: &Job{ID: "b"}, want: ErrInvalid},
		"spec not JSON":  {job: &Job{ID: "b", Spec: json.RawMessage("{")}, want: ErrInvalid},
		"env not JSON":   {job: &Job{ID: "b", Spec: json.RawMessage("{}"), RuntimeEnv: json.RawMessage("x")}, want: ErrInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, testJob("a").obj())
			before := *tc.job
			err := s.Create(tc.job)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Create: %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(&before, tc.job); diff != "" {
				t.Errorf("failed Create changed the job (-want +got):\n%s", diff)
			}
			all, err := s.List(Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"a"}, ids(all)); diff != "" {
				t.Errorf("jobs after failed Create (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	cases := map[string]func(*Store) error{
		"Get":    func(s *Store) error { _, err := s.Get("nope"); return err },
		"Update": func(s *Store) error { _, err := s.Update("nope", setStatus(Running)); return err },
		"Delete": func(s *Store) error { return s.Delete("nope") },
	}
	for name, op := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, testJob("a").obj())
			err := op(s)
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: %v, want ErrNotFound", name, err)
			}
			if !strings.Contains(err.Error(), `"nope"`) {
				t.Errorf("error %q does not name the job", err)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	ended := submitted.Add(time.Hour)
	cases := map[string]struct {
		change func(*Job) error
		want   *Job
	}{
		"status": {
			change: setStatus(Running),
			want:   testJob("a").status(Running).stored(1, 2).obj(),
		},
		"several fields": {
			change: func(j *Job) error {
				j.Status, j.Message, j.EndedAt = Failed, "rank 3 exited with 1", &ended
				j.GPUs = [][]int{{0}}
				return nil
			},
			want: func() *Job {
				j := testJob("a").status(Failed).stored(1, 2).obj()
				j.Message, j.EndedAt, j.GPUs = "rank 3 exited with 1", &ended, [][]int{{0}}
				return j
			}(),
		},
		"version set by the change is ignored": {
			change: func(j *Job) error { j.Version = 40; return nil },
			want:   testJob("a").stored(1, 2).obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, testJob("a").obj())
			got, err := s.Update("a", tc.change)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Update (-want +got):\n%s", diff)
			}
			stored, err := s.Get("a")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, stored); diff != "" {
				t.Errorf("Get after Update (-want +got):\n%s", diff)
			}
			checkIndex(t, s)
		})
	}
}

func TestUpdateAbortLeavesJob(t *testing.T) {
	errNo := errors.New("not now")
	cases := map[string]struct {
		change func(*Job) error
		want   error
	}{
		"change fails": {
			change: func(j *Job) error { j.Status, j.Message = Running, "half done"; return errNo },
			want:   errNo,
		},
		"change alters ID": {
			change: func(j *Job) error { j.ID = "b"; return nil },
			want:   ErrInvalid,
		},
		"change alters Seq": {
			change: func(j *Job) error { j.Seq = 7; return nil },
			want:   ErrInvalid,
		},
		"unknown status": {
			change: setStatus("DONE"),
			want:   ErrInvalid,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			mustCreate(t, s, testJob("a").obj())
			if _, err := s.Update("a", tc.change); !errors.Is(err, tc.want) {
				t.Fatalf("Update: %v, want %v", err, tc.want)
			}
			got, err := s.Get("a")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(testJob("a").stored(1, 1).obj(), got); diff != "" {
				t.Errorf("job after aborted Update (-want +got):\n%s", diff)
			}
			checkIndex(t, s)
		})
	}
}

func TestVersionIncrements(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, testJob("a").obj())
	var got []uint64
	for range 4 {
		j, err := s.Update("a", func(j *Job) error { j.Priority++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, j.Version)
	}
	if diff := cmp.Diff([]uint64{2, 3, 4, 5}, got); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
}

func TestDelete(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, testJob("a").obj(), testJob("b").status(Running).obj())
	if err := s.Delete("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	checkIndex(t, s)
	c := testJob("c").obj()
	mustCreate(t, s, c)
	if c.Seq != 3 {
		t.Errorf("Seq after a delete = %d, want 3 (never reused)", c.Seq)
	}
	b := testJob("b").obj()
	mustCreate(t, s, b) // a deleted ID can be submitted again
	if b.Seq != 4 {
		t.Errorf("Seq of re-created job = %d, want 4", b.Seq)
	}
}

func TestSeqSurvivesReopen(t *testing.T) {
	s := openTemp(t)
	mustCreate(t, s, testJob("a").obj(), testJob("b").obj(), testJob("c").obj())
	if err := s.Delete("c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update("b", setStatus(Succeeded)); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s)
	d := testJob("d").obj()
	mustCreate(t, s, d)
	got, err := s.List(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []*Job{
		testJob("a").stored(1, 1).obj(),
		testJob("b").status(Succeeded).stored(2, 2).obj(),
		testJob("d").stored(4, 1).obj(),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs after reopen (-want +got):\n%s", diff)
	}
}

func TestOpenLocked(t *testing.T) {
	first := openTemp(t)
	start := time.Now()
	second, err := Open(first.Path(), Options{Timeout: 100 * time.Millisecond})
	if err == nil {
		second.Close()
		t.Fatal("second Open of an open state file succeeded")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if msg := err.Error(); !strings.Contains(msg, first.Path()) ||
		!strings.HasSuffix(msg, ": another trainyard server uses this state file") {
		t.Errorf("error %q should name the file and say another server uses it", msg)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Errorf("second Open waited %s with a 100ms timeout", waited)
	}
	t.Logf("second Open: %v", err)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	openAt(t, first.Path()) // released by Close
}

func TestOpenCreatesFileAndFolders(t *testing.T) {
	s := openTemp(t)
	for path, want := range map[string]os.FileMode{s.Path(): 0o600, filepath.Dir(s.Path()): 0o700 | os.ModeDir} {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode(); got != want {
			t.Errorf("%s: mode %s, want %s", path, got, want)
		}
	}
}

func TestOpenRefusesOtherFiles(t *testing.T) {
	cases := map[string]struct {
		write func(path string) error
		want  string
	}{
		"text file": {
			write: func(path string) error {
				return os.WriteFile(path, []byte(strings.Repeat("not a database\n", 1000)), 0o600)
			},
			want: "invalid database",
		},
		"other layout version": {
			write: func(path string) error { return writeSchema(path, "2") },
			want:  `layout version "2", this trainyard reads "1"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if err := tc.write(path); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, tc.want) {
				t.Errorf("Open: %q, want the path and %q", msg, tc.want)
			}
		})
	}
}

// writeSchema makes a bbolt file whose meta bucket names another layout version.
func writeSchema(path, version string) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keySchema, []byte(version))
	})
	return errors.Join(err, db.Close())
}
