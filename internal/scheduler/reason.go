package scheduler

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// shortfall says which resources a job needs more of than is free, as in
// "needs 2 GPUs, 1 free; needs 16 CPUs, 8 free".
func shortfall(need, free amount) string {
	free = free.atLeastZero()
	var parts []string
	if need.gpus > free.gpus {
		parts = append(parts, fmt.Sprintf("needs %s, %d free", plural(need.gpus, "GPU"), free.gpus))
	}
	if need.milliCPU > free.milliCPU {
		parts = append(parts, fmt.Sprintf("needs %s, %s free", cpus(need.milliCPU), cores(free.milliCPU)))
	}
	if need.memory > free.memory {
		parts = append(parts, fmt.Sprintf("needs %s GiB of memory, %s GiB free", gib(need.memory), gib(free.memory)))
	}
	return strings.Join(parts, "; ")
}

// behind says that j fits but waits for the head, as in "waiting behind job
// llama (priority 5, submitted earlier)".
func behind(head, j Job) string {
	why := "ahead in the queue"
	switch {
	case head.Priority > j.Priority:
		why = fmt.Sprintf("higher than %d", j.Priority)
	case head.Seq < j.Seq:
		why = "submitted earlier"
	}
	return fmt.Sprintf("waiting behind job %s (priority %d, %s)", head.Label(), head.Priority, why)
}

// plural returns "1 GPU", "2 GPUs" and the like.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// cpus returns millicores as "1 CPU", "16 CPUs", "1.5 CPUs".
func cpus(milli int64) string {
	if milli == 1000 {
		return "1 CPU"
	}
	return cores(milli) + " CPUs"
}

// cores returns millicores as a number of cores: "16", "1.5", "0.25".
func cores(milli int64) string {
	s := strconv.FormatInt(milli/1000, 10)
	if frac := milli % 1000; frac != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", frac), "0")
	}
	return s
}

// gib returns bytes as GiB with at most two decimals: "64", "0.5".
func gib(bytes int64) string {
	return strconv.FormatFloat(math.Round(float64(bytes)/(1<<30)*100)/100, 'f', -1, 64)
}
