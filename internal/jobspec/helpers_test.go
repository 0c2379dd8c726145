package jobspec

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// jobCmp compares jobs: quantities by value and canonical form (resource.Quantity
// has unexported fields), and an empty slice the same as a missing one.
var jobCmp = cmp.Options{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 && a.String() == b.String() }),
	cmpopts.EquateEmpty(),
}

// testNow is the clock every test injects: 22 November 2026, 13:45:01 UTC.
var testNow = time.Date(2026, time.November, 22, 13, 45, 1, 0, time.UTC)

// testEnv is the machine every test pretends to run on.
var testEnv = Env{
	WorkDir: "/home/ada/project",
	Home:    "/home/ada",
	Now:     func() time.Time { return testNow },
}

// generatedName matches a name GenerateName made at testNow.
var generatedName = regexp.MustCompile(`^(.*-20261122-134501-)[0-9a-f]{4}$`)

// maskRunName replaces the random last four hex digits of a name generated at testNow
// with "xxxx" so that wanted jobs can be written out in full. A run name of any other
// form is left alone.
func maskRunName(t *testing.T, job *v1.TrainJob) {
	t.Helper()
	if job == nil {
		return
	}
	if m := generatedName.FindStringSubmatch(job.Spec.RunName); m != nil {
		job.Spec.RunName = m[1] + "xxxx"
	}
}

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// typeMeta is what every parsed or defaulted job carries.
func typeMeta(job v1.TrainJob) *v1.TrainJob {
	job.APIVersion, job.Kind = v1.APIVersion, v1.Kind
	return &job
}

// clone deep-copies a job (the API has no generated DeepCopy).
func clone(t *testing.T, job *v1.TrainJob) *v1.TrainJob {
	t.Helper()
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var c v1.TrainJob
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}
