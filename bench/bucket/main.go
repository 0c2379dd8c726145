// Command bucket measures runs kept in S3 (internal/mirror) against MinIO on this machine:
//
//   - transfer: a checkpoint folder of -mib MiB in -files files uploaded by the mirror (commit
//     to upload committed in the bucket) and downloaded by Restore, against MinIO's own client
//     (mc cp --recursive) copying the same folder up and down; alternating, -rounds rounds.
//   - memory: the peak RSS of a process that uploads one file of -big-gib GiB with the
//     mirror's uploader (bucket.Store.PutFile), against the file's size.
//   - steps: the step time of train.py (a model of -mib MiB, a checkpoint every -every steps)
//     under trainyard run with the run in the bucket: no checkpoints, checkpoints uploaded in
//     the background (async), and report() waiting for each upload (sync, Ray's default).
//
// Usage: go run ./bench/bucket -minio bin/minio-... -mc bin/mc-bench [-rounds 3] [-parts transfer,memory,steps]
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trainyard/trainyard/bench/internal/host"
	"github.com/trainyard/trainyard/internal/bucket"
	"github.com/trainyard/trainyard/internal/testminio"
)

type config struct {
	trainyard, python, minio, mc string
	rounds, mib, files, bigGiB   int
	steps, every                 int
	parts                        string
	dir                          string
}

func main() {
	var c config
	flag.StringVar(&c.trainyard, "trainyard", "./bin/trainyard", "trainyard binary")
	flag.StringVar(&c.python, "python", "/usr/bin/python3", "Python with torch")
	flag.StringVar(&c.minio, "minio", "", "MinIO server binary (make test-servers builds it)")
	flag.StringVar(&c.mc, "mc", "", "MinIO's client, mc, for the transfer reference")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of each comparison")
	flag.IntVar(&c.mib, "mib", 1024, "checkpoint size in MiB (transfer, steps)")
	flag.IntVar(&c.files, "files", 4, "files per checkpoint (transfer)")
	flag.IntVar(&c.bigGiB, "big-gib", 10, "file size in GiB for the memory part")
	flag.IntVar(&c.steps, "steps", 40, "training steps per run (steps)")
	flag.IntVar(&c.every, "every", 10, "steps between checkpoints (steps)")
	flag.StringVar(&c.parts, "parts", "transfer,memory,steps", "which parts to run")
	child := flag.String("child-upload", "", "internal: upload this file and print the peak RSS")
	flag.Parse()
	if *child != "" {
		childUpload(*child)
		return
	}
	if c.minio == "" {
		log.Fatal("-minio: give the MinIO binary (make test-servers builds bin/minio-*)")
	}
	dir, err := os.MkdirTemp("", "bench-bucket-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	c.dir = dir
	srv, err := testminio.StartIn(c.minio, filepath.Join(dir, "minio"))
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	if err := srv.CreateBucket("bench"); err != nil {
		log.Fatal(err)
	}
	parts := strings.Split(c.parts, ",")
	if slices.Contains(parts, "transfer") {
		transfer(c, srv)
	}
	if slices.Contains(parts, "memory") {
		memory(c)
	}
	if slices.Contains(parts, "steps") {
		steps(c, srv)
	}
}

// randomFolder writes files of random data, mib MiB in all, into a new folder.
func randomFolder(dir string, mib, files int) string {
	folder := filepath.Join(dir, "checkpoint-src")
	must(os.MkdirAll(folder, 0o700))
	for i := range files {
		f, err := os.Create(filepath.Join(folder, fmt.Sprintf("shard-%d.pt", i)))
		must(err)
		_, err = io.CopyN(f, rand.Reader, int64(mib)<<20/int64(files))
		must(err)
		must(f.Close())
	}
	return folder
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// run runs a command and returns how long it took.
func run(env []string, name string, args ...string) time.Duration {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func mibps(mib int, d time.Duration) float64 { return float64(mib) / d.Seconds() }

// childUpload uploads path with the uploader and prints the process's peak RSS.
func childUpload(path string) {
	u, err := bucket.Parse("s3://bench/memory")
	must(err)
	s, err := bucket.Open(context.Background(), u)
	must(err)
	start := time.Now()
	must(s.PutFile(context.Background(), "big.bin", path))
	took := time.Since(start)
	mem, err := host.ReadMemory(os.Getpid())
	must(err)
	fmt.Printf("VmHWM: %d kB took=%s\n", mem.HWM>>10, took.Round(time.Millisecond))
}
