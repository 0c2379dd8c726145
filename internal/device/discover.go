package device

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"
)

// DefaultTimeout is how long discovery waits for nvidia-smi by default.
// nvidia-smi can hang when a GPU is in a bad state.
const DefaultTimeout = 10 * time.Second

// Messages by which nvidia-smi says there is nothing to discover.
const (
	msgNoDriver  = "couldn't communicate with the NVIDIA driver"
	msgNoDevices = "No devices were found"
)

// Options configures [DiscoverWith].
type Options struct {
	// NvidiaSMI is the path of the nvidia-smi binary; if empty,
	// "nvidia-smi" is looked up on PATH.
	NvidiaSMI string
	// Timeout bounds one run of nvidia-smi; if zero, DefaultTimeout.
	Timeout time.Duration
}

// Discover finds this machine's NVIDIA GPUs with nvidia-smi from PATH. It
// never fails just because there is no GPU or no driver: then it returns an
// empty inventory whose Source says why. It returns an error only when the
// driver is there but fails or answers garbage.
func Discover(ctx context.Context) (Inventory, error) {
	return DiscoverWith(ctx, Options{})
}

// DiscoverWith is [Discover] with options.
func DiscoverWith(ctx context.Context, opts Options) (Inventory, error) {
	path, why, err := findSMI(opts.NvidiaSMI)
	if err != nil || why != "" {
		return none(why), err
	}
	out, err := runSMI(ctx, path, opts.timeout())
	if err != nil {
		return classifyFailure(path, out, err)
	}
	if strings.TrimSpace(out) == msgNoDevices {
		return none("nvidia-smi (NVML) found no GPU"), nil
	}
	gpus, driver, err := parseQuery(out)
	if err != nil {
		return Inventory{}, fmt.Errorf("discover GPUs with %s: %w", path, err)
	}
	if len(gpus) == 0 {
		return none("nvidia-smi (NVML) found no GPU"), nil
	}
	return Inventory{GPUs: gpus, DriverVersion: driver, Source: sourceNVML}, nil
}

// timeout returns the configured timeout or DefaultTimeout.
func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// findSMI returns the nvidia-smi path to run, or, when there is none, why
// not. It fails only for errors other than the binary being absent.
func findSMI(explicit string) (path, why string, err error) {
	if explicit == "" {
		path, err := exec.LookPath("nvidia-smi")
		if errors.Is(err, exec.ErrNotFound) {
			return "", "no NVIDIA driver: nvidia-smi not found in PATH", nil
		}
		if err != nil {
			return "", "", fmt.Errorf("look up nvidia-smi: %w", err)
		}
		return path, "", nil
	}
	_, err = os.Stat(explicit)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Sprintf("no NVIDIA driver: %s does not exist", explicit), nil
	}
	if err != nil {
		return "", "", fmt.Errorf("look up nvidia-smi: %w", err)
	}
	return explicit, "", nil
}

// runSMI runs the nvidia-smi query and returns its stdout and stderr
// together (nvidia-smi prints its errors on stdout).
func runSMI(parent context.Context, path string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path,
		"--query-gpu="+strings.Join(queryFields, ","),
		"--format=csv,noheader,nounits")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second // do not wait for children holding the pipes
	err := cmd.Run()
	switch {
	case parent.Err() != nil:
		err = parent.Err()
	case ctx.Err() != nil:
		err = fmt.Errorf("no answer within %s: %w", timeout, ctx.Err())
	}
	return stdout.String() + stderr.String(), err
}

// classifyFailure turns a failed nvidia-smi run into an empty inventory when
// nvidia-smi says there is no driver or no GPU, and into an error otherwise.
func classifyFailure(path, out string, runErr error) (Inventory, error) {
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) {
		switch msg := firstLine(out); {
		case strings.Contains(out, msgNoDriver):
			return none("no NVIDIA driver: nvidia-smi: " + lineWith(out, msgNoDriver)), nil
		case strings.Contains(out, msgNoDevices):
			return none("nvidia-smi (NVML) found no GPU"), nil
		case msg != "":
			runErr = fmt.Errorf("%w: %s", runErr, msg)
		}
	}
	return Inventory{}, fmt.Errorf("discover GPUs with %s: %w", path, runErr)
}

// firstLine returns the first non-blank line of s, trimmed.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// lineWith returns the first line of s that contains sub, trimmed.
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
