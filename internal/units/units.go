// Package units writes CPU and memory quantities the way the command line shows them.
package units

import (
	"fmt"
	"strconv"
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
