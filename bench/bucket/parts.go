package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/checkpoint"
	"github.com/trainyard/trainyard/internal/mirror"
	"github.com/trainyard/trainyard/internal/testminio"
)

// transfer compares the mirror's upload and download of a checkpoint with mc's.
func transfer(c config, srv *testminio.Server) {
	if c.mc == "" {
		log.Fatal("-mc: give MinIO's client for the transfer part")
	}
	src := randomFolder(c.dir, c.mib, c.files)
	alias := []string{"MC_HOST_local=" + strings.Replace(srv.Endpoint, "http://", "http://"+testminio.AccessKey+":"+testminio.SecretKey+"@", 1),
		"MC_CONFIG_DIR=" + filepath.Join(c.dir, "mc")}
	var ourUp, ourDown, mcUp, mcDown []time.Duration
	for r := range c.rounds {
		up, down := mirrorRound(c, src, r)
		ourUp, ourDown = append(ourUp, up), append(ourDown, down)
		target := fmt.Sprintf("local/bench/mc-%d/", r) // alias local, bucket bench
		mcUp = append(mcUp, run(alias, c.mc, "cp", "--quiet", "--recursive", src+"/", target))
		dst := filepath.Join(c.dir, fmt.Sprintf("mc-down-%d", r))
		mcDown = append(mcDown, run(alias, c.mc, "cp", "--quiet", "--recursive", target, dst+"/"))
		must(os.RemoveAll(dst))
		fmt.Printf("round %d: upload trainyard %s mc %s; download trainyard %s mc %s\n", r+1,
			up.Round(time.Millisecond), mcUp[r].Round(time.Millisecond), down.Round(time.Millisecond), mcDown[r].Round(time.Millisecond))
	}
	fmt.Printf("\n| %d MiB in %d files, median of %d | trainyard | mc | mc / trainyard |\n|---|---:|---:|---:|\n", c.mib, c.files, c.rounds)
	for _, row := range []struct {
		name     string
		our, ref []time.Duration
	}{{"upload", ourUp, mcUp}, {"download", ourDown, mcDown}} {
		o, m := median(row.our), median(row.ref)
		fmt.Printf("| %s | %s (%.0f MiB/s) | %s (%.0f MiB/s) | **%.2f** |\n", row.name, o.Round(time.Millisecond), mibps(c.mib, o),
			m.Round(time.Millisecond), mibps(c.mib, m), m.Seconds()/o.Seconds())
	}
}

// mirrorRound commits src into a run folder, times the mirror's upload, then times a
// Restore of it into an empty run folder.
func mirrorRound(c config, src string, r int) (up, down time.Duration) {
	u, err := bucket.Parse(fmt.Sprintf("s3://bench/trainyard/run-%d", r))
	must(err)
	store, err := bucket.Open(context.Background(), u)
	must(err)
	runDir := filepath.Join(c.dir, fmt.Sprintf("run-%d", r))
	must(os.MkdirAll(runDir, 0o700))
	cs, err := checkpoint.Open(runDir, nil)
	must(err)
	copyDir := filepath.Join(runDir, ".scratch-copy")
	must(exec.Command("cp", "-r", src, copyDir).Run())
	info, err := cs.Commit(copyDir, checkpoint.Meta{Iteration: 1})
	must(err)
	m := mirror.New(store, runDir, mirror.Options{})
	done := make(chan bool, 1)
	start := time.Now()
	m.Committed(info, func(ok bool) { done <- ok })
	if !<-done {
		log.Fatal("the mirror's upload failed")
	}
	up = time.Since(start)
	must(m.Close(context.Background()))
	must(cs.Close())
	must(os.RemoveAll(runDir))

	other := filepath.Join(c.dir, fmt.Sprintf("restore-%d", r))
	m2 := mirror.New(store, other, mirror.Options{})
	start = time.Now()
	name, err := m2.Restore(context.Background())
	down = time.Since(start)
	must(err)
	if name != info.Name {
		log.Fatalf("restored %q, want %s", name, info.Name)
	}
	must(m2.Close(context.Background()))
	must(os.RemoveAll(other))
	return up, down
}

// memory uploads a big file in a child process and reports its peak RSS.
func memory(c config) {
	big := filepath.Join(c.dir, "big.bin")
	f, err := os.Create(big)
	must(err)
	must(f.Truncate(int64(c.bigGiB) << 30)) // sparse: read as zeros, fast; MinIO stores it all
	must(f.Close())
	self, err := os.Executable()
	must(err)
	out, err := exec.Command(self, "-child-upload", big).CombinedOutput()
	if err != nil {
		log.Fatalf("child upload: %v\n%s", err, out)
	}
	fmt.Printf("\nmemory: upload of one %d GiB file: %s", c.bigGiB, out)
	must(os.Remove(big))
}

var stepLine = regexp.MustCompile(`step (\d+) time ([0-9.]+)`)

// steps runs train.py under trainyard run in the three modes, alternating, and compares
// the mean step time.
func steps(c config, srv *testminio.Server) {
	script, err := filepath.Abs(filepath.Join("bench", "bucket", "train.py"))
	must(err)
	modes := []string{"none", "local", "async", "sync"}
	times := map[string][]float64{}
	serverCPU := map[string][]float64{}
	for r := range c.rounds {
		for _, mode := range modes {
			name := fmt.Sprintf("steps-%s-%d", mode, r)
			storage, scriptMode := "s3://bench/steps", mode
			if mode == "local" { // checkpoints kept in a folder: no upload
				storage, scriptMode = filepath.Join(c.dir, "local-runs"), "async"
			}
			cmd := exec.Command(c.trainyard, "run", "--storage-path", storage, "--name", name, "--keep-checkpoints", "1", "--",
				c.python, script, "--mib", strconv.Itoa(c.mib), "--steps", strconv.Itoa(c.steps), "--every", strconv.Itoa(c.every),
				"--mode", scriptMode)
			cmd.Env = append(os.Environ(), "TRAINYARD_STAGING_DIR="+filepath.Join(c.dir, "staging"))
			cpu0 := srv.CPU()
			out, err := cmd.CombinedOutput()
			if err != nil {
				log.Fatalf("%s: %v\n%s", name, err, out)
			}
			cpu := (srv.CPU() - cpu0).Seconds()
			mean := meanStep(string(out))
			times[mode] = append(times[mode], mean)
			serverCPU[mode] = append(serverCPU[mode], cpu)
			fmt.Printf("round %d %s: mean step %.3f s, MinIO used %.1f CPU-s\n", r+1, mode, mean, cpu)
			must(os.RemoveAll(filepath.Join(c.dir, "staging")))
			must(os.RemoveAll(filepath.Join(c.dir, "local-runs")))
		}
	}
	med := func(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[len(s)/2] }
	none := med(times["none"])
	local := med(times["local"])
	fmt.Printf("\n| %d MiB model, a checkpoint every %d steps, median of %d | mean step | / none | / local | MinIO CPU-s |\n"+
		"|---|---:|---:|---:|---:|\n", c.mib, c.every, c.rounds)
	for _, mode := range modes {
		fmt.Printf("| %s | %.3f s | **%.3f** | %.3f | %.1f |\n", mode, med(times[mode]), med(times[mode])/none, med(times[mode])/local,
			med(serverCPU[mode]))
	}
}

// meanStep is the mean of the "step N time S" lines of the output.
func meanStep(out string) float64 {
	var sum float64
	var n int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m := stepLine.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			sum += v
			n++
		}
	}
	if n == 0 {
		log.Fatalf("no step lines in:\n%s", out)
	}
	return sum / float64(n)
}
