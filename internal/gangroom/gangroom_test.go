package gangroom

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)

// gang is a gang of 3 workers created at t0 plus age seconds.
func gang(key string, age int, s State) Gang {
	return Gang{Key: key, Created: t0.Add(time.Duration(age) * time.Second), State: s, Since: t0, Need: 3, Workers: 3}
}

func with(g Gang, f func(*Gang)) Gang { f(&g); return g }

func TestDecide(t *testing.T) {
	r := DefaultRules
	now := t0.Add(time.Minute)
	bound := func(n int) func(*Gang) { return func(g *Gang) { g.Bound = n } }
	cases := []struct {
		name   string
		g      Gang
		others []Gang
		now    time.Time
		want   Action
		rule   string
		other  string
		why    string
	}{
		{name: "alone, a new gang starts", g: gang("a", 0, New), want: Start, rule: "start"},
		{name: "two new gangs: the older starts", g: gang("a", 0, New), others: []Gang{gang("b", 1, New)}, want: Start, rule: "start"},
		{name: "two new gangs: the younger waits", g: gang("b", 1, New), others: []Gang{gang("a", 0, New)},
			want: Wait, rule: "in-order", other: "a", why: "gang a, ahead of it, starts first"},
		{name: "one places at a time, whatever the order", g: gang("a", 0, New), others: []Gang{gang("b", 1, Placing)},
			want: Wait, rule: "one-places-at-a-time", other: "b"},
		{name: "a higher priority goes first", g: with(gang("b", 1, New), func(g *Gang) { g.Priority = 10 }), others: []Gang{gang("a", 0, New)},
			want: Start, rule: "start"},
		{name: "behind a gang placed in part", g: gang("c", 2, New), others: []Gang{with(gang("a", 0, Short), bound(2))},
			want: Wait, rule: "in-order", other: "a", why: "needs room for 1 more worker(s)"},
		{name: "a gang that holds nothing blocks nobody", g: gang("c", 2, New), others: []Gang{gang("a", 0, Short)},
			want: Start, rule: "start"},
		{name: "a placed gang blocks nobody", g: gang("c", 2, New), others: []Gang{gang("a", 0, Placed)}, want: Start, rule: "start"},
		{name: "a split: the younger gives way", g: with(gang("b", 1, Short), bound(2)), others: []Gang{with(gang("a", 0, Short), bound(2))},
			now: now, want: GiveBack, rule: "give-way", other: "a", why: "gave back the room of its 2 placed worker(s) to gang a"},
		{name: "a split: the older keeps its room", g: with(gang("a", 0, Short), bound(2)), others: []Gang{with(gang("b", 1, Short), bound(2))},
			now: t0.Add(5 * time.Second), want: Keep, rule: "hold-limit"},
		{name: "a split settles first", g: with(gang("b", 1, Short), bound(2)), others: []Gang{with(gang("a", 0, Short), bound(2))},
			now: t0.Add(time.Second), want: Keep, rule: "settle"},
		{name: "first in line, placed in part: holds its room", g: with(gang("a", 0, Short), bound(1)),
			others: []Gang{with(gang("z", -100, Placed), func(g *Gang) { g.Bound, g.Holds = 3, "3 GPUs" })},
			now:    now, want: Keep, rule: "hold-limit", why: "1 of its 3 workers placed, waiting for room for 2 more; gang z holds 3 GPUs; it gives their room back if none comes within 2m0s"},
		{name: "first in line, placed in part for too long: gives back", g: with(gang("a", 0, Short), bound(1)), others: []Gang{gang("z", -100, Placed)},
			now: t0.Add(2 * time.Minute), want: GiveBack, rule: "hold-limit", why: "no room came for 2 more in 2m0s"},
		{name: "behind a gang that waits for room, placed in part: gives back sooner", g: with(gang("b", 1, Short), bound(2)),
			others: []Gang{with(gang("a", 0, Short), func(g *Gang) { g.Priority = 5 })},
			now:    t0.Add(15 * time.Second), want: GiveBack, rule: "hold-limit", why: "no room came for 1 more in 15s"},
		{name: "gangs of another kind do not wait", g: with(gang("c", 2, New), func(g *Gang) { g.Kind = "" }),
			others: []Gang{with(with(gang("a", 0, Short), bound(2)), func(g *Gang) { g.Kind = "nvidia.com/gpu" }),
				with(gang("b", 1, Placing), func(g *Gang) { g.Kind = "nvidia.com/gpu" })},
			want: Start, rule: "start"},
		{name: "refused whole: its pods wait", g: gang("a", 0, Short), now: now, want: Keep, rule: "hold-limit"},
		{name: "gave back: backs off", g: with(gang("b", 1, Waiting), func(g *Gang) { g.GivenBack = 2 }), now: t0.Add(10 * time.Second),
			want: Wait, rule: "back-off", why: "or 30s after it gave its room back"},
		{name: "gave back: room freed", g: with(gang("b", 1, Waiting), func(g *Gang) { g.GivenBack = 2; g.RoomFreed = true }), now: t0.Add(10 * time.Second),
			want: Start, rule: "start"},
		{name: "gave back: back-off over", g: with(gang("b", 1, Waiting), func(g *Gang) { g.GivenBack = 1 }), now: t0.Add(16 * time.Second),
			want: Start, rule: "start"},
		{name: "a waiting gang ahead, backing off, blocks nobody", g: gang("c", 2, New), others: []Gang{with(gang("a", 0, Waiting), func(g *Gang) { g.GivenBack = 1 })},
			now: t0.Add(time.Second), want: Start, rule: "start"},
		{name: "a waiting gang ahead, ready, goes first", g: gang("c", 2, New), others: []Gang{with(gang("a", 0, Waiting), func(g *Gang) { g.RoomFreed = true })},
			now: t0.Add(time.Second), want: Wait, rule: "in-order", other: "a"},
		{name: "a placed gang keeps", g: gang("a", 0, Placed), others: []Gang{with(gang("b", -5, Short), bound(1))}, want: Keep, rule: "keep"},
		{name: "a placing gang keeps", g: gang("a", 0, Placing), others: []Gang{gang("b", -5, New)}, want: Keep, rule: "keep"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			when := c.now
			if when.IsZero() {
				when = t0
			}
			all := append([]Gang{c.g}, c.others...)
			d := r.Decide(c.g, all, when)
			if d.Action != c.want || d.Rule != c.rule || d.Other != c.other || !strings.Contains(d.Why, c.why) {
				t.Errorf("Decide = %+v, want %s by %q (other %q, why containing %q)", d, c.want, c.rule, c.other, c.why)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	r := DefaultRules
	for n, want := range map[int]time.Duration{0: 15 * time.Second, 1: 15 * time.Second, 2: 30 * time.Second, 4: 2 * time.Minute, 5: 3 * time.Minute, 40: 3 * time.Minute} {
		if got := r.Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
}

// TestSixGangsOnFourRooms plays the rules forward on a cluster of 4 GPUs with 6 gangs of 3
// workers made at once, a scheduler that binds pods one by one in the order they were
// made, and gangs that run 60 s once placed: every gang runs, one at a time, and none is
// ever left placed in part.
func TestSixGangsOnFourRooms(t *testing.T) {
	r := DefaultRules
	const rooms, workers, runFor = 4, 3, 60 * time.Second
	type sim struct {
		Gang
		ended time.Time
		done  bool
	}
	gangs := make([]*sim, 6)
	for i := range gangs {
		gangs[i] = &sim{Gang: Gang{Key: string(rune('a' + i)), Created: t0.Add(time.Duration(i) * time.Millisecond), Need: workers, Workers: workers}}
	}
	free := rooms
	var order []string
	for now := t0; now.Before(t0.Add(30 * time.Minute)); now = now.Add(500 * time.Millisecond) {
		var all []Gang
		for _, g := range gangs {
			if !g.done {
				all = append(all, g.Gang)
			}
		}
		roomFreed := false
		for _, g := range gangs {
			if g.done {
				continue
			}
			switch d := r.Decide(g.Gang, all, now); d.Action {
			case Start:
				g.State, g.Since, g.Bound = Placing, now, 0
			case GiveBack:
				free += g.Bound
				g.State, g.Since, g.Bound, g.GivenBack, g.RoomFreed = Waiting, now, 0, g.GivenBack+1, false
			}
			all = all[:0]
			for _, o := range gangs {
				if !o.done {
					all = append(all, o.Gang)
				}
			}
		}
		// The scheduler binds what fits of each gang's pending pods, in creation order.
		for _, g := range gangs {
			if g.State != Placing && g.State != Short {
				continue
			}
			take := min(free, g.Workers-g.Bound)
			g.Bound += take
			free -= take
			switch {
			case g.Bound == g.Workers:
				g.State, g.ended = Placed, now.Add(runFor)
				order = append(order, g.Key)
			case g.State == Placing || take > 0:
				g.State, g.Since = Short, now
			}
		}
		for _, g := range gangs {
			if g.State == Placed && !g.done && !now.Before(g.ended) {
				g.done, free, roomFreed = true, free+g.Bound, true
			}
		}
		if roomFreed {
			for _, g := range gangs {
				if g.State == Waiting {
					g.RoomFreed = true
				}
			}
		}
		placedInPart := 0
		for _, g := range gangs {
			if !g.done && g.State == Short && g.Bound > 0 {
				placedInPart++
			}
		}
		if placedInPart > 1 {
			t.Fatalf("%s: %d gangs hold part of the room at once", now.Sub(t0), placedInPart)
		}
	}
	if strings.Join(order, "") != "abcdef" {
		t.Errorf("gangs ran in the order %q, want abcdef", strings.Join(order, ""))
	}
	for _, g := range gangs {
		if !g.done {
			t.Errorf("gang %s never ran (state %s)", g.Key, g.State)
		}
	}
	last := gangs[5].ended
	t.Logf("6 gangs of %s each ran by %s", runFor, last.Sub(t0))
	if took := last.Sub(t0); took > 6*runFor+time.Minute {
		t.Errorf("all 6 gangs took %s, want about 6 x %s", took, runFor)
	}
}
