package e2e

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
)

// The local users and group of TestSwappedRunFolder: the job's user and another member
// of the team, who attacks it.
const (
	swapRunner  = "trainyard-runner"
	swapMallory = "trainyard-mallory"
	swapTeam    = "trainyard-team"
)

// forgedPayload is what the forged checkpoint holds: a real job would torch.load it,
// which unpickles, so code in it would run as the job's user.
const forgedPayload = "FORGED by " + swapMallory

// swapScript is the job: attempt 1 commits a checkpoint of its own, waits for the test's
// go-ahead (argv[1]), then fails, so the gang restarts; a later attempt prints what it
// resumes from.
const swapScript = `
import os, sys, time, trainyard
ckpt = trainyard.get_checkpoint()
if ckpt:
    print("RESUMED", os.path.basename(ckpt), open(os.path.join(ckpt, "checkpoint.pt")).read(), flush=True)
    sys.exit(0)
if trainyard.get_context().attempt > 1:
    print("NO CHECKPOINT", flush=True)
    sys.exit(0)
folder = trainyard.new_checkpoint_dir()
open(os.path.join(folder, "checkpoint.pt"), "w").write("the job's own state")
trainyard.report({"step": 1}, checkpoint=folder)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
sys.exit(3)
`

// swapCase is one way to put another folder in a running job's place.
type swapCase struct {
	job     string      // the user the job runs as
	mode    fs.FileMode // of the storage path
	owner   string      // of the storage path (its group is swapTeam)
	swapper string      // who swaps the run folder: swapMallory or root
	link    bool        // a symbolic link to the other folder, not the folder itself
	forger  string      // who owns the forged checkpoint
	// want is what the run says instead of resuming: refused at start (exit 2) or when
	// the next attempt begins (exit 1).
	want     string
	wantCode int
}

// A running job's run folder is renamed away and another folder, holding a forged
// checkpoint_000500 whose manifest verifies, is put in its place (the two attacks of
// the security issue, and the same swaps made by root). The job never resumes from the
// forged checkpoint: the storage path that allows the swap is refused before the run
// starts, and a swap made anyway is found when the next attempt begins.
func TestSwappedRunFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs jobs and swaps their folders as other local users (useradd, runuser)")
	}
	cases := map[string]swapCase{
		"group storage 2770, another member swaps the folder": {job: swapRunner, mode: 0o770 | fs.ModeSetgid,
			owner: "root", swapper: swapMallory, forger: swapMallory, want: "is writable by its group (mode 2770) and not sticky", wantCode: 2},
		"team storage 3770, the folder swapped by root": {job: swapRunner, mode: 0o770 | fs.ModeSetgid | fs.ModeSticky,
			owner: "root", swapper: "root", forger: swapRunner, want: "was replaced while the run ran", wantCode: 1},
		"root's job, storage another user owns, a link swapped in": {job: "root", mode: 0o755,
			owner: swapMallory, swapper: swapMallory, link: true, forger: swapMallory, want: "belongs to " + swapMallory, wantCode: 2},
		"root's job, a link swapped in by root": {job: "root", mode: 0o755,
			owner: "root", swapper: "root", link: true, forger: swapMallory, want: "was replaced while the run ran", wantCode: 1},
	}
	ensureGroup(t, swapTeam)
	for _, u := range []string{swapRunner, swapMallory} {
		ensureUser(t, u)
		ensureMember(t, u, swapTeam)
	}
	base := swapBase(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) { testSwap(t, base, tc) })
	}
}

// testSwap runs one case: start the job, wait for its first checkpoint, swap, let the
// job go on, and check what it resumed from.
func testSwap(t *testing.T, base string, tc swapCase) {
	dir := mkdirOwned(t, base, "case-", "root", 0o755)
	storage := mkdirOwned(t, dir, "storage-", tc.owner, tc.mode)
	runDir := filepath.Join(storage, "job")
	goFile := filepath.Join(dir, "go")
	other := mkdirOwned(t, dir, "other-", tc.forger, 0o777) // the folder put in the run folder's place
	forge(t, filepath.Join(other, "checkpoint_000500"), tc.forger)

	ty := startAs(t, base, tc.job, "run", "--storage-path", storage, "--name", "job", "--max-restarts", "1",
		"--", python, filepath.Join(base, "swap.py"), goFile)
	if !waitForEither(t, filepath.Join(runDir, "checkpoint_000001"), ty, 2*time.Minute) {
		code := ty.wait(t)
		checkRefused(t, tc, code, ty.out.String(), 2)
		return
	}
	swap(t, tc, runDir, other)
	writeFile(t, goFile, "")
	code := ty.wait(t)
	out := ty.out.String()
	if strings.Contains(out, forgedPayload) || strings.Contains(out, "resuming from checkpoint_000500") {
		t.Fatalf("the job resumed from the checkpoint %s forged (exit %d):\n%s", tc.forger, code, out)
	}
	checkRefused(t, tc, code, out, 1)
	if tc.job == "root" {
		checkUntouched(t, other, tc.forger)
	}
}

// checkRefused checks that the run ended as tc wants, at the start (exit 2) or before
// the next attempt (exit 1).
func checkRefused(t *testing.T, tc swapCase, code int, out string, when int) {
	t.Helper()
	t.Logf("exit %d; output:\n%s", code, out)
	if code != tc.wantCode || when != tc.wantCode || !strings.Contains(out, tc.want) {
		t.Fatalf("exit %d (%s), want exit %d saying %q:\n%s",
			code, map[int]string{1: "after the swap", 2: "before the job ran"}[when], tc.wantCode, tc.want, out)
	}
}

// swap renames the run folder away and puts other (or a link to it) in its place, as
// tc.swapper. Mallory cannot rename in a sticky storage path: that is checked first.
func swap(t *testing.T, tc swapCase, runDir, other string) {
	t.Helper()
	if tc.mode&fs.ModeSticky != 0 {
		out, err := exec.Command("runuser", "-u", swapMallory, "--", "mv", runDir, runDir+".mallory").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Operation not permitted") {
			t.Fatalf("%s renamed a run folder in a sticky storage path: %v %s", swapMallory, err, out)
		}
	}
	script := `mv "$1" "$1.away" && mkdir -m 0777 "$1" && cp -r "$2/checkpoint_000500" "$1/"`
	if tc.link {
		script = `mv "$1" "$1.away" && ln -s "$2" "$1"`
	}
	cmd := exec.Command("sh", "-c", script, "sh", runDir, other)
	if tc.swapper != "root" {
		cmd = exec.Command("runuser", append([]string{"-u", tc.swapper, "--"}, cmd.Args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("swap as %s: %v\n%s", tc.swapper, err, out)
	}
	if !tc.link && tc.swapper == "root" { // as the job's own user would have left it
		chownTree(t, runDir, tc.forger)
	}
}

// checkUntouched checks that everything in dir still belongs to owner: the job (root)
// wrote nothing into the other user's folder.
func checkUntouched(t *testing.T, dir, owner string) {
	t.Helper()
	uid := lookupUID(t, owner)
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && int(info.Sys().(*syscall.Stat_t).Uid) != uid {
			t.Errorf("the job wrote %s into %s's folder", p, owner)
		}
		return nil
	})
}

// forge writes a checkpoint whose manifest verifies into dir, owned by owner.
func forge(t *testing.T, dir, owner string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "checkpoint.pt"), forgedPayload)
	crc := crc32.Checksum([]byte(forgedPayload), crc32.MakeTable(crc32.Castagnoli))
	m := checkpoint.Manifest{Version: checkpoint.ManifestVersion, Name: "checkpoint_000500", Index: 500,
		Meta:  checkpoint.Meta{Iteration: 500, Attempt: 1, Time: time.Now()},
		Files: []checkpoint.File{{Path: "checkpoint.pt", Size: int64(len(forgedPayload)), CRC32C: fmt.Sprintf("%08x", crc)}}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, checkpoint.ManifestName), string(data))
	chownTree(t, dir, owner)
}

// swapBase makes the folder the cases share, readable by the local users: the binary
// (a copy they may run), the job's script, and a home folder for each user.
func swapBase(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "trainyard-swap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, binary, filepath.Join(base, "trainyard"))
	if err := os.Chmod(filepath.Join(base, "trainyard"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(base, "swap.py"), swapScript)
	for _, u := range []string{"root", swapRunner} {
		home := filepath.Join(base, "home-"+u)
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		chownTree(t, home, u)
	}
	return base
}

// startAs starts the copy of trainyard in base as the local user name, with a clean
// environment.
func startAs(t *testing.T, base, name string, args ...string) *trainyard {
	t.Helper()
	argv := append([]string{"env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + filepath.Join(base, "home-"+name),
		"LANG=C.UTF-8", filepath.Join(base, "trainyard")}, args...)
	if name != "root" {
		argv = append([]string{"runuser", "-u", name, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = base
	out := &lineBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // a no-op once it has exited
	return &trainyard{cmd: cmd, out: out}
}

// waitForEither waits until path exists (true) or the process has exited (false).
func waitForEither(t *testing.T, path string, ty *trainyard, timeout time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if exited(ty.cmd.Process.Pid) {
			return false
		}
	}
	t.Fatalf("neither %s nor an exit within %s:\n%s", path, timeout, ty.out)
	return false
}

// exited reports whether the child pid is a zombie: it has exited and waits to be reaped.
func exited(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// mkdirOwned makes a new folder in parent with mode, owned by owner and group swapTeam.
func mkdirOwned(t *testing.T, parent, prefix, owner string, mode fs.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, lookupUID(t, owner), lookupGID(t, swapTeam)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chownTree gives everything under dir to the local user name, without following links.
func chownTree(t *testing.T, dir, name string) {
	t.Helper()
	uid := lookupUID(t, name)
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, uid, -1)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func lookupUID(t *testing.T, name string) int {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	return uid
}

func lookupGID(t *testing.T, name string) int {
	t.Helper()
	g, err := user.LookupGroup(name)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	return gid
}

// ensureGroup creates the local group name when it is missing.
func ensureGroup(t *testing.T, name string) {
	t.Helper()
	if _, err := user.LookupGroup(name); err == nil {
		return
	}
	if out, err := exec.Command("groupadd", "--system", name).CombinedOutput(); err != nil {
		t.Fatalf("groupadd %s: %v\n%s", name, err, out)
	}
}

// ensureMember adds the local user name to group when it is not a member.
func ensureMember(t *testing.T, name, group string) {
	t.Helper()
	out, err := exec.Command("id", "-nG", name).Output()
	if err == nil && strings.Contains(" "+strings.TrimSpace(string(out))+" ", " "+group+" ") {
		return
	}
	if out, err := exec.Command("usermod", "-a", "-G", group, name).CombinedOutput(); err != nil {
		t.Fatalf("usermod -a -G %s %s: %v\n%s", group, name, err, out)
	}
}
