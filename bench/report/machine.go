package main

import (
	"os/exec"
	"strings"
)

// version returns the first line of `trainyard version`.
func version(trainyard string) string {
	out, err := exec.Command(trainyard, "version").Output()
	if err != nil {
		return "trainyard version: " + err.Error()
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}
