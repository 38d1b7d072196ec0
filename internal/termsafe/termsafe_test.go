package termsafe

import "testing"

func TestEscapes(t *testing.T) {
	for _, c := range []struct{ in, text, lines string }{
		{"plain label", "plain label", "plain label"},
		{"x\x1b]0;PWNED\x07\x1b[2J", `x\x1b]0;PWNED\x07\x1b[2J`, `x\x1b]0;PWNED\x07\x1b[2J`},
		{"a\nb\tc\r", `a\x0ab\x09c\x0d`, "a\nb\tc\\x0d"},
		{"c1 \u009b31m é", `c1 \x9b31m é`, `c1 \x9b31m é`},
		{"del\x7f", `del\x7f`, `del\x7f`},
	} {
		if got := Text(c.in); got != c.text {
			t.Errorf("Text(%q) = %q, want %q", c.in, got, c.text)
		}
		if got := Lines(c.in); got != c.lines {
			t.Errorf("Lines(%q) = %q, want %q", c.in, got, c.lines)
		}
	}
}
