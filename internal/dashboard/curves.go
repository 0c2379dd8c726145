package dashboard

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/trainyard/trainyard/client"
)

// MaxComparedJobs is how many jobs the compare page takes.
const MaxComparedJobs = 8

// resultsJSON answers a job's results for its curves: ?after=N for the new ones, ?max=N
// to thin them (the server's default otherwise).
func (h *Handler) resultsJSON(w http.ResponseWriter, r *http.Request, _ string) {
	var opts client.ResultOptions
	for name, dst := range map[string]*int{"after": &opts.After, "max": &opts.Max} {
		if v := r.URL.Query().Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				http.Error(w, fmt.Sprintf("%s %q: a whole number, 0 or more", name, v), http.StatusBadRequest)
				return
			}
			*dst = n
		}
	}
	list, err := h.cfg.Backend.Results(r.Context(), r.PathValue("id"), opts)
	if err != nil {
		status := http.StatusBadGateway
		if client.IsNotFound(err) {
			status = http.StatusNotFound
		}
		http.Error(w, err.Error(), status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(list)
}

// comparedJob is one job of the compare page.
type comparedJob struct {
	client.JobDetail
	Label string
}

// comparison is the compare page's data.
type comparison struct {
	Jobs    []comparedJob
	Metrics []string // the names of every job's last metrics, sorted
	Diffs   []configDiff
}

// configDiff is one setting of the jobs' specs that is not the same in all of them.
type configDiff struct {
	Key    string
	Values []string // one per job, "" where the job does not set it
}

// Value returns job i's last value of metric m, or "-".
func (c comparison) Value(i int, m string) string {
	res := c.Jobs[i].Results
	if res == nil {
		return "-"
	}
	v, ok := res.Metrics[m]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func (h *Handler) comparePage(w http.ResponseWriter, r *http.Request, session string) {
	ids := slices.Compact(r.URL.Query()["id"])
	if len(ids) < 2 || len(ids) > MaxComparedJobs {
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("Pick from 2 to %d jobs to compare (the check boxes of the job list); got %d.", MaxComparedJobs, len(ids)))
		return
	}
	var c comparison
	names := map[string]bool{}
	var specs []map[string]string
	for _, id := range ids {
		d, err := h.cfg.Backend.Get(r.Context(), id)
		if err != nil {
			h.backendError(w, r, err)
			return
		}
		c.Jobs = append(c.Jobs, comparedJob{JobDetail: d, Label: cmp.Or(d.Job.Name, d.Job.ID)})
		if d.Results != nil {
			for k := range d.Results.Metrics {
				names[k] = true
			}
		}
		flat := map[string]string{}
		if d.Spec != nil {
			if data, err := json.Marshal(d.Spec.Spec); err == nil {
				var doc any
				_ = json.Unmarshal(data, &doc)
				flatten("", doc, flat)
			}
		}
		specs = append(specs, flat)
	}
	c.Metrics = slices.Sorted(maps.Keys(names))
	c.Diffs = differences(specs)
	h.render(w, http.StatusOK, "compare.html", page{Title: "Compare", CSRF: h.sessions.csrf(session), Data: c})
}

// flatten writes a JSON document's leaves as "a.b[0].c" -> value, as text to show: a
// string as it is (not JSON-escaped: the template escapes it for HTML), "" as `""` (an
// empty value means "not set"), anything else as JSON.
func flatten(prefix string, v any, out map[string]string) {
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			flatten(key, sub, out)
		}
	case []any:
		for i, sub := range t {
			flatten(fmt.Sprintf("%s[%d]", prefix, i), sub, out)
		}
	case string:
		out[prefix] = cmp.Or(t, `""`)
	default:
		data, _ := json.Marshal(t)
		out[prefix] = string(data)
	}
}

// differences returns the keys whose values are not the same in every spec, sorted,
// leaving out the run's name (each job's own).
func differences(specs []map[string]string) []configDiff {
	keys := map[string]bool{}
	for _, s := range specs {
		for k := range s {
			keys[k] = k != "runName"
		}
	}
	var out []configDiff
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if !keys[k] {
			continue
		}
		d := configDiff{Key: k}
		same := true
		for i, s := range specs {
			d.Values = append(d.Values, s[k])
			if i > 0 && s[k] != specs[0][k] {
				same = false
			}
		}
		if !same {
			out = append(out, d)
		}
	}
	return out
}
