package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Policy says which committed checkpoints Retain keeps. The latest checkpoint is always
// kept, as a resumed run needs it.
type Policy struct {
	// Keep is how many checkpoints to keep; 0 keeps all.
	Keep int
	// Score is the metric to rank checkpoints by; "" ranks them by recency.
	Score string
	// Order is "max" (the default) when higher scores are better, "min" when lower ones are.
	Order string
}

// ScoreError reports checkpoints whose reports lack the Policy's score metric; Retain keeps
// them.
type ScoreError struct {
	Metric string   // the policy's score
	Have   []string // the metrics those checkpoints have
	Kept   []string // the checkpoints lacking it
}

// Error says which metric is missing and which ones exist.
func (e *ScoreError) Error() string {
	have := "they have no metrics"
	if len(e.Have) > 0 {
		have = "they have: " + strings.Join(e.Have, ", ")
	}
	kept := strings.Join(e.Kept, ", ")
	if n := len(e.Kept); n > 4 {
		kept = fmt.Sprintf("%s, ... %s (%d in all)", strings.Join(e.Kept[:3], ", "), e.Kept[n-1], n)
	}
	return fmt.Sprintf("--checkpoint-score %s: reports have no metric %q (%s); keeping %s",
		e.Metric, e.Metric, have, kept)
}

// Validate checks the policy's values.
func (p Policy) Validate() error {
	if p.Keep < 0 {
		return fmt.Errorf("checkpoints to keep must be 0 (all) or more, got %d", p.Keep)
	}
	if p.Order != "" && p.Order != "max" && p.Order != "min" {
		return fmt.Errorf("checkpoint score order must be \"max\" or \"min\", got %q", p.Order)
	}
	return nil
}

// Retain deletes the committed checkpoints that the policy does not keep and returns their
// names. Each is first renamed into .staging and then removed, so a crash never leaves a
// half-deleted checkpoint in place. Checkpoints without the policy's score metric are kept,
// and the returned error then includes a *ScoreError. Checkpoints without a readable
// manifest are left alone.
func (s *Store) Retain(p Policy) ([]string, error) {
	if err := s.writable("retain checkpoints"); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.Keep == 0 {
		return nil, nil
	}
	infos, err := s.List()
	if err != nil {
		return nil, fmt.Errorf("retain checkpoints: %w", err)
	}
	keep, warn := p.keep(infos)
	keep[s.protected(infos)] = true
	var drop []string
	for _, in := range infos {
		if !keep[in.Name] {
			drop = append(drop, in.Name)
		}
	}
	deleted, err := s.remove(drop)
	return deleted, errors.Join(err, warn)
}

// Drop returns the names of the checkpoints infos (in index order, as List gives them)
// that the policy does not keep: never the last one. A mirror applies it to the
// checkpoints of a run in a bucket.
func (p Policy) Drop(infos []Info) []string {
	if p.Keep == 0 || len(infos) == 0 {
		return nil
	}
	keep, _ := p.keep(infos)
	keep[infos[len(infos)-1].Name] = true
	var drop []string
	for _, in := range infos {
		if !keep[in.Name] {
			drop = append(drop, in.Name)
		}
	}
	return drop
}

// keep returns the names of the checkpoints the policy keeps, apart from the latest.
func (p Policy) keep(infos []Info) (map[string]bool, error) {
	keep := make(map[string]bool)
	if p.Score == "" {
		for _, in := range infos[max(0, len(infos)-p.Keep):] {
			keep[in.Name] = true
		}
		return keep, nil
	}
	var ranked []Info
	missing := &ScoreError{Metric: p.Score}
	have := make(map[string]bool)
	for _, in := range infos {
		if _, ok := in.Manifest.Meta.Metrics[p.Score]; ok {
			ranked = append(ranked, in)
			continue
		}
		keep[in.Name] = true
		missing.Kept = append(missing.Kept, in.Name)
		for k := range in.Manifest.Meta.Metrics {
			have[k] = true
		}
	}
	slices.SortStableFunc(ranked, func(a, b Info) int { return p.compare(a, b) })
	for _, in := range ranked[:min(p.Keep, len(ranked))] {
		keep[in.Name] = true
	}
	if len(missing.Kept) == 0 {
		return keep, nil
	}
	missing.Have = slices.Sorted(maps.Keys(have))
	return keep, missing
}

// compare orders a before b when a's score is better; NaN is worst, ties go to the newer.
func (p Policy) compare(a, b Info) int {
	x, y := a.Manifest.Meta.Metrics[p.Score], b.Manifest.Meta.Metrics[p.Score]
	switch {
	case math.IsNaN(x) || math.IsNaN(y):
		if c := cmp.Compare(boolInt(math.IsNaN(x)), boolInt(math.IsNaN(y))); c != 0 {
			return c
		}
	case x != y:
		if p.Order == "min" {
			return cmp.Compare(x, y)
		}
		return cmp.Compare(y, x)
	}
	return b.Index - a.Index
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// protected returns the latest checkpoint, which Retain never deletes: the newest whose
// files have the sizes of its manifest (a check that reads no content), or the newest of
// all when none has.
func (s *Store) protected(infos []Info) string {
	for i := len(infos) - 1; i >= 0; i-- {
		if s.layoutOK(infos[i]) {
			return infos[i].Name
		}
	}
	if len(infos) == 0 {
		return ""
	}
	return infos[len(infos)-1].Name
}

// layoutOK reports whether the checkpoint in has the files of its manifest, by size.
func (s *Store) layoutOK(in Info) bool {
	d, err := s.open(in.Name)
	if err != nil {
		return false
	}
	defer d.Close()
	return checkLayout(d, in.Manifest) == nil
}

// remove deletes the named checkpoints: all are renamed into .staging, the run folder is
// synced, then they are removed.
func (s *Store) remove(names []string) ([]string, error) {
	staging, err := s.currentStaging()
	if err != nil {
		return nil, fmt.Errorf("delete checkpoints: %w", err)
	}
	var moved, deleted []string
	var errs []error
	for _, name := range names {
		to := name + ".deleted-" + randomSuffix()
		if err := rename(s.run, name, staging, to); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", name, err))
			continue
		}
		moved = append(moved, to)
		deleted = append(deleted, name)
	}
	if len(moved) > 0 {
		if err := s.run.sync(); err != nil {
			errs = append(errs, fmt.Errorf("delete checkpoints: sync run folder: %w", err))
		}
	}
	for i, name := range moved {
		if err := staging.root.RemoveAll(name); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w (the next Open removes the rest)", deleted[i], err))
		}
		s.logger.Info("deleted checkpoint", "checkpoint", deleted[i])
	}
	return deleted, errors.Join(errs...)
}
