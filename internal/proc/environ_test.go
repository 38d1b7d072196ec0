// environ_test.go checks EnvHas on both forms a live process shows.
package proc

import "testing"

// An entry counts as KEY=VALUE and, while bash parses its environment in
// place, as KEY\0VALUE; never as a part of another string.
func TestEnvHasBothForms(t *testing.T) {
	const k, v = "GPU_HOLD_ID", "0123456789abcdef"
	for _, c := range []struct {
		env  string
		want bool
	}{
		{"A=1\x00" + k + "=" + v + "\x00", true},
		{k + "=" + v, true},
		{k + "=" + v + "\x00B=2\x00", true},
		{"A\x001\x00" + k + "\x00" + v + "\x00", true},
		{"A=1\x00" + k + "=ffff\x00", false},
		{"X" + k + "=" + v + "\x00", false},
		{k + "=" + v + "x\x00", false},
		{"A=" + v + "\x00", false},
		{"", false},
	} {
		if got := EnvHas([]byte(c.env), k, v); got != c.want {
			t.Errorf("EnvHas(%q) = %v, want %v", c.env, got, c.want)
		}
	}
}
