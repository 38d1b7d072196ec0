// Command plot draws the benchmark's main figures as SVG from the JSON that
// `go run ./internal/bench` writes (internal/bench/results.json), each answering one question
// in its title: teardown time against tree size per way of ending the tree
// beside the cgroup.kill floor (one figure per kind of tree), a hold's time
// and the device check's time against the number of processes on the host,
// and the device's idle time between two jobs per chain beside flock(1),
// after short payloads and after a long one. It is a module of its own so
// that the plotting library stays out of gpu-hold's dependencies; `make
// bench` runs it.
//
//	go run . -in ../results.json -out ../figures
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

func main() {
	in := flag.String("in", "../results.json", "the bench's JSON results")
	out := flag.String("out", "../figures", "directory for the SVG figures")
	flag.Parse()
	data, err := os.ReadFile(*in)
	if err != nil {
		fatalf("reading the bench results: %v (run make bench first)", err)
	}
	var r results
	if err := json.Unmarshal(data, &r); err != nil {
		fatalf("%s is not the bench's JSON: %v", *in, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatalf("%v", err)
	}
	sections := []struct {
		name string
		draw func(results) ([]figure, error)
	}{
		{"teardown", drawTeardown},
		{"busy", drawHost},
		{"handoff and long-handoff", drawIdle},
	}
	for _, s := range sections {
		figs, err := s.draw(r)
		if err != nil {
			fatalf("drawing the %s figures: %v", s.name, err)
		}
		if len(figs) == 0 {
			fmt.Fprintf(os.Stderr, "plot: no %s figures: the section was not run\n", s.name)
		}
		for _, f := range figs {
			if err := f.save(*out); err != nil {
				fatalf("drawing %s: %v", filepath.Join(*out, f.name), err)
			}
			fmt.Fprintf(os.Stderr, "plot: wrote %s\n", filepath.Join(*out, f.name))
		}
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "plot: "+format+"\n", a...)
	os.Exit(1)
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
