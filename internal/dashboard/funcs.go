package dashboard

import (
	"fmt"
	"html/template"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/client"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"age":     age,
	"clock":   func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
	"gpus":    gpuList,
	"metrics": metricsText,
	"lower":   strings.ToLower,
	// pathseg escapes a job's ID as one segment of a path (a '/', '?' or ',' in it stays
	// part of it): every link to a job uses it.
	"pathseg":  url.PathEscape,
	"duration": durationOf,
	"workers": func(j client.Job) string {
		if j.Resources == nil || j.Workers == 0 {
			return "-"
		}
		out := strconv.Itoa(j.Workers)
		if j.Resources.GPU > 0 {
			out = fmt.Sprintf("%d × %d GPU", j.Workers, j.Resources.GPU)
		}
		if g := j.Gang; g != nil { // the gang its process leased (a Ray Train driver's)
			out += fmt.Sprintf(" + a gang of %d", g.Workers)
		}
		return out
	},
	"deref": func(p *int) string {
		if p == nil {
			return "-"
		}
		return strconv.Itoa(*p)
	},
	"itoa":     strconv.Itoa,
	"progress": progressOf,
	"deref64":  func(p *float64) string { return strconv.FormatFloat(*p, 'g', 6, 64) },
	"bytes":    byteSize,
	"mib":      mib,
	"cores":    func(milli int64) string { return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64) },
	// last returns the last of a list of names ("" for none).
	"last": func(names []string) string {
		if len(names) == 0 {
			return ""
		}
		return names[len(names)-1]
	},
}

// durationOf writes how long a job ran: from start to end, or to now while it runs; "-"
// before it started.
func durationOf(start, end *time.Time) string {
	if start == nil {
		return "-"
	}
	stop := time.Now()
	if end != nil {
		stop = *end
	}
	return stop.Sub(*start).Round(time.Second).String()
}

// age writes how long ago t was: 5s, 3m, 2h, 4d.
func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// gpuList writes GPU indices per worker: "0,1 | 2,3".
func gpuList(gpus [][]int) string {
	var parts []string
	for _, w := range gpus {
		if len(w) == 0 {
			continue
		}
		var ids []string
		for _, g := range w {
			ids = append(ids, strconv.Itoa(g))
		}
		parts = append(parts, strings.Join(ids, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " | ")
}

// metricsText writes metrics sorted by name: "acc=0.91 loss=0.25".
func metricsText(m client.Metrics) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strconv.FormatFloat(m[k], 'g', 5, 64))
	}
	return strings.Join(parts, " ")
}

// TotalMetric is the metric a job reports to say how many iterations it runs in all:
// the job list then shows how far it is and when it should end.
const TotalMetric = "total_iterations"

// progress is how far a job that reports TotalMetric is.
type progress struct {
	Percent int    // 0 to 100
	ETA     string // "4m10s left", "" when not known
}

// progressOf reads a result's progress; nil without TotalMetric.
func progressOf(r *client.Result) *progress {
	if r == nil {
		return nil
	}
	total, ok := r.Metrics[TotalMetric]
	if !ok || total <= 0 || r.Iteration <= 0 {
		return nil
	}
	p := &progress{Percent: int(min(100, 100*float64(r.Iteration)/total))}
	if left := total - float64(r.Iteration); left > 0 && r.TimeTotalS > 0 {
		per := r.TimeTotalS / float64(r.Iteration)
		p.ETA = time.Duration(left*per*float64(time.Second)).Round(time.Second).String() + " left"
	}
	return p
}

// byteSize writes a size in B, KiB, MiB or GiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
