package launcher

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
	"github.com/trainyard/trainyard/internal/device"
)

func envJob(workers, procs int32) *v1.TrainJob {
	return &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &workers, ProcsPerWorker: &procs,
		Command: []string{"python3"}, RunName: "mnist", StoragePath: "/data/runs", MaxRestarts: 3}}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestEnvWiring(t *testing.T) {
	job := envJob(2, 4)
	gpus := []device.GPU{{Index: 4}, {Index: 5}, {Index: 6}, {Index: 7}}
	p := Proc{Attempt: 2, Worker: 1, LocalRank: 3, Rank: RankOf(job, 1, 3), MasterAddr: "10.0.0.1",
		MasterPort: 29500, GPUs: gpus, Device: 3, HostProcs: 4, Node: 1, Nodes: 2}
	got := envMap(Env(job, p, "/data/runs/mnist", []string{"HOME=/root", "CUDA_VISIBLE_DEVICES=0"}, nil))
	want := map[string]string{
		"HOME":                       "/root",
		"MASTER_ADDR":                "10.0.0.1",
		"MASTER_PORT":                "29500",
		"WORLD_SIZE":                 "8",
		"RANK":                       "7",
		"LOCAL_RANK":                 "3",
		"LOCAL_WORLD_SIZE":           "4",
		"GROUP_RANK":                 "1",
		"NODE_RANK":                  "1",
		"GROUP_WORLD_SIZE":           "2",
		"ROLE_NAME":                  "default",
		"ROLE_RANK":                  "7",
		"ROLE_WORLD_SIZE":            "8",
		"TORCHELASTIC_RUN_ID":        "mnist",
		"TORCHELASTIC_RESTART_COUNT": "1",
		"TORCHELASTIC_MAX_RESTARTS":  "3",
		"PYTHONUNBUFFERED":           "1",
		"OMP_NUM_THREADS":            got["OMP_NUM_THREADS"], // depends on this machine; see TestOMPThreads
		"TRAINYARD_RUN_NAME":         "mnist",
		"TRAINYARD_STORAGE_PATH":     "/data/runs",
		"TRAINYARD_RUN_DIR":          "/data/runs/mnist",
		"TRAINYARD_ATTEMPT":          "2",
		"TRAINYARD_MAX_RESTARTS":     "3",
		"TRAINYARD_WORKER":           "1",
		"TRAINYARD_KEEP_CHECKPOINTS": "0",
		"TRAINYARD_CUDA_DEVICE":      "3",
		"CUDA_VISIBLE_DEVICES":       "4,5,6,7",
		"CUDA_DEVICE_ORDER":          "PCI_BUS_ID",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestEnvPrecedence(t *testing.T) {
	job := envJob(1, 1)
	job.Spec.Env = []v1.EnvVar{{Name: "OMP_NUM_THREADS", Value: "8"}, {Name: "CUDA_VISIBLE_DEVICES", Value: "3"}, {Name: "EMPTY"}}
	p := Proc{Attempt: 1, MasterAddr: "127.0.0.1", MasterPort: 1234, HostProcs: 1}
	got := envMap(Env(job, p, "/r", []string{"MASTER_PORT=1", "PATH=/bin"}, map[string]string{"PYTHONPATH": "/helper", "OMP_NUM_THREADS": "2"}))
	for k, want := range map[string]string{
		"OMP_NUM_THREADS":        "8",       // the job's env wins over Trainyard's and the caller's
		"CUDA_VISIBLE_DEVICES":   "3",       // ... and over the GPU reservation
		"NVIDIA_VISIBLE_DEVICES": "void",    // a worker without GPUs cannot reach one
		"MASTER_PORT":            "1234",    // Trainyard's wins over the inherited environment
		"PYTHONPATH":             "/helper", // the caller's extra variables are set
		"PATH":                   "/bin",    // the rest of the environment is inherited
		"EMPTY":                  "",        // an empty value is still set
		"TRAINYARD_ATTEMPT":      "1",
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %q (set: %v), want %q", k, v, ok, want)
		}
	}
}

func TestOMPThreads(t *testing.T) {
	cpu := func(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
	cases := map[string]struct {
		procs     int32
		cpu       *resource.Quantity
		cores     int
		hostProcs int
		want      int
	}{
		"cores shared by the gang here":   {procs: 2, cores: 16, hostProcs: 4, want: 4},
		"more processes than cores":       {procs: 4, cores: 2, hostProcs: 4, want: 1},
		"cpu request shared by procs":     {procs: 2, cpu: cpu("8"), cores: 64, hostProcs: 2, want: 4},
		"fractional cpu request":          {procs: 1, cpu: cpu("500m"), cores: 64, hostProcs: 1, want: 1},
		"cpu request below process count": {procs: 4, cpu: cpu("2"), cores: 64, hostProcs: 4, want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := envJob(1, tc.procs)
			job.Spec.Resources.CPU = tc.cpu
			if got := ompThreads(job, tc.cores, tc.hostProcs); got != tc.want {
				t.Errorf("ompThreads = %d, want %d", got, tc.want)
			}
		})
	}
}

// On Kubernetes the worker container's CPU request, not the node's cores, is what the
// pod's processes share (Placement.MilliCPU, from the downward API).
func TestOMPThreadsFromTheHostsCPU(t *testing.T) {
	job := envJob(2, 2)
	pl := Placement{Slots: []Slot{{Worker: 1}}, NodePerWorker: true}
	for milli, want := range map[int64]int{100: 1, 2500: 1, 8000: 4, 0: max(1, runtime.NumCPU()/2)} {
		pl.MilliCPU = milli
		for _, p := range placeProcs(job, pl, 1, 29500) {
			if got := TorchEnv(job, p)["OMP_NUM_THREADS"]; got != strconv.Itoa(want) {
				t.Errorf("request %dm, 2 processes: OMP_NUM_THREADS %s, want %d", milli, got, want)
			}
		}
	}
	cpu := resource.MustParse("6")
	job.Spec.Resources.CPU = &cpu // the job's own CPU wins
	pl.MilliCPU = 100
	if got := TorchEnv(job, placeProcs(job, pl, 1, 29500)[0])["OMP_NUM_THREADS"]; got != "3" {
		t.Errorf("the job's 6 CPUs, 2 processes: OMP_NUM_THREADS %s, want 3", got)
	}
}

func TestPlaceLocal(t *testing.T) {
	job := envJob(2, 1)
	job.Spec.Resources.GPU = 2
	inv := device.Inventory{GPUs: []device.GPU{{Index: 0}, {Index: 1}, {Index: 2}, {Index: 3}}}
	p, err := PlaceLocal(job, inv)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int
	for _, s := range p.Slots {
		var ids []int
		for _, g := range s.GPUs {
			ids = append(ids, g.Index)
		}
		got = append(got, ids)
	}
	if diff := cmp.Diff([][]int{{0, 1}, {2, 3}}, got); diff != "" {
		t.Errorf("GPUs per worker (-want +got):\n%s", diff)
	}
	job.Spec.Resources.GPU = 3
	if _, err := PlaceLocal(job, inv); err == nil || !strings.Contains(err.Error(), "needs 6 GPUs") {
		t.Errorf("PlaceLocal with too few GPUs: %v", err)
	}
}

// The helper's folder joins the user's PYTHONPATH instead of replacing it.
func TestEnvPythonPath(t *testing.T) {
	helper := map[string]string{"PYTHONPATH": "/helper"}
	p := Proc{Attempt: 1, HostProcs: 1}
	cases := map[string]struct {
		inherited []string
		jobEnv    []v1.EnvVar
		want      string
	}{
		"no user path":         {want: "/helper"},
		"inherited path first": {inherited: []string{"PYTHONPATH=/mine"}, want: "/mine:/helper"},
		"the job's path first": {inherited: []string{"PYTHONPATH=/mine"}, jobEnv: []v1.EnvVar{{Name: "PYTHONPATH", Value: "/job"}}, want: "/job:/helper"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := envJob(1, 1)
			job.Spec.Env = tc.jobEnv
			if got := envMap(Env(job, p, "/r", tc.inherited, helper))["PYTHONPATH"]; got != tc.want {
				t.Errorf("PYTHONPATH = %q, want %q", got, tc.want)
			}
		})
	}
}

// The attempt's first line says which workers of the gang start here: all of them on one
// machine, one in each pod of a gang on Kubernetes.
func TestWorkersHere(t *testing.T) {
	workers := int32(4)
	job := &v1.TrainJob{Spec: v1.TrainJobSpec{Workers: &workers}}
	for _, c := range []struct {
		slots []Slot
		want  string
	}{
		{[]Slot{{Worker: 0}, {Worker: 1}, {Worker: 2}, {Worker: 3}}, "4 worker(s)"},
		{[]Slot{{Worker: 2}}, "worker 2 of 4"},
	} {
		l := &Launcher{Job: job, Placement: Placement{Slots: c.slots}}
		if got := l.workersHere(); got != c.want {
			t.Errorf("%d slots: %q, want %q", len(c.slots), got, c.want)
		}
	}
}

// The git credentials and the secrets file's name never reach a worker, inherited or
// given in the job; the job's other secrets do.
func TestEnvKeepsCloneCredentials(t *testing.T) {
	job := envJob(1, 1)
	job.Spec.Env = []v1.EnvVar{{Name: "GIT_SYNC_PASSWORD", Value: "pw"}, {Name: "HF_TOKEN", Value: "hf"}}
	p := Proc{Attempt: 1, MasterAddr: "127.0.0.1", MasterPort: 1234, HostProcs: 1}
	got := envMap(Env(job, p, "/r", []string{"GIT_SYNC_USERNAME=alice", "GIT_SYNC_PASSWORD=pw", "TRAINYARD_SECRETS_FILE=/s"}, nil))
	for _, k := range []string{"GIT_SYNC_USERNAME", "GIT_SYNC_PASSWORD", "TRAINYARD_SECRETS_FILE"} {
		if v, ok := got[k]; ok {
			t.Errorf("a worker gets %s=%s", k, v)
		}
	}
	if got["HF_TOKEN"] != "hf" {
		t.Errorf("HF_TOKEN = %q, want the job's", got["HF_TOKEN"])
	}
}

// A gang that asks for more cores than the machine has is refused, as the job server
// refuses a job that can never fit.
func TestPlaceLocalRefusesTooManyCPUs(t *testing.T) {
	job := makeJob(t, "true").workers(2).obj(t)
	for cpu, want := range map[string]string{
		"64":    "--cpus-per-worker 64 x 2 worker(s) asks for 128 cores; this machine has 2: ask for at most 1 per worker",
		"1500m": "--cpus-per-worker 1500m x 2 worker(s) asks for 3 cores; this machine has 2: ask for at most 1 per worker",
		"1":     "",
	} {
		q := resource.MustParse(cpu)
		job.Spec.Resources.CPU = &q
		err := fitsCPUs(job, 2)
		if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("cpu %s: %v, want %q", cpu, err, want)
		}
	}
}

// Processes are numbered per machine as torchrun numbers them per node: on one machine the
// whole gang is one node (local ranks 0..N-1, node 0) and every process sees the gang's
// GPUs, cuda:LOCAL_RANK being its own with one GPU each; on Kubernetes each worker's pod is
// a node of its own.
func TestPlaceProcs(t *testing.T) {
	gpus := func(idx ...int) []device.GPU {
		var out []device.GPU
		for _, i := range idx {
			out = append(out, device.GPU{Index: i})
		}
		return out
	}
	type row struct {
		Rank, Worker, LocalRank, LocalWorldSize, Node, Nodes int
		Visible                                              string
		Device                                               int
	}
	cases := map[string]struct {
		workers, procs int32
		placement      Placement
		want           []row
	}{
		"two workers on this machine, one GPU each": {workers: 2, procs: 1,
			placement: Placement{Slots: []Slot{{Worker: 0, GPUs: gpus(1)}, {Worker: 1, GPUs: gpus(3)}}},
			want:      []row{{0, 0, 0, 2, 0, 1, "1,3", 0}, {1, 1, 1, 2, 0, 1, "1,3", 1}}},
		"two workers of two processes, two GPUs each": {workers: 2, procs: 2,
			placement: Placement{Slots: []Slot{{Worker: 0, GPUs: gpus(0, 1)}, {Worker: 1, GPUs: gpus(2, 3)}}},
			want: []row{{0, 0, 0, 4, 0, 1, "0,1,2,3", 0}, {1, 0, 1, 4, 0, 1, "0,1,2,3", 1},
				{2, 1, 2, 4, 0, 1, "0,1,2,3", 2}, {3, 1, 3, 4, 0, 1, "0,1,2,3", 3}}},
		"one process with two GPUs per worker": {workers: 2, procs: 1,
			placement: Placement{Slots: []Slot{{Worker: 0, GPUs: gpus(0, 1)}, {Worker: 1, GPUs: gpus(2, 3)}}},
			want:      []row{{0, 0, 0, 2, 0, 1, "0,1,2,3", 0}, {1, 1, 1, 2, 0, 1, "0,1,2,3", 2}}},
		"no GPUs": {workers: 2, procs: 1,
			placement: Placement{Slots: []Slot{{Worker: 0}, {Worker: 1}}},
			want:      []row{{0, 0, 0, 2, 0, 1, "", 0}, {1, 1, 1, 2, 0, 1, "", 0}}},
		"a pod of its own (Kubernetes), worker 1 of 3": {workers: 3, procs: 2,
			placement: Placement{Slots: []Slot{{Worker: 1, GPUs: gpus(0, 1)}}, NodePerWorker: true},
			want:      []row{{2, 1, 0, 2, 1, 3, "0,1", 0}, {3, 1, 1, 2, 1, 3, "0,1", 1}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := envJob(tc.workers, tc.procs)
			var got []row
			for _, p := range placeProcs(job, tc.placement, 1, 29500) {
				env := envMap(Env(job, p, "/r", nil, nil))
				var r row
				for name, dst := range map[string]*int{"RANK": &r.Rank, "TRAINYARD_WORKER": &r.Worker, "LOCAL_RANK": &r.LocalRank,
					"LOCAL_WORLD_SIZE": &r.LocalWorldSize, "NODE_RANK": &r.Node, "GROUP_WORLD_SIZE": &r.Nodes, "TRAINYARD_CUDA_DEVICE": &r.Device} {
					if v, ok := env[name]; ok {
						*dst, _ = strconv.Atoi(v)
					}
				}
				if env["GROUP_RANK"] != env["NODE_RANK"] {
					t.Errorf("rank %d: GROUP_RANK %s, NODE_RANK %s; want them equal", r.Rank, env["GROUP_RANK"], env["NODE_RANK"])
				}
				r.Visible = env["CUDA_VISIBLE_DEVICES"]
				got = append(got, r)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("processes (-want +got):\n%s", d)
			}
		})
	}
}
