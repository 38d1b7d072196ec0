// suggest_test.go owns the tests of "did you mean": mistyped subcommands
// and flag values are answered with the nearest known word.
package main

import (
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/suggest"
)

// --track's values: the nearest word decides whether a bare --track takes
// the next argument as its value.
func TestNearestTrackValue(t *testing.T) {
	for _, c := range []struct{ in, want string }{{"procc", "proc"}, {"ebpf", "bpf"}, {"bfp", "bpf"}, {"atuo", "auto"}, {"sleep", ""}} {
		if got := suggest.Nearest(c.in, trackValues); got != c.want {
			t.Errorf("Nearest(%q, track) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDidYouMeanCLI(t *testing.T) {
	for _, c := range []struct{ args, mention string }{
		{"queu", `unknown command "queu": did you mean "queue"?`},
		{"cancle 3", `did you mean "cancel"?`},
		{"--track procc -- true", `"procc" for "--track" flag: not one of auto, bpf, proc: did you mean "proc"?`},
		{"--track=bfp -- true", `did you mean "bpf"?`},
		{"--cgroup of -- true", `"of" for "--cgroup" flag: not one of auto, on, off: did you mean "off"?`},
		{"--device-holders=wiat -- true", `not one of warn, wait, fail: did you mean "wait"?`},
		{"--log-format jsno -- true", `did you mean "json"?`},
		{"--log-format=jsno queue", `did you mean "json"?`},
		{"show --format=jsn x", `did you mean "json"?`},
		{"show --color=nevr x", `did you mean "never"?`},
		{"--cgroup=maybe -- true", `"maybe" for "--cgroup" flag: not one of auto, on, off (see`}, // nothing near
	} {
		t.Run(c.args, func(t *testing.T) {
			code, _, stderr, _ := cli(t, strings.Fields(c.args)...)
			wantUsage(t, code, stderr, c.mention)
		})
	}
}
