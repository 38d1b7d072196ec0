// Package layers holds gpu-hold's import rule, written once: the floor of
// every package. A package imports only packages on floors below its own,
// so imports run one way, down; layers_test.go fails on an import that
// breaks the rule, and the docs point here rather than restate it.
// funclen_test.go keeps the structure's other rule: no product function
// over 80 lines.
//
// Why these floors: proc, safefs, cgroup and termsafe know nothing of
// gpu-hold's concepts; the queue and the record know nothing of lineages or
// devices; the tracker, the device checks and the metrics build on those;
// teardown and guard consume them; fleetenv is the environment every
// subcommand shares (the queue dir, the logger); hold is one hold's glue,
// and only cmd calls it. Packages on the same floor never import each other.
package layers

// Module is the import path every package below is relative to.
const Module = "github.com/gpu-hold/gpu-hold"

// Floors maps each product package (relative to Module) to its floor.
var Floors = map[string]int{
	"internal/proc":      0,
	"internal/safefs":    0,
	"internal/cgroup":    0,
	"internal/termsafe":  0,
	"internal/mangen":    0,
	"internal/suggest":   0,
	"internal/dirconf":   1,
	"bpf":                1,
	"internal/memfloor":  1,
	"internal/record":    1,
	"queue":              1,
	"tracker":            2,
	"internal/device":    2,
	"internal/metrics":   2,
	"internal/lobby":     2,
	"queue/etcdq":        2,
	"internal/teardown":  3,
	"internal/guard":     3,
	"internal/fleetenv":  3,
	"hold":               4,
	"cmd/gpu-hold":       5,
	"cmd/gpu-hold-lobby": 5,
}

// TestOnly are the packages only tests (and the bench) may import: they
// plant hostile files, run programs as other uids and start test servers,
// which no product binary may carry.
var TestOnly = map[string]bool{
	"internal/testenv":    true,
	"internal/mark":       true,
	"internal/plant":      true,
	"internal/cprog":      true,
	"internal/teststock":  true,
	"internal/etcdtest":   true,
	"internal/etcdserver": true,
	"internal/layers":     true,
}

// Tools are the packages that drive the real product from outside (the
// integration tests, the bench): they may import any package but the
// commands and hold, whose work they reach through the binary.
var Tools = map[string]bool{
	"test":                true,
	"internal/bench":      true,
	"internal/bench/plot": true,
}

// Allowed says whether package from may import package to (both relative to
// Module), and if not, why not.
func Allowed(from, to string, inTest bool) (bool, string) {
	if from == to && inTest {
		return true, "" // an external test package (package x_test)
	}
	if TestOnly[to] {
		if inTest || Tools[from] || TestOnly[from] {
			return true, ""
		}
		return false, to + " is for tests only"
	}
	if Tools[from] || TestOnly[from] {
		if to == "hold" || Floors[to] == Floors["cmd/gpu-hold"] {
			return false, "tools and tests reach " + to + " through the binary"
		}
		return true, ""
	}
	ff, okFrom := Floors[from]
	ft, okTo := Floors[to]
	switch {
	case !okFrom:
		return false, from + " has no floor in internal/layers: give it one"
	case !okTo:
		return false, to + " has no floor in internal/layers: give it one"
	case ft >= ff:
		return false, "imports run down: " + to + " is not below " + from
	}
	return true, ""
}
