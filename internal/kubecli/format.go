package kubecli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/units"
	"github.com/trainyard/trainyard/internal/workload"
)

// View is where a command writes its tables, and the time ages are measured from.
type View struct {
	Out io.Writer
	Now time.Time
	// Wide shows every column and does not shorten messages (-o wide).
	Wide bool
	// Loc is the time zone of clock times; nil is local time.
	Loc *time.Location
}

// table returns a tabwriter with kubectl's spacing.
func (v View) table() *tabwriter.Writer {
	return tabwriter.NewWriter(v.Out, 0, 8, 2, ' ', 0)
}

// age writes how long ago t was, as kubectl does (45s, 3m20s, 5h, 3d4h); "-" for no time.
func (v View) age(t metav1.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(v.Now.Sub(t.Time))
}

// clock writes a time as a date and time of day, with how long ago it was.
func (v View) clock(t *metav1.Time) string {
	loc := v.Loc
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).Format("2006-01-02 15:04:05") + " (" + v.age(*t) + " ago)"
}

// phase is a job's phase, or "-" before the operator has seen it.
func phase(j *v1.TrainJob) string {
	return orDash(string(j.Status.Phase))
}

// orDash returns s, or "-" when it is empty, so that a table cell is never blank.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cell makes s fit in a table cell: one line, tabs as spaces.
func cell(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

// shorten cuts s to n characters, marking the cut with "...".
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-3]) + "..."
}

// metricsText writes metrics as name=value pairs sorted by name.
func metricsText(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, name+"="+m[name])
	}
	return strings.Join(parts, " ")
}

// procsPerWorker is the job's processes per worker, defaulted as jobspec does: the
// worker's GPUs, or 1.
func procsPerWorker(s *v1.TrainJobSpec) int {
	if s.ProcsPerWorker != nil {
		return int(*s.ProcsPerWorker)
	}
	return max(1, int(s.Resources.GPU))
}

// partly says how many workers an elastic gang runs with when Kueue admitted fewer than
// its most; "" otherwise.
func partly(j *v1.TrainJob) string {
	n := j.GangSize()
	switch {
	case n >= j.Spec.WorkerCount():
	case len(j.Status.DroppedWorkers) > 0:
		return fmt.Sprintf(" (elastic: running with %d in place, without worker(s) %s: resized, see the events)", n,
			strings.Trim(strings.Join(strings.Fields(fmt.Sprint(j.Status.DroppedWorkers)), ", "), "[]"))
	case (j.Spec.Kubernetes != nil && j.Spec.Kubernetes.QueueName != "") || j.Labels[workload.LabelQueue] != "":
		return fmt.Sprintf(" (elastic: running with %d, as Kueue admitted)", n)
	default:
		return fmt.Sprintf(" (elastic: running with %d: resized, see the events)", n)
	}
	return ""
}

// gangShape describes the workers: how many (MIN:MAX for an elastic gang), with how many
// processes and GPUs each.
func gangShape(s *v1.TrainJobSpec) string {
	procs := procsPerWorker(s)
	count := strconv.Itoa(s.WorkerCount())
	if s.MinWorkerCount() < s.WorkerCount() {
		count = fmt.Sprintf("%d:%d", s.MinWorkerCount(), s.WorkerCount())
	}
	out := fmt.Sprintf("%s x %d process", count, procs)
	if procs != 1 {
		out += "es"
	}
	if s.Resources.GPU > 0 {
		out += ", " + units.Count(int(s.Resources.GPU), "GPU") + " each"
	}
	if s.MaxRestarts > 0 {
		out += fmt.Sprintf("; up to %d restarts", s.MaxRestarts)
	}
	return out
}

// restarts writes a job's restarts, with how many were disruptions.
func restarts(st *v1.TrainJobStatus) string {
	out := strconv.Itoa(int(st.Restarts))
	if st.Disruptions > 0 {
		out += " (" + units.Count(int(st.Disruptions), "disruption") + ")"
	}
	return out
}

// percent writes part of whole as a percentage, "-" when whole is 0.
func percent(part, whole int64) string {
	if whole <= 0 {
		return "-"
	}
	return strconv.FormatInt(part*100/whole, 10) + "%"
}
