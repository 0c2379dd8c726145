package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ManifestName is the file inside every committed checkpoint that lists its files.
const ManifestName = ".trainyard-manifest.json"

// ManifestVersion is the manifest format that this package writes and reads.
const ManifestVersion = 1

// manifestTemp is where the manifest is written before it is renamed into place.
const manifestTemp = ManifestName + ".tmp"

// Meta is what Trainyard knows of the report that carried a checkpoint.
type Meta struct {
	Iteration int       `json:"iteration"`
	Attempt   int       `json:"attempt"`
	Rank      int       `json:"rank"`
	Metrics   Metrics   `json:"metrics,omitempty"`
	Time      time.Time `json:"time"`
	// Reporters are the ranks that had made the checkpoint's report when it was committed
	// (with a folder or without): a later attempt in which one of them fails before that
	// report commits no checkpoint without its part. Empty in older manifests.
	Reporters []int `json:"reporters,omitempty"`
}

// Metrics are the values a report carried, by name. In JSON, values that are not finite
// (a loss that became NaN) are written as the strings "NaN", "+Inf" and "-Inf".
type Metrics map[string]float64

// Manifest is the content of ManifestName inside every committed checkpoint.
type Manifest struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Index   int    `json:"index"`
	Meta    Meta   `json:"meta"`
	Files   []File `json:"files"`
}

// File is one regular file of a checkpoint.
type File struct {
	Path   string `json:"path"`   // relative to the checkpoint, slash-separated
	Size   int64  `json:"size"`   // in bytes
	CRC32C string `json:"crc32c"` // CRC-32C (Castagnoli) of the content, 8 hex digits
}

// Info describes a committed checkpoint.
type Info struct {
	Name     string // checkpoint_NNNNNN
	Index    int    // NNNNNN
	Dir      string // absolute path of the checkpoint's folder
	Manifest Manifest
}

// MarshalJSON writes the metrics, with non-finite values as strings.
func (m Metrics) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			out[k] = strconv.FormatFloat(v, 'g', -1, 64)
		} else {
			out[k] = v
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads metrics written by MarshalJSON.
func (m *Metrics) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = make(Metrics, len(raw))
	for k, r := range raw {
		var v float64
		if err := json.Unmarshal(r, &v); err == nil {
			(*m)[k] = v
			continue
		}
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return fmt.Errorf("metric %q: %s is not a number", k, r)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("metric %q: %q is not a number", k, s)
		}
		(*m)[k] = f
	}
	return nil
}

// readManifest reads and checks the manifest of the checkpoint in d, which must be a
// regular file of this user.
func readManifest(d *dir) (Manifest, error) {
	f, err := openRegular(d, ManifestName)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("no manifest (%s is missing)", ManifestName)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err == nil {
		err = checkOwner("its manifest "+ManifestName, info)
	}
	if err != nil {
		return Manifest{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("read manifest: %w", err)
	}
	if len(data) > maxManifest {
		return Manifest{}, fmt.Errorf("manifest %s is over %d MiB", ManifestName, maxManifest>>20)
	}
	return ParseManifest(data)
}

// ParseManifest reads and checks a manifest's content (as a mirror downloads it): its
// version, and that every path it lists is a relative path inside the checkpoint.
func ParseManifest(data []byte) (Manifest, error) {
	if len(data) > maxManifest {
		return Manifest{}, fmt.Errorf("manifest %s is over %d MiB", ManifestName, maxManifest>>20)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("manifest %s: %w", ManifestName, err)
	}
	if m.Version != ManifestVersion {
		return Manifest{}, fmt.Errorf("manifest %s has version %d, this trainyard reads version %d",
			ManifestName, m.Version, ManifestVersion)
	}
	for _, f := range m.Files {
		if !fs.ValidPath(f.Path) || f.Path == "." || f.Path == ManifestName {
			return Manifest{}, fmt.Errorf("manifest %s lists an invalid path %q", ManifestName, f.Path)
		}
	}
	return m, nil
}

// maxManifest bounds what readManifest reads: a manifest lists a checkpoint's files, at
// about 100 bytes each.
const maxManifest = 64 << 20

// writeManifest writes m into d: to a temporary file, synced, then renamed into place.
func writeManifest(d *dir, m Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	_ = d.root.Remove(manifestTemp) // a leftover would be read-only
	f, err := d.root.OpenFile(manifestTemp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if err := d.root.Rename(manifestTemp, ManifestName); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

// ReadManifest reads and checks the manifest of the committed checkpoint in dir, a
// folder of this user (it refuses another user's, wrapping ErrNotOwned).
func ReadManifest(dir string) (Manifest, error) {
	d, err := openCheckpointPath(dir)
	if err != nil {
		return Manifest{}, err
	}
	defer d.Close()
	return readManifest(d)
}

// openCheckpointPath opens the checkpoint folder at path as Store.open does: a folder,
// not a symbolic link, of this user.
func openCheckpointPath(path string) (*dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	parent, err := openDirPath(filepath.Dir(abs))
	if err != nil {
		return nil, err
	}
	defer parent.Close()
	name := filepath.Base(abs)
	d, info, err := parent.openIn(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkOwner(name, info); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}
