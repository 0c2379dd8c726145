package operator

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A slicing gang that shrinks for want of room asks Kueue for a slice again only 1, 2,
// 4, ... up to 10 minutes later; a gang without slices keeps no such wait.
func TestSliceWaitBacksOff(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	job := &v1.TrainJob{ObjectMeta: metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{annotationElasticJob: "true"}},
		Spec: v1.TrainJobSpec{Workers: ptr(int32(4)), MinWorkers: ptr(int32(2))}}
	s := &step{r: &Reconciler{}, job: job, now: t0}
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute} {
		s.sliceMissed()
		v, _ := s.r.sliceWait.Load(job.UID)
		if got := v.(sliceWait).next.Sub(t0); got != want {
			t.Errorf("shrink %d: the next slice waits %s; want %s", i+1, got, want)
		}
	}
	plain := &step{r: &Reconciler{}, job: &v1.TrainJob{ObjectMeta: metav1.ObjectMeta{UID: "u2"},
		Spec: v1.TrainJobSpec{Workers: ptr(int32(4)), MinWorkers: ptr(int32(2))}}, now: t0}
	plain.sliceMissed()
	if _, ok := plain.r.sliceWait.Load(types.UID("u2")); ok {
		t.Error("a gang without slices keeps a slice wait")
	}
}
