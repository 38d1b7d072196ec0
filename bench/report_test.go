// report_test.go checks how the spawn targets are judged: the turn-by-turn
// ratio against the limit, the separate runs' median against it, and
// "unresolved" only when the median is above but its interval is not.
package main

import "testing"

func TestSpawnTargets(t *testing.T) {
	res := func(turn, sep, lo float64) *Results {
		return &Results{Spawn: &SpawnResult{N: 10,
			Modes: []SpawnMode{{Mode: "bare", Ratio: 1}, {Mode: "bpf", Ratio: Num(sep), RatioCI90: [2]Num{Num(lo), Num(sep + 0.03)}, SeenMin: 10, SeenMax: 10}},
			Turns: []TurnMode{{Mode: "bare", Ratio: 1, Ratios: Dist{N: 1}}, {Mode: "bpf", Ratio: Num(turn), Ratios: Dist{N: 1, Median: turn}}},
		}}
	}
	statusOf := func(r *Results, name string) string {
		for _, tg := range (&bench{res: r}).targets() {
			if tg.Name == name {
				return tg.Status
			}
		}
		t.Fatalf("no target %q", name)
		return ""
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
		if got := statusOf(r, "spawn overhead, bpf (turn by turn)"); got != c.wantTurn {
			t.Errorf("turn %v: status %s, want %s", c.turn, got, c.wantTurn)
		}
		if got := statusOf(r, "spawn overhead, bpf (separate runs)"); got != c.want {
			t.Errorf("separate %v (CI from %v): status %s, want %s", c.sep, c.lo, got, c.want)
		}
	}
}
