// suggest_test.go owns the tests of the nearest known word: subcommands
// and resource names, mistyped, in another case, or with a stray space.
package suggest

import "testing"

func TestNearest(t *testing.T) {
	for _, c := range []struct {
		known    []string
		in, want string
	}{
		{commands, "queu", "queue"}, {commands, "qeueu", "queue"}, {commands, "Queue", "queue"},
		{commands, "cancle", "cancel"}, {commands, "shwo", "show"}, {commands, "que", "queue"},
		{commands, "docter", "doctor"},
		{commands, "q", ""}, {commands, "ls", ""}, {commands, "./job.sh", ""}, {commands, "python", ""}, {commands, "sleep", ""},
		// Resource names: a plural, another case, a stray space or slash.
		{resources, "gpus", "gpu"}, {resources, "GPU", "gpu"}, {resources, "Gpu", "gpu"}, {resources, "gpu ", "gpu"},
		{resources, " gpu", "gpu"}, {resources, "gpu/", "gpu"}, {resources, "npus", "npu"}, {resources, "fgpa", "fpga"},
		{resources, "FPGA0", "fpga"}, {resources, "tpu", "gpu"},
		{resources, "x", ""}, {resources, "ssd", ""}, {resources, "../../etc", ""}, {resources, "accelerator", ""},
	} {
		if got := Nearest(c.in, c.known); got != c.want {
			t.Errorf("Nearest(%q, %v) = %q, want %q", c.in, c.known, got, c.want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	if got, want := DidYouMean("gpus", resources), `: did you mean "gpu"?`; got != want {
		t.Errorf("DidYouMean(gpus) = %q, want %q", got, want)
	}
	if got := DidYouMean("ssd", resources); got != "" {
		t.Errorf("DidYouMean(ssd) = %q, want nothing (no name is near)", got)
	}
}

var (
	commands  = []string{"queue", "cancel", "reap", "show", "doctor"}
	resources = []string{"fpga", "gpu", "npu"}
)
