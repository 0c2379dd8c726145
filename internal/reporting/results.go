package reporting

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/filemode"
)

// File names of the results in a run folder.
const (
	ProgressFile = "progress.csv"
	ResultFile   = "result.json"
)

// Result is one iteration of the run: rank 0's report, as Ray Train records it.
type Result struct {
	Iteration     int                `json:"training_iteration"`
	Timestamp     time.Time          `json:"timestamp"`
	TimeThisIterS float64            `json:"time_this_iter_s"`
	TimeTotalS    float64            `json:"time_total_s"`
	Attempt       int                `json:"attempt"`
	Checkpoint    string             `json:"checkpoint,omitempty"`
	Metrics       map[string]float64 `json:"-"`
}

// fixedColumns come before the metrics in progress.csv.
var fixedColumns = []string{"training_iteration", "timestamp", "time_this_iter_s", "time_total_s", "attempt", "checkpoint"}

// MarshalJSON writes the metrics beside the fixed fields, as one flat object.
func (r Result) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	for k, v := range r.Metrics {
		m[k] = jsonFloat(v)
	}
	m["training_iteration"] = r.Iteration
	m["timestamp"] = r.Timestamp.UTC().Format(time.RFC3339Nano)
	m["time_this_iter_s"] = r.TimeThisIterS
	m["time_total_s"] = r.TimeTotalS
	m["attempt"] = r.Attempt
	if r.Checkpoint != "" {
		m["checkpoint"] = r.Checkpoint
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Result) UnmarshalJSON(data []byte) error {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	r.Metrics = map[string]float64{}
	for k, v := range m {
		switch k {
		case "training_iteration":
			r.Iteration = int(number(v))
		case "timestamp":
			s, _ := v.(string)
			r.Timestamp, _ = time.Parse(time.RFC3339Nano, s)
		case "time_this_iter_s":
			r.TimeThisIterS = number(v)
		case "time_total_s":
			r.TimeTotalS = number(v)
		case "attempt":
			r.Attempt = int(number(v))
		case "checkpoint":
			r.Checkpoint, _ = v.(string)
		default:
			r.Metrics[k] = number(v)
		}
	}
	return nil
}

// jsonFloat makes non-finite values representable in JSON, as the helper sends them.
func jsonFloat(v float64) any {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	return v
}

func number(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return math.NaN()
		}
		return f
	}
	return math.NaN()
}

// MaxCSVMetrics is how many metric columns progress.csv has at most: metrics first seen
// after that are only in result.json and TensorBoard.
const MaxCSVMetrics = 1024

// Results appends a run's results to result.json (JSON lines) and progress.csv. It keeps
// only what a running job needs in memory: the metric columns, the last result and the
// last checkpoint; the history is in the files (ReadResults).
//
// Both files are appended to. A metric seen for the first time adds a column to
// progress.csv: the file is then rewritten once, streamed (the rows before get an empty
// cell), so that it stays one CSV file with one header that any CSV reader takes.
type Results struct {
	dir     string   // the run folder's path, for messages
	root    *os.Root // the run folder: the files are reached through it only
	columns []string // metric columns of progress.csv, in order
	omitted string   // the first metric left out of progress.csv (MaxCSVMetrics), if any
	summary Summary
	stale   bool // progress.csv is to be rebuilt from result.json at the next Append
	ownRoot bool // root was opened by OpenResults, and Close closes it

	// The files stay open for appending between reports, which come often.
	jsonFile, csvFile *os.File
}

// Summary is what Results keeps of a run's results.
type Summary struct {
	Count      int    // how many results the run has
	Last       Result // the last one, when Count > 0
	Checkpoint string // the checkpoint of the last result that carried one, or ""
}

// add counts a result in.
func (s *Summary) add(res Result) {
	s.Count++
	s.Last = res
	if res.Checkpoint != "" {
		s.Checkpoint = res.Checkpoint
	}
}

// OpenResults reads the summary and the columns of the results a run folder already holds
// (a continued run appends), without holding the results themselves. It opens dir once
// (see OpenResultsIn).
func OpenResults(dir string) (*Results, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open results: %w", err)
	}
	r, err := OpenResultsIn(root)
	if err != nil {
		root.Close()
		return nil, err
	}
	r.ownRoot = true
	return r, nil
}

// OpenResultsIn is OpenResults of the run folder root, whose Name is its path: the files
// are read and written through root only, so a folder put in the run folder's place
// while the run runs is never written to. Close leaves root open.
func OpenResultsIn(root *os.Root) (*Results, error) {
	r := &Results{dir: filepath.Clean(root.Name()), root: root}
	err := scanResultsIn(root, func(res Result) error {
		r.summary.add(res)
		r.addColumns(res.Metrics)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := endLine(root, ResultFile); err != nil {
		return nil, err
	}
	// progress.csv may lack the last rows, or end in a cut one, after a crash.
	r.stale = true
	return r, nil
}

// Last returns the last result, if any.
func (r *Results) Last() (Result, bool) {
	return r.summary.Last, r.summary.Count > 0
}

// Summary returns the count of results, the last one and the last checkpoint.
func (r *Results) Summary() Summary { return r.summary }

// Omitted returns the first metric left out of progress.csv because it already has
// MaxCSVMetrics metric columns, or "".
func (r *Results) Omitted() string { return r.omitted }

// Append records one result.
func (r *Results) Append(res Result) error {
	line, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := r.appendTo(&r.jsonFile, ResultFile, append(line, '\n')); err != nil {
		return err
	}
	r.summary.add(res)
	added := r.addColumns(res.Metrics)
	switch {
	case r.stale:
		return r.rebuildCSV()
	case added > 0:
		if err := r.widenCSV(added); err != nil {
			return err
		}
	}
	return r.appendCSV(res)
}

// addColumns adds the metrics not yet in progress.csv's columns, up to MaxCSVMetrics, and
// returns how many it added.
func (r *Results) addColumns(metrics map[string]float64) int {
	added := 0
	for _, k := range slices.Sorted(maps.Keys(metrics)) {
		if slices.Contains(r.columns, k) {
			continue
		}
		if len(r.columns) == MaxCSVMetrics {
			if r.omitted == "" {
				r.omitted = k
			}
			continue
		}
		r.columns = append(r.columns, k)
		added++
	}
	return added
}

func (r *Results) csvRow(res Result) []string {
	row := []string{strconv.Itoa(res.Iteration), strconv.FormatFloat(float64(res.Timestamp.UnixNano())/1e9, 'f', 3, 64),
		fmtFloat(res.TimeThisIterS), fmtFloat(res.TimeTotalS), strconv.Itoa(res.Attempt), res.Checkpoint}
	for _, c := range r.columns {
		v, ok := res.Metrics[c]
		if !ok {
			row = append(row, "")
			continue
		}
		row = append(row, strconv.FormatFloat(v, 'g', -1, 64))
	}
	return row
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// rebuildCSV writes progress.csv anew from result.json, a result at a time.
func (r *Results) rebuildCSV() error {
	err := r.replaceCSV(func(w *csv.Writer) error {
		return scanResultsIn(r.root, func(res Result) error { return w.Write(r.csvRow(res)) })
	})
	if err == nil {
		r.stale = false
	}
	return err
}

// widenCSV rewrites progress.csv with the columns added last, a row at a time: the header
// gets their names, and every row an empty cell for each.
func (r *Results) widenCSV(added int) error {
	var old io.Reader = strings.NewReader("") // removed under us: the header alone
	f, err := r.root.Open(ProgressFile)
	switch {
	case err == nil:
		defer f.Close()
		old = bufio.NewReaderSize(f, 64<<10)
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", ProgressFile, err)
	}
	return r.replaceCSV(func(w *csv.Writer) error {
		cr := csv.NewReader(old)
		cr.FieldsPerRecord, cr.ReuseRecord = -1, true
		if _, err := cr.Read(); err != nil && !errors.Is(err, io.EOF) { // the old header
			return fmt.Errorf("read %s: %w", ProgressFile, err)
		}
		for {
			rec, err := cr.Read()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", ProgressFile, err)
			}
			for range added {
				rec = append(rec, "")
			}
			if err := w.Write(rec); err != nil {
				return err
			}
		}
	})
}

// replaceCSV writes progress.csv anew: the header of the current columns, then the rows
// that rows writes; the new file replaces the old one once complete.
func (r *Results) replaceCSV(rows func(w *csv.Writer) error) error {
	closeFile(&r.csvFile) // the next append opens the new file
	tmp := ProgressFile + ".tmp"
	_, mode := filemode.In(r.root)
	f, err := r.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", ProgressFile, err)
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	w := csv.NewWriter(bw)
	err = w.Write(append(slices.Clone(fixedColumns), r.columns...))
	if err == nil {
		err = rows(w)
	}
	w.Flush()
	err = errors.Join(err, w.Error(), bw.Flush(), f.Close())
	if err == nil {
		err = r.root.Rename(tmp, ProgressFile)
	}
	if err != nil {
		r.root.Remove(tmp)
		return fmt.Errorf("write %s: %w", ProgressFile, err)
	}
	return nil
}

func (r *Results) appendCSV(res Result) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(r.csvRow(res))
	w.Flush()
	return r.appendTo(&r.csvFile, ProgressFile, buf.Bytes())
}

// Close closes the results files (and the run folder, for OpenResults).
func (r *Results) Close() error {
	err := errors.Join(closeFile(&r.jsonFile), closeFile(&r.csvFile))
	if r.ownRoot && r.root != nil {
		err = errors.Join(err, r.root.Close())
		r.root = nil
	}
	return err
}

// appendTo appends data to the file *f, opening it (name, in the run folder) first if it
// is not open. After a failure the file is closed, so the next append opens it again.
func (r *Results) appendTo(f **os.File, name string, data []byte) error {
	if *f == nil {
		_, mode := filemode.In(r.root)
		opened, err := r.root.OpenFile(name, os.O_CREATE|os.O_APPEND|os.O_WRONLY, mode)
		if err != nil {
			return fmt.Errorf("append to %s: %w", name, err)
		}
		*f = opened
	}
	if _, err := (*f).Write(data); err != nil {
		closeFile(f)
		return fmt.Errorf("append to %s: %w", name, err)
	}
	return nil
}

func closeFile(f **os.File) error {
	if *f == nil {
		return nil
	}
	err := (*f).Close()
	*f = nil
	return err
}

// endLine ends the file name's last line if a crash cut it short, so that the next line
// appended is a line of its own (ReadResults skips the cut one).
func endLine(root *os.Root, name string) error {
	f, err := root.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	last := []byte{0}
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if last[0] == '\n' {
		return nil
	}
	if _, err := f.WriteAt([]byte{'\n'}, fi.Size()); err != nil {
		return fmt.Errorf("append to %s: %w", name, err)
	}
	return nil
}

// ReadResults reads result.json of a run folder; a folder without one has no results. A
// last line cut short by a crash is ignored. It holds every result in memory: for a long
// run, ScanResults or ReadElided.
func ReadResults(dir string) ([]Result, error) {
	var rows []Result
	err := ScanResults(dir, func(r Result) error {
		rows = append(rows, r)
		return nil
	})
	return rows, err
}

// ScanResultLines calls fn with the iteration and the JSON line of each result of
// result.json in a run folder, in order, without decoding the line (the iteration is read
// from its "training_iteration" field; a line where that fails is decoded): for readers
// that decode few of many results. The line is only valid during the call. A line cut
// short by a crash is skipped.
func ScanResultLines(dir string, fn func(iteration int, line []byte) error) error {
	return scanLines(func() (*os.File, error) { return os.Open(filepath.Join(dir, ResultFile)) }, fn)
}

// scanLines is ScanResultLines of the result.json that open opens.
func scanLines(open func() (*os.File, error), fn func(iteration int, line []byte) error) error {
	f, err := open()
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		it, ok := lineIteration(sc.Bytes())
		if !ok {
			var r Result
			if json.Unmarshal(sc.Bytes(), &r) != nil {
				continue // a line cut short by a crash
			}
			it = r.Iteration
		}
		if err := fn(it, sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	return nil
}

// iterationKey precedes a result line's iteration; a metric's name that holds it is
// escaped (\"), so it cannot match there.
var iterationKey = []byte(`"training_iteration":`)

// lineIteration reads the iteration of a whole result line written by Result.MarshalJSON.
func lineIteration(line []byte) (int, bool) {
	if len(line) == 0 || line[len(line)-1] != '}' {
		return 0, false
	}
	i := bytes.Index(line, iterationKey)
	if i < 0 {
		return 0, false
	}
	rest := line[i+len(iterationKey):]
	n, end := 0, 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' && end < 10 {
		n = n*10 + int(rest[end]-'0')
		end++
	}
	if end == 0 || end == len(rest) || (rest[end] != ',' && rest[end] != '}') {
		return 0, false
	}
	return n, true
}

// ScanResults calls fn with each result of result.json in a run folder, in order, holding
// one at a time; it stops at fn's first error and returns it. A folder without results has
// none; a line cut short by a crash is skipped.
func ScanResults(dir string, fn func(Result) error) error {
	return ScanResultLines(dir, decoded(fn))
}

// scanResultsIn is ScanResults of the run folder root.
func scanResultsIn(root *os.Root, fn func(Result) error) error {
	return scanLines(func() (*os.File, error) { return root.Open(ResultFile) }, decoded(fn))
}

// decoded returns a line function that calls fn with each line's result.
func decoded(fn func(Result) error) func(int, []byte) error {
	return func(_ int, line []byte) error {
		var r Result
		if err := json.Unmarshal(line, &r); err != nil {
			return nil // a line cut short by a crash
		}
		return fn(r)
	}
}
