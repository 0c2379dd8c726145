package launcher

import (
	"testing"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

func TestKeepsWarm(t *testing.T) {
	cases := []struct {
		command []string
		env     []v1.EnvVar
		want    bool
	}{
		{[]string{"python3", "train.py", "--lr", "0.1"}, nil, true},
		{[]string{"/usr/bin/python3", "-u", "-m", "pkg.train"}, nil, true},
		{[]string{"python3", "-c", "print(1)"}, nil, false},
		{[]string{"sleep", "60"}, nil, false},
		{[]string{"bash", "-c", "python3 train.py"}, nil, false},
		{[]string{"python3", "train.py"}, []v1.EnvVar{{Name: PrestartEnv, Value: "0"}}, false},
	}
	for _, c := range cases {
		job := &v1.TrainJob{Spec: v1.TrainJobSpec{Command: c.command, Env: c.env}}
		if got := KeepsWarm(job); got != c.want {
			t.Errorf("KeepsWarm(%q, env %v) = %v, want %v", c.command, c.env, got, c.want)
		}
	}
}

func TestTakeSpares(t *testing.T) {
	t.Setenv(SparesEnv, "")
	if s, err := TakeSpares(); err == nil || s != nil {
		t.Errorf("TakeSpares with %s empty = %v, %v; want an error", SparesEnv, s, err)
	}
	t.Setenv(SparesEnv, "1") // stdout is no standby's description
	if _, err := TakeSpares(); err == nil {
		t.Error("TakeSpares of fd 1: no error")
	}
	if s, err := TakeSpares(); s != nil || err != nil { // unset by the call before
		t.Errorf("TakeSpares without %s = %v, %v; want nothing", SparesEnv, s, err)
	}
}
