// Package suggest owns "did you mean": the known word nearest to a
// mistyped one, for flag values, subcommands and resource names alike.
package suggest

import (
	"fmt"
	"strings"
)

// DidYouMean is ": did you mean X?" for the known word nearest to s, or ""
// when none is near.
func DidYouMean(s string, known []string) string {
	if k := Nearest(s, known); k != "" {
		return fmt.Sprintf(": did you mean %q?", k)
	}
	return ""
}

// Nearest is the known word within two edits of s, ignoring case (or that
// s starts or ends a longer word with), "" when there is none.
func Nearest(s string, known []string) string {
	best, bestD := "", 3
	ls := strings.ToLower(s)
	for _, k := range known {
		d := editDistance(ls, strings.ToLower(k))
		if len(ls) >= 2 && d > 2 && (strings.HasPrefix(k, ls) || strings.HasSuffix(ls, k)) {
			d = 2 // "q" is too short, "que" is queue, "ebpf" is bpf
		}
		if d < len(k) && (d < bestD || d == bestD && strings.HasPrefix(k, ls)) { // "of" is off, not on
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur := make([]int, len(rb)+1)
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
}
