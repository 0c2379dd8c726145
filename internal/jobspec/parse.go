package jobspec

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	v1 "github.com/trainyard/trainyard/api/v1alpha1"
)

// MaxFileSize is the largest job file Load reads.
const MaxFileSize = 1 << 20

// Load reads a TrainJob from a YAML (or JSON) file. Unknown fields, a wrong apiVersion or
// kind, and values of the wrong type are errors that name the field. A relative workingDir
// is taken relative to the file's folder.
func Load(path string) (*v1.TrainJob, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	job, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if wd := job.Spec.WorkingDir; wd != "" && !filepath.IsAbs(wd) && !strings.HasPrefix(wd, "~") {
		job.Spec.WorkingDir = filepath.Join(filepath.Dir(path), wd)
	}
	return job, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read job file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read job file: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("read job file: %s is a folder, not a file", path)
	}
	if st.Size() > MaxFileSize {
		return nil, fmt.Errorf("read job file: %s is %d bytes; a job file may be at most %d", path, st.Size(), MaxFileSize)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && st.Size() > 0 {
		return nil, fmt.Errorf("read job file %s: %w", path, err)
	}
	return data, nil
}

// Parse decodes a TrainJob document strictly.
func Parse(data []byte) (*v1.TrainJob, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, errors.New("the job file is empty; it needs apiVersion, kind and spec")
	}
	if n := documents(data); n > 1 {
		return nil, fmt.Errorf("the job file holds %d YAML documents; give one TrainJob per file", n)
	}
	// Strict conversion rejects duplicate keys, which YAMLToJSON would resolve silently
	// (the last one wins) before the JSON decoder could see them.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", trimYAMLError(err))
	}
	if string(js) == "null" {
		return nil, errors.New("the job file is empty; it needs apiVersion, kind and spec")
	}
	if strings.HasPrefix(strings.TrimSpace(string(js)), "[") {
		return nil, errors.New("the job file must be a mapping with apiVersion, kind and spec, not a list or a scalar")
	}
	if !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
		return nil, errors.New("the job file must be a mapping with apiVersion, kind and spec")
	}
	if js, err = elasticWorkers(js); err != nil {
		return nil, err
	}
	if js, err = scalarStrings(data, js); err != nil {
		return nil, err
	}
	var job v1.TrainJob
	strict, err := json.UnmarshalStrict(js, &job, json.DisallowDuplicateFields, json.DisallowUnknownFields)
	if err != nil {
		if msg := quantityError(js); msg != "" {
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("wrong type: %s", trimJSONError(err))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return nil, errors.New(strings.Join(msgs, "; "))
	}
	if job.APIVersion != v1.APIVersion {
		return nil, fmt.Errorf("apiVersion: must be %q, got %q", v1.APIVersion, job.APIVersion)
	}
	if job.Kind != v1.Kind {
		return nil, fmt.Errorf("kind: must be %q, got %q", v1.Kind, job.Kind)
	}
	return &job, nil
}

// trimYAMLError drops the converter's prefix and puts the strict decoder's list
// ("yaml: unmarshal errors:\n  line 5: key \"workers\" already set in map") on one line.
// documents counts the YAML documents in data that hold more than comments.
func documents(data []byte) int {
	n := 0
	for _, doc := range regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`).Split(string(data), -1) {
		for _, line := range strings.Split(doc, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				n++
				break
			}
		}
	}
	return n
}

func trimYAMLError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if list, ok := strings.CutPrefix(msg, "yaml: unmarshal errors:\n"); ok {
		lines := strings.Split(list, "\n")
		for i, l := range lines {
			lines[i] = "yaml: " + strings.TrimSpace(l)
		}
		msg = strings.Join(lines, "; ")
	}
	return errors.New(msg)
}

// quantityError names the resource whose quantity does not parse, which the decoder's own
// error ("quantities must match the regular expression ...") does not; it returns "" when
// the quantities are fine.
func quantityError(js []byte) string {
	var doc struct {
		Spec struct {
			Resources map[string]stdjson.RawMessage `json:"resources"`
		} `json:"spec"`
	}
	if stdjson.Unmarshal(js, &doc) != nil {
		return ""
	}
	for _, name := range []string{"cpu", "memory"} {
		raw, ok := doc.Spec.Resources[name]
		if !ok {
			continue
		}
		var q resource.Quantity
		if q.UnmarshalJSON(raw) != nil {
			return fmt.Sprintf("spec.resources.%s: %s is not a quantity (examples: 4, 500m, 8Gi)", name, raw)
		}
	}
	return ""
}

// trimJSONError rewrites "json: cannot unmarshal string into Go struct field
// TrainJobSpec.spec.workers of type int32" as "spec.workers: expected int32, got string".
func trimJSONError(err error) string {
	msg := err.Error()
	const into, field, ofType = "json: cannot unmarshal ", " into Go struct field ", " of type "
	if !strings.HasPrefix(msg, into) {
		return msg
	}
	rest := strings.TrimPrefix(msg, into)
	got, rest, ok := strings.Cut(rest, field)
	if !ok {
		return msg
	}
	path, typ, ok := strings.Cut(rest, ofType)
	if !ok {
		return msg
	}
	if _, after, found := strings.Cut(path, "."); found {
		path = after
	}
	return fmt.Sprintf("%s: expected %s, got %s", path, typ, got)
}
