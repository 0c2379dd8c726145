package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
)

// Verify checks the checkpoint in dir against its manifest: every file the manifest lists
// exists with its size and CRC-32C, and there are no other files. The folder, its
// manifest and every file in it must belong to the current user (see ErrNotOwned). It
// returns the manifest; errors start with the checkpoint's name and name the file at
// fault, as in "checkpoint_000003: model.pt: size 10 bytes, manifest says 2048".
func Verify(dir string) (Manifest, error) {
	d, err := openCheckpointPath(dir)
	if err != nil {
		return Manifest{}, err
	}
	defer d.Close()
	return verify(d, filepath.Base(dir))
}

// verify is Verify of the open checkpoint folder d, named name.
func verify(d *dir, name string) (Manifest, error) {
	m, err := readManifest(d)
	if err != nil {
		return Manifest{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkLayout(d, m); err != nil {
		return m, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkContent(d, m); err != nil {
		return m, fmt.Errorf("%s: %w", name, err)
	}
	return m, nil
}

// checkLayout checks that the files of d are those of the manifest, with their sizes,
// and that every file and folder there belongs to the current user. It reads no file
// content.
func checkLayout(d *dir, m Manifest) error {
	t, err := listTree(d)
	if bad := (*badEntryError)(nil); errors.As(err, &bad) {
		return fmt.Errorf("%s is %s, not in the manifest", bad.rel, bad.kind)
	}
	if err != nil {
		return fmt.Errorf("list files: %w", err)
	}
	if e, ok := t.foreign(); ok {
		return ownerError(e.rel, e.uid)
	}
	have := make(map[string]int64, len(t.files))
	for _, f := range t.files {
		if f.rel != ManifestName {
			have[f.rel] = f.size
		}
	}
	for _, f := range m.Files {
		size, ok := have[f.Path]
		if !ok {
			return fmt.Errorf("%s: missing (the manifest lists %d bytes)", f.Path, f.Size)
		}
		if size != f.Size {
			return fmt.Errorf("%s: size %d bytes, manifest says %d", f.Path, size, f.Size)
		}
		delete(have, f.Path)
	}
	if len(have) > 0 {
		extra := slices.Sorted(maps.Keys(have))
		return fmt.Errorf("%s: not in the manifest (added after the commit)", extra[0])
	}
	return nil
}

// checkContent reads every file of the manifest and compares its CRC-32C.
func checkContent(d *dir, m Manifest) error {
	buf := make([]byte, bufSize)
	for _, f := range m.Files {
		size, crc, err := hashFile(d, f.Path, buf, false)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: missing (the manifest lists %d bytes)", f.Path, f.Size)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		if size != f.Size {
			return fmt.Errorf("%s: size %d bytes, manifest says %d", f.Path, size, f.Size)
		}
		if got := crcHex(crc); got != f.CRC32C {
			return fmt.Errorf("%s: CRC-32C %s, manifest says %s (the file changed after the commit)",
				f.Path, got, f.CRC32C)
		}
	}
	return nil
}
