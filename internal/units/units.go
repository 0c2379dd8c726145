// Package units writes CPU and memory quantities, counts and durations the way the
// command line shows them.
package units

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cores writes thousandths of a core as cores: 16, 1.5.
func Cores(milli int64) string {
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
}

// BytesIEC writes a size with a binary unit and one decimal: 512Mi, 125.8Gi.
func BytesIEC(n int64) string {
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi"}
	x, i := float64(n), 0
	for x >= 1024 && i < len(units)-1 {
		x /= 1024
		i++
	}
	if i == 0 || x == float64(int64(x)) {
		return fmt.Sprintf("%d%s", int64(x), units[i])
	}
	return fmt.Sprintf("%.1f%s", x, units[i])
}

// Count writes n with its noun, plural unless n is 1: "1 GPU", "2 workers".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Duration writes d as a flag would take it, without the zero units time.Duration.String
// ends with: 10m, 1h, 1h30m, 90s stays 1m30s.
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
