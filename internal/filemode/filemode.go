// Package filemode gives what Trainyard creates inside a folder the privacy of that folder:
// in a private run folder (0700) files are 0600; in a run folder shared with a group (0750
// with the setgid bit, see rundir.PermFor) they are 0640, so the group reads them.
package filemode

import (
	"io/fs"
	"os"
)

// Private is the folder mode assumed when a folder's own cannot be read.
const Private fs.FileMode = 0o700

// Of returns the modes for a folder and a file created in a folder whose mode is folder:
// its permission bits (never more than 0750), and the same without execute bits.
func Of(folder fs.FileMode) (dir, file fs.FileMode) {
	dir = folder.Perm() & 0o750
	if dir&0o700 != 0o700 {
		dir = Private
	}
	return dir, dir &^ 0o111
}

// In returns the modes for a folder and a file created in root's folder (see Of).
func In(root *os.Root) (dir, file fs.FileMode) {
	info, err := root.Stat(".")
	if err != nil {
		return Of(Private)
	}
	return Of(info.Mode())
}

// ReadOnly returns mode without write bits and without what a file in a folder of mode
// folder may not have: a committed checkpoint's file is read-only, and as private as its
// folder also once it is copied out of it.
func ReadOnly(mode, folder fs.FileMode) fs.FileMode {
	_, file := Of(folder)
	return mode.Perm() & (file | 0o111&folder.Perm()) &^ 0o222
}
