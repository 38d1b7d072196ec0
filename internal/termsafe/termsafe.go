// Package termsafe makes anyone's text safe to print on a terminal: a
// label, a host name or an error read from another user's ticket or record
// must not move the cursor, retitle the window or clear the screen of the
// root who reads it.
package termsafe

import (
	"fmt"
	"strings"
)

// Text shows every control character of s (C0, DEL, C1) as \xNN.
func Text(s string) string { return escape(s, false) }

// Lines is Text that keeps newlines and tabs: for messages of several lines.
func Lines(s string) string { return escape(s, true) }

func escape(s string, lines bool) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return control(r) && !(lines && (r == '\n' || r == '\t')) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if control(r) && !(lines && (r == '\n' || r == '\t')) {
			fmt.Fprintf(&b, "\\x%02x", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func control(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }
