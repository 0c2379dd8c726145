package launcher

import (
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// A launcher whose gang someone else resized (the operator's new pods of a resized
// TrainJob) gives its first attempt's ranks the world size before, and no later attempt.
func TestPreviousWorldSizeFromOutside(t *testing.T) {
	two := int32(2)
	l := &Launcher{Job: &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &two}}, PreviousWorldSize: 4}
	env := map[string]string{}
	l.elasticEnv(env)
	if env[EnvPreviousWorldSize] != "4" {
		t.Errorf("first attempt: %s=%q; want 4", EnvPreviousWorldSize, env[EnvPreviousWorldSize])
	}
	env = map[string]string{}
	l.elasticEnv(env)
	if v, ok := env[EnvPreviousWorldSize]; ok {
		t.Errorf("second attempt at the same size: %s=%q; want unset", EnvPreviousWorldSize, v)
	}
	same := &Launcher{Job: &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &two}}, PreviousWorldSize: 2}
	env = map[string]string{}
	same.elasticEnv(env)
	if v, ok := env[EnvPreviousWorldSize]; ok {
		t.Errorf("not resized: %s=%q; want unset", EnvPreviousWorldSize, v)
	}
}
