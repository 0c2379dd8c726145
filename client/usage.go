package client

import (
	"strconv"
	"strings"
)

// GPUList reads a list of GPU indices as a rank records them ("0,1"); what is not a
// number is left out.
func GPUList(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// GPUUse is what a set of GPUs is doing: the mean utilization and the memory used and in
// all, summed.
type GPUUse struct {
	Percent    float64 `json:"percent"`
	UsedBytes  int64   `json:"memoryUsedBytes"`
	TotalBytes int64   `json:"memoryTotalBytes"`
}

// UseOf returns the use of the GPUs gpus from a node's utilization, and false when none
// of them is measured.
func UseOf(gpus []int, util []GPUUtilization) (GPUUse, bool) {
	var u GPUUse
	n := 0
	for _, g := range gpus {
		for _, m := range util {
			if m.Index == g {
				u.Percent += m.Percent
				u.UsedBytes += m.MemoryUsedBytes
				u.TotalBytes += m.MemoryTotalBytes
				n++
			}
		}
	}
	if n == 0 {
		return GPUUse{}, false
	}
	u.Percent /= float64(n)
	return u, true
}
