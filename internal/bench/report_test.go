// report_test.go checks how the spawn and teardown targets are judged: the
// turn-by-turn ratio against the limit, the separate runs' median against
// it, "unresolved" only when that median is above but its interval is not;
// the teardown's median ratio against its limit, and a teardown that left
// a process behind missed whatever its time.
package main

import "testing"

func TestSpawnTargets(t *testing.T) {
	res := func(turn, sep, lo float64) *Results {
		return &Results{Spawn: &SpawnResult{N: 10,
			Modes: []SpawnMode{{Mode: "bare", Ratio: 1}, {Mode: "bpf", Ratio: Num(sep), RatioCI90: [2]Num{Num(lo), Num(sep + 0.03)}, SeenMin: 10, SeenMax: 10}},
			Turns: []TurnMode{{Mode: "bare", Ratio: 1, Ratios: Dist{N: 1}}, {Mode: "bpf", Ratio: Num(turn), Ratios: Dist{N: 1, Median: turn}}},
		}}
	}
	for _, c := range []struct {
		turn, sep, lo  float64
		wantTurn, want string
	}{
		{1.005, 1.01, 0.98, "met", "met"},
		{1.005, 1.04, 1.01, "met", "unresolved"},
		{1.005, 1.05, 1.03, "met", "missed"},
		{1.03, 1.05, 1.03, "missed", "missed"},
	} {
		r := res(c.turn, c.sep, c.lo)
		if got := statusOf(t, r, "spawn overhead, bpf (turn by turn)"); got != c.wantTurn {
			t.Errorf("turn %v: status %s, want %s", c.turn, got, c.wantTurn)
		}
		if got := statusOf(t, r, "spawn overhead, bpf (separate runs)"); got != c.want {
			t.Errorf("separate %v (CI from %v): status %s, want %s", c.sep, c.lo, got, c.want)
		}
	}
}

func TestTeardownTargets(t *testing.T) {
	for _, c := range []struct {
		ratio     float64
		leftovers int
		want      string
	}{
		{1.24, 0, "met"},
		{1.5, 0, "met"},
		{1.6, 0, "missed"},
		{1.2, 1, "missed"},
	} {
		r := &Results{Teardown: []TeardownCase{{Shape: "wide", N: 10000, Behavior: "term-ignoring", Modes: []TeardownMode{
			{Mode: "floor", Ratio: 1, TimeMS: Dist{N: 1, Median: 600}},
			{Mode: "proc", Ratio: Num(c.ratio), RatioOfMedians: 1, Leftovers: c.leftovers},
		}}}}
		if got := statusOf(t, r, "teardown, 10000 wide TERM-ignoring, -g 0, proc"); got != c.want {
			t.Errorf("ratio %v, %d leftovers: status %s, want %s", c.ratio, c.leftovers, got, c.want)
		}
	}
}

// statusOf is the status of the target named name that r gives.
func statusOf(t *testing.T, r *Results, name string) string {
	t.Helper()
	for _, tg := range (&bench{res: r}).targets() {
		if tg.Name == name {
			return tg.Status
		}
	}
	t.Fatalf("no target %q", name)
	return ""
}
