package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/jobs"
	"github.com/trainyard/trainyard/internal/store"
)

// get, logs, stop and delete take a job's name as well as its ID; a second job of a name
// is refused; logs of a pending job says it has not started, and why.
func TestCommandsByName(t *testing.T) {
	addr, st := startAPIStore(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)

	code, out, _ := trainyard("submit", "--no-wait", "--name", "mnist", "--", "true")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("submit --name mnist: exit %d, %q", code, out)
	}
	code, _, errOut := trainyard("submit", "--no-wait", "--name", "mnist", "--", "true")
	want := "trainyard: a job named 'mnist' exists already (" + id + "): names are unique among the server's jobs until a job is deleted; " +
		"choose another name, or delete that job first\n"
	if code != 1 || errOut != want {
		t.Errorf("a second job named mnist: exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
	if code, out, _ := trainyard("get", "mnist"); code != 0 || !strings.Contains(out, id) {
		t.Errorf("get mnist: exit %d:\n%s", code, out)
	}

	code, out, errOut = trainyard("logs", "mnist")
	want = "trainyard: job " + id + " has not started: it is waiting for the scheduler to place it ('trainyard logs -f mnist' prints its log once it starts)\n"
	if code != 0 || out != "" || errOut != want {
		t.Errorf("logs of a job not placed yet: exit %d, stdout %q, stderr %q; want exit 0, nothing and %q", code, out, errOut, want)
	}
	setPending(t, st, id, "needs 2 GPUs, 1 free")
	for _, args := range [][]string{{"logs", "mnist"}, {"logs", "--rank", "1", "mnist"}} {
		code, out, errOut = trainyard(args...)
		want = "trainyard: job " + id + " has not started: it is waiting: needs 2 GPUs, 1 free ('trainyard logs -f mnist' prints its log once it starts)\n"
		if code != 0 || out != "" || errOut != want {
			t.Errorf("%v of a waiting job: exit %d, stdout %q, stderr %q; want exit 0, nothing and %q", args, code, out, errOut, want)
		}
	}

	if code, out, _ := trainyard("stop", "mnist"); code != 0 || out != "Job "+id+" stopped.\n" {
		t.Errorf("stop mnist: exit %d, %q", code, out)
	}
	if code, out, _ := trainyard("delete", "mnist"); code != 0 || out != "Job mnist deleted.\n" {
		t.Errorf("delete mnist: exit %d, %q", code, out)
	}
	code, _, errOut = trainyard("get", "mnist")
	if want := "trainyard: no job with id or name 'mnist' (trainyard list shows the jobs)\n"; code != 1 || errOut != want {
		t.Errorf("get of a deleted name: exit %d, %q; want exit 1 and %q", code, errOut, want)
	}

	// Two jobs of one name, as a server before names were unique may hold.
	for _, old := range []string{"old-1", "old-2"} {
		if err := st.Create(&store.Job{ID: old, Name: "sweep", Status: store.Succeeded, Spec: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cmd := range []string{"get", "logs", "stop", "delete"} {
		code, _, errOut = trainyard(cmd, "sweep")
		if want := "trainyard: 2 jobs are named 'sweep': old-1, old-2; give the ID of one of them\n"; code != 1 || errOut != want {
			t.Errorf("%s sweep: exit %d, %q; want exit 1 and %q", cmd, code, errOut, want)
		}
	}
}

// setPending gives a pending job the scheduler's reason to wait.
func setPending(t *testing.T, st *store.Store, id, reason string) {
	t.Helper()
	if _, err := st.Update(id, func(j *store.Job) error { j.Message = reason; return nil }); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer that a command writes while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// bgCommand is a trainyard command line running in the background.
type bgCommand struct {
	out, err syncBuffer
	code     chan int
}

// startCommand runs trainyard with args in the background.
func startCommand(args ...string) *bgCommand {
	c := &bgCommand{code: make(chan int, 1)}
	go func() {
		c.code <- Main(context.Background(), args, IO{In: strings.NewReader(""), Out: &c.out, Err: &c.err})
	}()
	return c
}

// waitStderr waits until the command's stderr holds text.
func (c *bgCommand) waitStderr(t *testing.T, text string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.err.String(), text); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr %q, want it to hold %q", c.err.String(), text)
		}
	}
}

// wait returns the command's exit code.
func (c *bgCommand) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-c.code:
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not end; stderr %q", c.err.String())
		return 0
	}
}

// submit and logs -f of a job that waits say why it waits, then print its log once it
// starts, until it ends.
func TestSubmitAndFollowSayWhyAJobWaits(t *testing.T) {
	addr, st := startAPIStore(t)
	t.Setenv("TRAINYARD_ADDRESS", addr)
	t.Setenv("TRAINYARD_TOKEN", testToken)

	submit := startCommand("submit", "--name", "big", "--", "true")
	var j *store.Job
	for deadline := time.Now().Add(30 * time.Second); j == nil; time.Sleep(10 * time.Millisecond) {
		if named, err := st.ByName("big"); err == nil && len(named) == 1 {
			j = named[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job was not submitted; stderr %q", submit.err.String())
		}
	}
	setPending(t, st, j.ID, "needs 2 GPUs, 1 free")
	waiting := "trainyard: job " + j.ID + " is waiting: needs 2 GPUs, 1 free\n"
	submit.waitStderr(t, waiting)
	follow := startCommand("logs", "-f", "big")
	follow.waitStderr(t, waiting)
	setPending(t, st, j.ID, "waiting behind job llama (priority 5, submitted earlier)")
	behind := "trainyard: job " + j.ID + " is waiting behind job llama (priority 5, submitted earlier)\n"
	submit.waitStderr(t, behind)
	follow.waitStderr(t, behind)

	// The scheduler starts the job, which prints a line and succeeds.
	if err := os.MkdirAll(j.RunDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(j.RunDir, jobs.ConsoleLog), []byte("[rank 0] hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	setJobStatus(t, st, j.ID, store.Running)
	started := "trainyard: job " + j.ID + " started\n"
	submit.waitStderr(t, started)
	follow.waitStderr(t, started)
	setJobStatus(t, st, j.ID, store.Succeeded)

	for name, c := range map[string]*bgCommand{"submit": submit, "logs -f": follow} {
		if code, out := c.wait(t), c.out.String(); code != 0 || out != "[rank 0] hello\n" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 0 and the job's log", name, code, out, c.err.String())
		}
		if got := strings.Count(c.err.String(), waiting); got != 1 {
			t.Errorf("%s said %d times that the job needs GPUs; want once:\n%s", name, got, c.err.String())
		}
	}
}

// setJobStatus sets a job's status, as the scheduler and the job's supervisor do.
func setJobStatus(t *testing.T, st *store.Store, id string, status store.Status) {
	t.Helper()
	now := time.Now()
	_, err := st.Update(id, func(j *store.Job) error {
		j.Status = status
		switch status {
		case store.Running:
			j.Message, j.StartedAt = "", &now
		case store.Succeeded:
			j.Message, j.EndedAt = "all 1 ranks exited 0", &now
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
