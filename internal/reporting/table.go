package reporting

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"text/tabwriter"
)

// WriteTable prints results as a table: iteration, the metrics, the checkpoint, the time
// of the iteration and the total time. With more than maxRows rows (0: no limit) the
// middle ones are left out.
func WriteTable(w io.Writer, rows []Result, maxRows int) error {
	shown, skipped := elide(rows, maxRows)
	return WriteElided(w, shown, skipped)
}

// WriteElided prints rows as WriteTable does, with a line that says skipped more results
// lie between the first and the second half of rows (as ReadElided returns them).
func WriteElided(w io.Writer, shown []Result, skipped int) error {
	if len(shown) == 0 {
		_, err := fmt.Fprintln(w, "No results: the job never called trainyard.report().")
		return err
	}
	metrics := metricNames(shown)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	header := append(append([]string{"iter"}, metrics...), "checkpoint", "iter time", "total time", "")
	fmt.Fprintln(tw, tabbed(header))
	for i, r := range shown {
		if skipped > 0 && i == len(shown)/2 {
			// A cell in every column: a shorter line would end tabwriter's column blocks,
			// and the rows below would be aligned apart from those above.
			more := make([]string, len(header))
			more[0] = fmt.Sprintf("... %d more", skipped)
			fmt.Fprintln(tw, tabbed(more))
		}
		fmt.Fprintln(tw, tabbed(tableRow(r, metrics)))
	}
	return tw.Flush()
}

func tableRow(r Result, metrics []string) []string {
	row := []string{strconv.Itoa(r.Iteration)}
	for _, m := range metrics {
		v, ok := r.Metrics[m]
		if !ok {
			row = append(row, "-")
			continue
		}
		row = append(row, strconv.FormatFloat(v, 'g', 5, 64))
	}
	cp := r.Checkpoint
	if cp == "" {
		cp = "-"
	}
	return append(row, cp, fmt.Sprintf("%.1fs", r.TimeThisIterS), fmt.Sprintf("%.1fs", r.TimeTotalS), "")
}

func tabbed(cells []string) string {
	s := ""
	for _, c := range cells {
		s += c + "\t"
	}
	return s
}

func metricNames(rows []Result) []string {
	set := map[string]bool{}
	for _, r := range rows {
		for k := range r.Metrics {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// ReadElided reads the results of a run folder as WriteTable shows them: with more than
// maxRows (0: no limit), the first and the last, maxRows in all, and how many lie between.
// It holds no more than maxRows results at a time.
func ReadElided(dir string, maxRows int) ([]Result, int, error) {
	if maxRows <= 0 {
		rows, err := ReadResults(dir)
		return rows, 0, err
	}
	head := maxRows / 2
	tail := make([]Result, 0, maxRows-head) // a ring once full
	var rows []Result
	n := 0
	err := ScanResults(dir, func(r Result) error {
		switch {
		case len(rows) < head:
			rows = append(rows, r)
		case len(tail) < cap(tail):
			tail = append(tail, r)
		default:
			tail[(n-head)%len(tail)] = r
		}
		n++
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if n <= maxRows {
		return append(rows, tail...), 0, nil
	}
	// The ring's oldest entry is where the next one would have gone.
	at := (n - head) % len(tail)
	rows = append(append(rows, tail[at:]...), tail[:at]...)
	return rows, n - maxRows, nil
}

func elide(rows []Result, maxRows int) ([]Result, int) {
	if maxRows <= 0 || len(rows) <= maxRows {
		return rows, 0
	}
	head := maxRows / 2
	tail := maxRows - head
	return append(slices.Clone(rows[:head]), rows[len(rows)-tail:]...), len(rows) - maxRows
}

// MarkGone returns rows with " (gone)" after each checkpoint that runDir no longer holds:
// deleted by the retention policy, or never committed because its commit failed.
func MarkGone(rows []Result, runDir string) []Result {
	out := slices.Clone(rows)
	for i, r := range out {
		if r.Checkpoint == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(runDir, r.Checkpoint)); err != nil {
			out[i].Checkpoint += " (gone)"
		}
	}
	return out
}
