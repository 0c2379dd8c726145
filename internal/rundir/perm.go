package rundir

import (
	"io/fs"
	"os"
)

// Perm is the pair of modes Trainyard gives what it creates in a storage path: run
// folders and the folders inside them (Dir), and the files it writes there (File).
//
// Run folders are private by default: folders 0700, files 0600, since a job's spec
// (job.yaml) can hold secrets in its env and logs print what the job prints. To share
// runs with a team, give the storage path to root and the team's group with the setgid
// and the sticky bits:
//
//	sudo chown root:team /data/runs && sudo chmod 3770 /data/runs
//
// Setgid (2000) is the Unix convention for a folder shared with its group: run folders
// created there are 0750 with the setgid bit (so everything below belongs to the group
// too) and files 0640: the group reads, only the owner writes. Sticky (1000) lets a member
// rename or remove only their own run folders: without it, any member could rename a
// running job's folder away and put one of their own in its place, and Open refuses such
// a storage path (see CheckStorage). The user's umask still applies to the files the
// training script writes itself; the run folder's mode protects those as well.
type Perm struct {
	Dir  fs.FileMode
	File fs.FileMode
}

// Shared reports whether p is the group-shared pair.
func (p Perm) Shared() bool { return p.Dir&fs.ModeSetgid != 0 }

// PermFor returns the modes for what Trainyard creates in folder (a storage path, or a
// run folder for what goes inside it): 0750 with the setgid bit for folders and 0640 for
// files when folder has the setgid bit, 0700 and 0600 otherwise, including when folder
// cannot be read.
func PermFor(folder string) Perm {
	info, err := os.Stat(folder)
	if err != nil {
		return permOf(nil)
	}
	return permOf(info)
}

// permOf returns the modes for what is created in the folder described by info (nil: a
// private folder).
func permOf(info fs.FileInfo) Perm {
	if info != nil && info.IsDir() && info.Mode()&fs.ModeSetgid != 0 {
		return Perm{Dir: 0o750 | fs.ModeSetgid, File: 0o640}
	}
	return Perm{Dir: 0o700, File: 0o600}
}
