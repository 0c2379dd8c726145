package device

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// queryFields are the fields asked of nvidia-smi --query-gpu, in order.
var queryFields = []string{
	"index", "uuid", "name", "memory.total", "memory.used",
	"utilization.gpu", "driver_version",
}

// parseQuery parses the output of nvidia-smi --query-gpu=<queryFields>
// --format=csv,noheader,nounits. It returns the GPUs in index order and the
// driver version. Blank lines are skipped; empty output means no GPU.
func parseQuery(out string) ([]GPU, string, error) {
	var gpus []GPU
	driver := ""
	for n, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		gpu, drv, err := parseRow(line)
		if err != nil {
			return nil, "", fmt.Errorf("nvidia-smi output line %d %q: %w", n+1, line, err)
		}
		if driver == "" {
			driver = drv
		}
		gpus = append(gpus, gpu)
	}
	if err := checkUnique(gpus); err != nil {
		return nil, "", fmt.Errorf("nvidia-smi output: %w", err)
	}
	slices.SortFunc(gpus, func(a, b GPU) int { return a.Index - b.Index })
	return gpus, driver, nil
}

// parseRow parses one CSV row into a GPU and the driver version.
func parseRow(line string) (GPU, string, error) {
	f := strings.Split(line, ",")
	if len(f) != len(queryFields) {
		return GPU{}, "", fmt.Errorf("want %d comma-separated fields (%s), got %d",
			len(queryFields), strings.Join(queryFields, ","), len(f))
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	var g GPU
	var err error
	if g.Index, err = requiredInt(f[0]); err != nil {
		return GPU{}, "", fmt.Errorf("index: %w", err)
	}
	if unknown(f[1]) || !strings.HasPrefix(f[1], "GPU-") {
		return GPU{}, "", fmt.Errorf("uuid: %q is not a GPU UUID", f[1])
	}
	g.UUID = f[1]
	g.Name = text(f[2])
	if g.MemoryMiB, err = optionalInt64(f[3], "MiB", 0); err != nil {
		return GPU{}, "", fmt.Errorf("memory.total: %w", err)
	}
	if g.MemoryUsedMiB, err = optionalInt64(f[4], "MiB", 0); err != nil {
		return GPU{}, "", fmt.Errorf("memory.used: %w", err)
	}
	util, err := optionalInt64(f[5], "%", -1)
	if err != nil {
		return GPU{}, "", fmt.Errorf("utilization.gpu: %w", err)
	}
	g.UtilizationPercent = int(util)
	return g, text(f[6]), nil
}

// unknown reports whether v is one of nvidia-smi's placeholders for a value
// it cannot give, such as "[N/A]", "[Not Supported]" or "[Unknown Error]".
func unknown(v string) bool {
	return v == "" || v == "N/A" || (strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]"))
}

// text returns v, or "" if v is unknown.
func text(v string) string {
	if unknown(v) {
		return ""
	}
	return v
}

// requiredInt parses a non-negative integer that must be known.
func requiredInt(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a non-negative integer", v)
	}
	return n, nil
}

// optionalInt64 parses a non-negative integer, tolerating a trailing unit
// (in case nvidia-smi ignores nounits). Unknown values give def.
func optionalInt64(v, unit string, def int64) (int64, error) {
	if unknown(v) {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, unit)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a non-negative integer", v)
	}
	return n, nil
}

// checkUnique returns an error if two GPUs share an index or a UUID.
func checkUnique(gpus []GPU) error {
	indices := map[int]bool{}
	uuids := map[string]bool{}
	for _, g := range gpus {
		if indices[g.Index] {
			return fmt.Errorf("index %d appears twice", g.Index)
		}
		if uuids[g.UUID] {
			return fmt.Errorf("uuid %s appears twice", g.UUID)
		}
		indices[g.Index], uuids[g.UUID] = true, true
	}
	return nil
}
