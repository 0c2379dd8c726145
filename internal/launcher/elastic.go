package launcher

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// Environment variables of an elastic gang's processes, beside WORLD_SIZE.
const (
	// EnvMinWorkers and EnvMaxWorkers are the fewest and the most workers the gang may
	// run with (spec.minWorkers, spec.workers as submitted).
	EnvMinWorkers = "TRAINYARD_MIN_WORKERS"
	EnvMaxWorkers = "TRAINYARD_MAX_WORKERS"
	// EnvPreviousWorldSize is the world size of the previous attempt, set when it differs
	// from this one's (the gang was resized): the script adjusts what depends on it.
	EnvPreviousWorldSize = "TRAINYARD_PREVIOUS_WORLD_SIZE"
)

// shrinkAfter is how many attempts in a row a worker must fail before an elastic gang
// goes on without it: once may be the job's fault, twice is the worker's (a broken GPU).
const shrinkAfter = 2

// elastic is what a launcher keeps of an elastic gang across its attempts: which worker
// of the first attempt each worker now is, and which one failed how often in a row.
type elastic struct {
	origins   []int // origins[w]: the first attempt's index of worker w; nil until needed
	streakOf  int   // the first attempt's index of the worker that failed last, or -1
	streak    int   // how many attempts in a row it failed
	max       int   // the workers the gang started with
	lastWorld int   // the world size of the previous attempt, 0 before the first
	resizes   int   // the restarts that were resizes (they use none of maxRestarts)
}

// shrink drops the worker whose rank failed the attempt when it failed shrinkAfter
// attempts in a row and the gang may be smaller (spec.minWorkers): it returns the size
// before, why, and true. The remaining workers keep their slots (and GPUs), renumbered.
func (l *Launcher) shrink(res AttemptResult) (from int, why string, ok bool) {
	e := &l.elastic
	s := &l.Job.Spec
	workers := s.WorkerCount()
	if e.origins == nil {
		e.max, e.streakOf = cmp.Or(e.max, l.MaxWorkers, workers), -1
		for w := range workers {
			e.origins = append(e.origins, w)
		}
	}
	if res.FailedRank < 0 || res.Hung {
		e.streakOf, e.streak = -1, 0
		return 0, "", false
	}
	w := res.FailedRank / s.ProcCount()
	if w >= len(e.origins) {
		return 0, "", false
	}
	if e.origins[w] == e.streakOf {
		e.streak++
	} else {
		e.streakOf, e.streak = e.origins[w], 1
	}
	if e.streak < shrinkAfter || workers <= s.MinWorkerCount() {
		return 0, "", false
	}
	why = fmt.Sprintf("worker %d failed %d attempts in a row", w, e.streak)
	e.origins = slices.Delete(e.origins, w, w+1)
	e.streakOf, e.streak = -1, 0
	e.resizes++
	l.dropSlot(w)
	return workers, why, true
}

// dropSlot removes worker w from the placement and the job: the workers after it move
// down one index, keeping their GPUs.
func (l *Launcher) dropSlot(w int) {
	slots := slices.DeleteFunc(slices.Clone(l.Placement.Slots), func(sl Slot) bool { return sl.Worker == w })
	for i := range slots {
		if slots[i].Worker > w {
			slots[i].Worker--
		}
	}
	l.Placement.Slots = slots
	n := int32(l.Job.Spec.WorkerCount() - 1)
	l.Job.Spec.Workers = &n
}

// restartsUsed is how many restarts the attempts from first to n used: those that were
// not resizes.
func (l *Launcher) restartsUsed(n, first int) int { return n - first + 1 - l.elastic.resizes }

// elasticEnv adds an elastic gang's variables to env, and notes the attempt's world size.
func (l *Launcher) elasticEnv(env map[string]string) {
	s := &l.Job.Spec
	world := s.WorldSize()
	if s.MinWorkers != nil {
		max := cmp.Or(l.elastic.max, l.MaxWorkers, s.WorkerCount())
		env[EnvMinWorkers], env[EnvMaxWorkers] = strconv.Itoa(s.MinWorkerCount()), strconv.Itoa(max)
	}
	if l.elastic.lastWorld == 0 {
		l.elastic.lastWorld = l.PreviousWorldSize
	}
	if prev := l.elastic.lastWorld; prev != 0 && prev != world {
		env[EnvPreviousWorldSize] = strconv.Itoa(prev)
	}
	l.elastic.lastWorld = world
}
