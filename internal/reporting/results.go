package reporting

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
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

// Results appends a run's results to progress.csv and result.json.
type Results struct {
	dir     string
	columns []string // metric columns of progress.csv, in order
	rows    []Result
	stale   bool // progress.csv is to be rewritten whole from rows at the next Append

	// The files stay open for appending between reports, which come often.
	jsonFile, csvFile *os.File
}

// OpenResults reads the results a run folder already holds (a continued run appends).
func OpenResults(dir string) (*Results, error) {
	rows, err := ReadResults(dir)
	if err != nil {
		return nil, err
	}
	if err := endLine(filepath.Join(dir, ResultFile)); err != nil {
		return nil, err
	}
	// progress.csv may lack the last rows, or end in a cut one, after a crash.
	r := &Results{dir: dir, rows: rows, stale: true}
	for _, row := range rows {
		r.addColumns(row.Metrics)
	}
	return r, nil
}

// Last returns the last result, if any.
func (r *Results) Last() (Result, bool) {
	if len(r.rows) == 0 {
		return Result{}, false
	}
	return r.rows[len(r.rows)-1], true
}

// Append records one result. A metric seen for the first time adds a column to
// progress.csv, which is then rewritten whole.
func (r *Results) Append(res Result) error {
	r.rows = append(r.rows, res)
	line, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := appendTo(&r.jsonFile, filepath.Join(r.dir, ResultFile), append(line, '\n')); err != nil {
		return err
	}
	if r.addColumns(res.Metrics) || r.stale {
		return r.rewriteCSV()
	}
	return r.appendCSV(res)
}

func (r *Results) addColumns(metrics map[string]float64) bool {
	added := false
	for _, k := range slices.Sorted(maps.Keys(metrics)) {
		if !slices.Contains(r.columns, k) {
			r.columns = append(r.columns, k)
			added = true
		}
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

func (r *Results) rewriteCSV() error {
	closeFile(&r.csvFile) // the next append opens the new file
	path := filepath.Join(r.dir, ProgressFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write %s: %w", ProgressFile, err)
	}
	w := csv.NewWriter(f)
	_ = w.Write(append(slices.Clone(fixedColumns), r.columns...))
	for _, row := range r.rows {
		_ = w.Write(r.csvRow(row))
	}
	w.Flush()
	err = errors.Join(w.Error(), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", ProgressFile, err)
	}
	r.stale = false
	return nil
}

func (r *Results) appendCSV(res Result) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(r.csvRow(res))
	w.Flush()
	return appendTo(&r.csvFile, filepath.Join(r.dir, ProgressFile), buf.Bytes())
}

// Close closes the results files.
func (r *Results) Close() error {
	return errors.Join(closeFile(&r.jsonFile), closeFile(&r.csvFile))
}

// appendTo appends data to the file *f, opening it (path) first if it is not open. After
// a failure the file is closed, so the next append opens it again.
func appendTo(f **os.File, path string, data []byte) error {
	if *f == nil {
		opened, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("append to %s: %w", filepath.Base(path), err)
		}
		*f = opened
	}
	if _, err := (*f).Write(data); err != nil {
		closeFile(f)
		return fmt.Errorf("append to %s: %w", filepath.Base(path), err)
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

// endLine ends the file's last line if a crash cut it short, so that the next line
// appended is a line of its own (ReadResults skips the cut one).
func endLine(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	last := []byte{0}
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if last[0] == '\n' {
		return nil
	}
	if _, err := f.WriteAt([]byte{'\n'}, fi.Size()); err != nil {
		return fmt.Errorf("append to %s: %w", filepath.Base(path), err)
	}
	return nil
}

// ReadResults reads result.json of a run folder; a folder without one has no results. A
// last line cut short by a crash is ignored.
func ReadResults(dir string) ([]Result, error) {
	f, err := os.Open(filepath.Join(dir, ResultFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	defer f.Close()
	var rows []Result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue // a line cut short by a crash
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return rows, fmt.Errorf("read results: %w", err)
	}
	return rows, nil
}
