package gangroom

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// State is where a gang's current attempt stands, as its pods show it.
type State int

// The states of a gang.
const (
	// New: no pods yet, and it never gave its room back (or is past that).
	New State = iota
	// Waiting: it gave its room back and has no pods.
	Waiting
	// Placing: its pods are made, and the scheduler has neither bound nor refused them all.
	Placing
	// Short: the scheduler refused some pods, and fewer than the gang needs are bound.
	Short
	// Placed: at least as many pods as it needs are bound (starting, or running).
	Placed
)

var stateNames = [...]string{"New", "Waiting", "Placing", "Short", "Placed"}

func (s State) String() string { return stateNames[s] }

// Gang is what the rules know of one gang.
type Gang struct {
	Key      string // namespace/name
	Priority int32
	Created  time.Time
	State    State
	// Since is when the gang entered its state: its pods were made (Placing), the
	// scheduler first refused one (Short), it gave its room back (Waiting).
	Since time.Time
	// GivenBack is how many times the gang gave its room back.
	GivenBack int
	// RoomFreed says, of a Waiting gang, that room was freed since it gave its own back.
	RoomFreed bool
	// Bound is how many of its pods are bound to a node; Need how many it needs to start
	// (an elastic gang's minimum); Workers how many pods it has.
	Bound, Need, Workers int
	// Holds says what its bound pods hold, for other gangs' messages ("2 GPUs").
	Holds string
	// Kind is the scarce resource its workers need ("nvidia.com/gpu", or "" for none):
	// gangs of different kinds do not wait for each other.
	Kind string
}

// Action is what a gang does.
type Action int

// The actions.
const (
	// Keep: go on as it is.
	Keep Action = iota
	// Start: make its pods now.
	Start
	// Wait: make no pods yet.
	Wait
	// GiveBack: delete its pods, and wait.
	GiveBack
)

var actionNames = [...]string{"Keep", "Start", "Wait", "GiveBack"}

func (a Action) String() string { return actionNames[a] }

// Decision is what one gang does, and why.
type Decision struct {
	Action Action
	// Rule names the rule that decided.
	Rule string
	// Other is the gang it waits behind or gives way to, if any.
	Other string
	// Why says it in a sentence, for the status.
	Why string
	// Retry is when to look again at the latest (0: when something changes).
	Retry time.Duration
}

// Rules holds the times the rules use.
type Rules struct {
	// Settle is how long a gang the scheduler refused in part waits before anything is
	// decided: room still being freed (pods terminating) comes within it.
	Settle time.Duration
	// Hold is how long a gang placed in part keeps its room for the rest of its pods while
	// a gang ahead of it is not placed either; HeadHold how long the gang first in line
	// keeps it (shorter than its worker 0 waits for the others: five minutes).
	Hold, HeadHold time.Duration
	// BackoffMin and BackoffMax bound the wait after a give-back, doubling with each.
	BackoffMin, BackoffMax time.Duration
	// Poll is how soon a waiting gang looks again while another places.
	Poll time.Duration
}

// DefaultRules are the times the operator uses.
var DefaultRules = Rules{Settle: 3 * time.Second, Hold: 15 * time.Second, HeadHold: 2 * time.Minute,
	BackoffMin: 15 * time.Second, BackoffMax: 3 * time.Minute, Poll: 500 * time.Millisecond}

// Ahead reports whether gang a goes before gang b: higher priority, then older, then by
// key.
func Ahead(a, b Gang) bool {
	if c := cmp.Or(cmp.Compare(b.Priority, a.Priority), a.Created.Compare(b.Created), cmp.Compare(a.Key, b.Key)); c != 0 {
		return c < 0
	}
	return false
}

// Backoff is how long a gang that gave its room back n times waits before it tries again
// without room being freed.
func (r Rules) Backoff(n int) time.Duration {
	d := r.BackoffMin
	for i := 1; i < n && d < r.BackoffMax; i++ {
		d *= 2
	}
	return min(d, r.BackoffMax)
}

// ready reports whether gang g would make its pods were it alone, and if not, how long
// until it would.
func (r Rules) ready(g Gang, now time.Time) (bool, time.Duration) {
	switch g.State {
	case New:
		return true, 0
	case Waiting:
		left := g.Since.Add(r.Backoff(g.GivenBack)).Sub(now)
		return g.RoomFreed || left <= 0, left
	}
	return false, 0
}

// unplaced reports whether gang g holds room or is about to take it without being
// placed: those the gangs behind it wait for. One whose pods all wait for room holds
// nothing and blocks nobody (it may never fit) unless waiting counts too.
func (r Rules) unplaced(g Gang, now time.Time, waiting bool) bool {
	switch g.State {
	case Placing:
		return true
	case Short:
		return g.Bound > 0 || waiting
	case New, Waiting:
		ok, _ := r.ready(g, now)
		return ok
	}
	return false
}

// ahead returns the first gang of g's kind ahead of it for which f holds.
func ahead(all []Gang, g Gang, f func(Gang) bool) (Gang, bool) {
	return find(all, g, func(o Gang) bool { return o.Kind == g.Kind && Ahead(o, g) && f(o) })
}

// rule is one line of the table: when it applies to gang g among all, and what it
// decides then.
type rule struct {
	name   string
	states []State
	decide func(r Rules, g Gang, all []Gang, now time.Time) (Decision, bool)
}

// table is the rules in order; the first that applies decides.
var table = []rule{
	{"one-places-at-a-time", []State{New, Waiting}, func(r Rules, g Gang, all []Gang, now time.Time) (Decision, bool) {
		o, ok := find(all, g, func(o Gang) bool { return o.Kind == g.Kind && o.State == Placing })
		return Decision{Action: Wait, Other: o.Key, Retry: r.Poll,
			Why: fmt.Sprintf("waiting while the pods of gang %s are placed", o.Key)}, ok
	}},
	{"in-order", []State{New, Waiting}, func(r Rules, g Gang, all []Gang, now time.Time) (Decision, bool) {
		o, ok := ahead(all, g, func(o Gang) bool { return r.unplaced(o, now, false) })
		return Decision{Action: Wait, Other: o.Key, Retry: r.Poll,
			Why: fmt.Sprintf("waiting for room: gang %s, ahead of it, %s", o.Key, waitsFor(o))}, ok
	}},
	{"back-off", []State{Waiting}, func(r Rules, g Gang, _ []Gang, now time.Time) (Decision, bool) {
		ok, left := r.ready(g, now)
		return Decision{Action: Wait, Retry: left,
			Why: fmt.Sprintf("waiting for room: tries again when a gang ends, or %s after it gave its room back", r.Backoff(g.GivenBack))}, !ok
	}},
	{"start", []State{New, Waiting}, func(Rules, Gang, []Gang, time.Time) (Decision, bool) {
		return Decision{Action: Start}, true
	}},
	{"settle", []State{Short}, func(r Rules, g Gang, _ []Gang, now time.Time) (Decision, bool) {
		left := g.Since.Add(r.Settle).Sub(now)
		return Decision{Action: Keep, Retry: left}, left > 0
	}},
	{"give-way", []State{Short}, func(r Rules, g Gang, all []Gang, now time.Time) (Decision, bool) {
		o, ok := ahead(all, g, func(o Gang) bool { return o.State == Placing || o.State == Short && o.Bound > 0 })
		return Decision{Action: GiveBack, Other: o.Key,
			Why: fmt.Sprintf("gave back the room of its %d placed worker(s) to gang %s, ahead of it, which %s", g.Bound, o.Key, waitsFor(o))}, ok
	}},
	{"hold-limit", []State{Short}, func(r Rules, g Gang, all []Gang, now time.Time) (Decision, bool) {
		missing := g.Need - g.Bound
		if g.Bound == 0 {
			// It holds nothing: its pods wait for room as any pod does.
			return Decision{Action: Keep, Why: fmt.Sprintf("waiting for room for its %d workers%s", missing, holders(all, g))}, true
		}
		hold := r.HeadHold
		if _, behind := ahead(all, g, func(o Gang) bool { return r.unplaced(o, now, true) }); behind {
			hold = r.Hold
		}
		left := g.Since.Add(hold).Sub(now)
		if left > 0 {
			return Decision{Action: Keep, Retry: left, Why: fmt.Sprintf("%d of its %d workers placed, waiting for room for %d more%s; "+
				"it gives their room back if none comes within %s", g.Bound, g.Workers, missing, holders(all, g), hold)}, true
		}
		return Decision{Action: GiveBack,
			Why: fmt.Sprintf("gave back the room of its %d placed worker(s): no room came for %d more in %s", g.Bound, missing, hold)}, true
	}},
	{"keep", nil, func(Rules, Gang, []Gang, time.Time) (Decision, bool) {
		return Decision{Action: Keep}, true
	}},
}

// waitsFor says what gang o does, for another gang's message.
func waitsFor(o Gang) string {
	switch o.State {
	case Placing:
		return "is being placed"
	case Short:
		s := fmt.Sprintf("needs room for %d more worker(s)", o.Need-o.Bound)
		if o.Holds != "" {
			s += fmt.Sprintf(" (it holds %s)", o.Holds)
		}
		return s
	}
	return "starts first"
}

// holders says which other gangs of g's kind hold room: "; gang default/a holds 2 GPUs".
func holders(all []Gang, g Gang) string {
	var out []string
	for _, o := range all {
		if o.Key != g.Key && o.Kind == g.Kind && o.Holds != "" && o.Bound > 0 {
			out = append(out, fmt.Sprintf("gang %s holds %s", o.Key, o.Holds))
		}
	}
	if len(out) == 0 {
		return ""
	}
	slices.Sort(out)
	return "; " + strings.Join(out, ", ")
}

// find returns the first gang of all but g for which f holds, in order.
func find(all []Gang, g Gang, f func(Gang) bool) (Gang, bool) {
	var best Gang
	found := false
	for _, o := range all {
		if o.Key == g.Key || !f(o) {
			continue
		}
		if !found || Ahead(o, best) {
			best, found = o, true
		}
	}
	return best, found
}

// Decide says what gang g does, given every gang of the cluster (g among them or not)
// and the time. It is pure: the same input gives the same decision.
func (r Rules) Decide(g Gang, all []Gang, now time.Time) Decision {
	for _, ru := range table {
		if ru.states != nil && !slices.Contains(ru.states, g.State) {
			continue
		}
		if d, ok := ru.decide(r, g, all, now); ok {
			d.Rule = ru.name
			return d
		}
	}
	panic("gangroom: the last rule applies to every gang")
}
