package reporting

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trainyard/trainyard/internal/checkpoint"
)

// Every rank may hand over a checkpoint folder with a report, as in Ray Train 2.7 and later
// (StorageContext.persist_current_checkpoint: every worker uploads its files into the same
// checkpoint_NNNNNN of that report, which is registered once all workers reported): the
// folders of the same step (a rank's n-th report of the attempt) are merged into one
// checkpoint, committed once every rank of this machine has made that report. This is how
// sharded checkpoints (FSDP, DeepSpeed, torch.distributed.checkpoint) are saved; a rank
// with nothing to add passes no folder, or an empty one.

// shardGroup is the checkpoint of one step while its ranks hand over their folders.
type shardGroup struct {
	step    int
	name    string
	index   int
	shards  map[int]*checkpoint.Taken // by rank
	metrics map[string]float64        // rank 0's for this step, once it reported it
	time    time.Time                 // the earliest report of the step known
}

// ranksOf returns the ranks whose reports come to this session: opts' ranks, else every
// rank of the gang.
func ranksOf(spec interface{ WorldSize() int }, local []int) []int {
	if len(local) > 0 {
		return slices.Sorted(slices.Values(local))
	}
	out := make([]int, spec.WorldSize())
	for i := range out {
		out[i] = i
	}
	return out
}

// handOver takes rank's checkpoint folder src for its report of step, into the step's
// checkpoint, and returns that checkpoint's name. s.mu is held.
func (s *Session) handOver(rank, step int, src string, now time.Time) (string, error) {
	if !slices.Contains(s.here, rank) {
		return "", fmt.Errorf("rank %d is not a rank of this gang (ranks %s): its checkpoint is not kept", rank, rankList(s.here))
	}
	g := s.groups[step]
	if g == nil {
		for other := range s.groups {
			if other > step {
				return "", fmt.Errorf("rank %d passed a checkpoint with its report %d after another rank's report %d "+
					"carried one: every rank reports at the same points, and those of a checkpoint carry their folders", rank, step, other)
			}
		}
	}
	t, err := s.store.Take(src)
	if err != nil {
		return "", err
	}
	if g == nil {
		g = &shardGroup{step: step, shards: map[int]*checkpoint.Taken{}, time: now}
		g.name, g.index = s.committer.Reserve()
		if s.rank0.step == step {
			g.metrics, g.time = s.rank0.metrics, s.rank0.at
		}
		s.groups[step] = g
	}
	g.shards[rank] = t
	return g.name, nil
}

// commitReady submits, in step order, the checkpoints every rank of this machine has made
// the report of. s.mu is held.
func (s *Session) commitReady() error {
	for _, step := range slices.Sorted(maps.Keys(s.groups)) {
		if s.missing(step) != nil {
			return nil
		}
		if err := s.submit(s.groups[step]); err != nil {
			return err
		}
	}
	return nil
}

// missing lists the ranks of this machine that have not yet made their report of step.
func (s *Session) missing(step int) []int {
	var out []int
	for _, r := range s.here {
		if s.ranks[r] < step {
			out = append(out, r)
		}
	}
	return out
}

// submit hands g to the committer, its folders in rank order (the lowest rank's file wins
// a collision). s.mu is held.
func (s *Session) submit(g *shardGroup) error {
	delete(s.groups, g.step)
	ranks := slices.Sorted(maps.Keys(g.shards))
	shards := make([]*checkpoint.Taken, len(ranks))
	for i, r := range ranks {
		shards[i] = g.shards[r]
	}
	var reporters []int
	for _, r := range s.here {
		if s.ranks[r] >= g.step {
			reporters = append(reporters, r)
		}
	}
	meta := checkpoint.Meta{Iteration: s.base + g.step, Attempt: s.attempt, Rank: ranks[0], Metrics: g.metrics, Time: g.time,
		Reporters: reporters}
	return s.committer.SubmitMerged(g.index, shards, meta)
}

// endGroups settles the checkpoints still waiting for ranks when an attempt's processes
// are gone. One whose missing ranks never report is committed: a script where only rank 0
// does. One that a rank known to report never completed is dropped with a notice, as a
// checkpoint without that rank's files would be incomplete (Ray never registers it
// either): a rank that reported in this attempt, in an earlier attempt of this run, or
// in the checkpoint this attempt resumed from (a rank that failed before its first report
// of a resumed attempt). s.mu is held.
func (s *Session) endGroups() {
	late := false
	for _, step := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[step]
		var reported []int
		for _, r := range s.missing(step) {
			if s.ranks[r] > 0 || s.reporters[r] {
				reported = append(reported, r)
			}
		}
		if len(reported) == 0 {
			late = true
			if err := s.submit(g); err != nil {
				s.notice("the checkpoint of iteration %d could not be committed: %v", s.base+step, err)
			}
			continue
		}
		delete(s.groups, step)
		for _, t := range g.shards {
			if err := s.store.Discard(t); err != nil {
				s.logger.Warn("remove an incomplete checkpoint's folder", "err", err)
			}
		}
		s.notice("warning: the checkpoint of iteration %d (%s) is not kept: rank(s) %s never made that report, "+
			"so their part of it is missing", s.base+step, g.name, rankList(reported))
	}
	if late {
		s.warnOnce("late", "warning: some ranks never called report(), so checkpoints were committed only when their processes ended; "+
			"call report() on every rank, at the same points (as Ray Train requires)")
	}
}

// collided tells the user, once a run, that several ranks wrote the same file into a
// checkpoint, and which copy was kept. It runs in the committer's goroutine, which
// Report may be waiting for with s.mu held, so it does not take s.mu.
func (s *Session) collided(name string, collisions []checkpoint.Collision) {
	if s.collisionTold.Swap(true) {
		return
	}
	s.notice("%s: several ranks wrote %s (%d file(s) in all); the lowest rank's copy is kept, "+
		"as for DDP replicas that each save the same model (name each rank's shard apart to keep them all)",
		name, collisions[0].Path, len(collisions))
}

// rankList writes ranks as "1, 2, 3".
func rankList(ranks []int) string {
	parts := make([]string, len(ranks))
	for i, r := range ranks {
		parts[i] = strconv.Itoa(r)
	}
	return strings.Join(parts, ", ")
}
