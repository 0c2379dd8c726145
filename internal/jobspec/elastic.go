package jobspec

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"strconv"
)

// workersForm says how spec.workers may be written in a job file.
const workersForm = "give a number of workers (4), or the range of an elastic gang: {min: 2, max: 4} or \"2:4\""

// elasticWorkers rewrites a job file's elastic spec.workers, {min: 2, max: 4} or "2:4" as
// --workers takes it, into the TrainJob's fields: spec.workers 4 and spec.minWorkers 2.
// js is the job file as JSON; it is returned unchanged when spec.workers is a number or
// missing.
func elasticWorkers(js []byte) ([]byte, error) {
	var doc map[string]stdjson.RawMessage
	if stdjson.Unmarshal(js, &doc) != nil {
		return js, nil // the strict decoder says what is wrong
	}
	var spec map[string]stdjson.RawMessage
	if stdjson.Unmarshal(doc["spec"], &spec) != nil {
		return js, nil
	}
	raw := bytes.TrimSpace(spec["workers"])
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '"') {
		return js, nil
	}
	minW, maxW, err := parseWorkerRange(raw)
	if err != nil {
		return nil, fmt.Errorf("spec.workers: %w", err)
	}
	if _, ok := spec["minWorkers"]; ok {
		return nil, fmt.Errorf("spec.workers is a range and spec.minWorkers is set too: give one of them")
	}
	spec["workers"], spec["minWorkers"] = []byte(strconv.Itoa(int(maxW))), []byte(strconv.Itoa(int(minW)))
	if doc["spec"], err = stdjson.Marshal(spec); err != nil {
		return nil, err
	}
	return stdjson.Marshal(doc)
}

// parseWorkerRange reads {min: N, max: M} or "N:M".
func parseWorkerRange(raw []byte) (minW, maxW int32, err error) {
	if raw[0] == '"' {
		var s string
		if err := stdjson.Unmarshal(raw, &s); err != nil {
			return 0, 0, fmt.Errorf("%s", workersForm)
		}
		var w Workers
		if err := w.Set(s); err != nil {
			return 0, 0, fmt.Errorf("%q: %w", s, err)
		}
		if w.Min == 0 {
			return 0, 0, fmt.Errorf("%q is a string: %s", s, workersForm)
		}
		return w.Min, w.Max, nil
	}
	var r struct {
		Min *int32 `json:"min"`
		Max *int32 `json:"max"`
	}
	dec := stdjson.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil || r.Min == nil || r.Max == nil {
		return 0, 0, fmt.Errorf("%s (both min and max, whole numbers)", workersForm)
	}
	if *r.Min < 1 || *r.Min > *r.Max {
		return 0, 0, fmt.Errorf("{min: %d, max: %d}: min must be at least 1 and at most max", *r.Min, *r.Max)
	}
	return *r.Min, *r.Max, nil
}
