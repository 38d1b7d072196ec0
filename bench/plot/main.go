// Command plot draws the benchmark's main figures as SVG from the JSON that
// `go run ./bench` writes (bench/results.json): teardown time against tree
// size per backend beside the cgroup.kill floor, a hold's cost against the
// number of processes on the host, and the device's idle time between two
// jobs beside flock(1). It is a module of its own so that the plotting
// library stays out of gpu-hold's dependencies; `make bench` runs it.
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
	figures := []struct {
		name string
		draw func(results, string) (bool, error)
	}{
		{"teardown.svg", drawTeardown},
		{"host-size.svg", drawHostSize},
		{"idle.svg", drawIdle},
	}
	for _, f := range figures {
		path := filepath.Join(*out, f.name)
		drawn, err := f.draw(r, path)
		if err != nil {
			fatalf("drawing %s: %v", path, err)
		}
		if drawn {
			fmt.Fprintf(os.Stderr, "plot: wrote %s\n", path)
		} else {
			fmt.Fprintf(os.Stderr, "plot: %s not drawn: its section was not run\n", path)
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
