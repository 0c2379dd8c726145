package jobspec

import (
	"fmt"
	"strconv"
	"strings"
)

// Workers is the value of --workers: a count, or MIN:MAX for an elastic gang.
type Workers struct {
	Min, Max int32 // Min 0: not elastic
}

// String returns the value as it is given.
func (w *Workers) String() string {
	if w.Min > 0 {
		return fmt.Sprintf("%d:%d", w.Min, w.Max)
	}
	return strconv.Itoa(int(w.Max))
}

// Set parses "N" or "MIN:MAX".
func (w *Workers) Set(v string) error {
	lo, hi, elastic := strings.Cut(v, ":")
	max, err := strconv.ParseInt(strings.TrimSpace(map[bool]string{true: hi, false: lo}[elastic]), 10, 32)
	if err != nil {
		return fmt.Errorf("want a number of workers, or MIN:MAX for an elastic gang (2:4)")
	}
	*w = Workers{Max: int32(max)}
	if !elastic {
		return nil
	}
	min, err := strconv.ParseInt(strings.TrimSpace(lo), 10, 32)
	if err != nil || min < 1 || min > max {
		return fmt.Errorf("MIN:MAX wants 1 <= MIN <= MAX (2:4)")
	}
	w.Min = int32(min)
	return nil
}

// Type names the value in --help.
func (w *Workers) Type() string { return "N|MIN:MAX" }
