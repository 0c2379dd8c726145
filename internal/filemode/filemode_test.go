package filemode

import (
	"io/fs"
	"os"
	"testing"
)

func TestOf(t *testing.T) {
	for _, c := range []struct{ folder, dir, file fs.FileMode }{
		{0o700, 0o700, 0o600},
		{0o750 | fs.ModeSetgid, 0o750, 0o640},
		{0o755, 0o750, 0o640},
		{0o777, 0o750, 0o640},
		{0o500, 0o700, 0o600}, // an odd folder: what we create stays usable and private
	} {
		if dir, file := Of(c.folder); dir != c.dir || file != c.file {
			t.Errorf("Of(%v) = %v, %v; want %v, %v", c.folder, dir, file, c.dir, c.file)
		}
	}
}

func TestReadOnly(t *testing.T) {
	for _, c := range []struct{ mode, folder, want fs.FileMode }{
		{0o644, 0o700, 0o400},
		{0o755, 0o700, 0o500},
		{0o644, 0o750 | fs.ModeSetgid, 0o440},
		{0o600, 0o750 | fs.ModeSetgid, 0o400}, // never more than the file had
		{0o777, 0o750, 0o550},
	} {
		if got := ReadOnly(c.mode, c.folder); got != c.want {
			t.Errorf("ReadOnly(%v, %v) = %v, want %v", c.mode, c.folder, got, c.want)
		}
	}
}

func TestIn(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o750|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if d, f := In(root); d != 0o750 || f != 0o640 {
		t.Errorf("In(setgid 0750) = %v, %v; want 0750, 0640", d, f)
	}
}
