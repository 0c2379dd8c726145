package reporting

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// lastReportBytes is how much of the end of result.json LastResult reads: a report's
// line is far shorter.
const lastReportBytes = 256 << 10

// LastResult reads the last whole report of a run's result.json without reading the
// whole file, which grows with every report; ok is false when there is none.
func LastResult(dir string) (Result, bool, error) {
	var r Result
	f, err := os.OpenFile(filepath.Join(dir, ResultFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read the last result: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return r, false, fmt.Errorf("read the last result: %w", err)
	}
	start := max(0, info.Size()-lastReportBytes)
	tail, err := io.ReadAll(io.NewSectionReader(f, start, info.Size()-start))
	if err != nil {
		return r, false, fmt.Errorf("read the last result: %w", err)
	}
	lines := bytes.Split(tail, []byte("\n"))
	if start > 0 {
		lines = lines[1:] // the first line is cut
	}
	for i := len(lines) - 1; i >= 0; i-- {
		// A line cut short by a crash does not parse, and is passed over.
		if len(bytes.TrimSpace(lines[i])) > 0 && json.Unmarshal(lines[i], &r) == nil {
			return r, true, nil
		}
	}
	return r, false, nil
}
