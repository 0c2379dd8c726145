package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
)

// loadAverage returns the first three fields of /proc/loadavg.
func loadAverage() string {
	f := strings.Fields(readOr("/proc/loadavg", "? ? ?"))
	return strings.Join(f[:min(3, len(f))], " ")
}

// version returns the first line of `trainyard version`.
func version(trainyard string) string {
	out, err := exec.Command(trainyard, "version").Output()
	if err != nil {
		return "trainyard version: " + err.Error()
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// readOr returns the content of the file at path, or def.
func readOr(path, def string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	return string(data)
}

// shellLine joins argv into a line a shell would split back into argv.
func shellLine(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
