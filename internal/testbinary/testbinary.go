// Package testbinary gives tests the trainyard binary: the one named by $TRAINYARD_BIN
// (`make test` sets it to what `make build` made), or one built once for the test run.
// Tests whose jobs run under real `trainyard run` supervisors need it.
package testbinary

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Main sets *binary and runs the tests; call it from TestMain. It exits the process.
func Main(m *testing.M, binary *string) {
	for _, env := range []string{"TRAINYARD_BIN", "TRAINYARD_BINARY"} {
		if *binary = os.Getenv(env); *binary != "" {
			os.Exit(m.Run())
		}
	}
	dir, err := os.MkdirTemp("", "trainyard-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "build trainyard:", err)
		os.Exit(1)
	}
	*binary = filepath.Join(dir, "trainyard")
	build := exec.Command("go", "build", "-o", *binary, "github.com/trainyard/trainyard/cmd/trainyard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build trainyard: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
