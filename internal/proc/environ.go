// environ.go owns finding an entry in a process's environment block.
package proc

import "bytes"

// EnvHas reports whether the environment block env (/proc/PID/environ:
// NUL-terminated KEY=VALUE strings) holds key=value. bash, while it reads
// its environment at start-up, writes a NUL over each string's '=' and
// puts it back, so a read in that moment shows KEY\0VALUE: that counts
// too, or a starting bash would pass for a process without the entry.
func EnvHas(env []byte, key, value string) bool {
	block := make([]byte, 0, len(env)+2)
	block = append(append(append(block, 0), env...), 0)
	for _, sep := range []string{"=", "\x00"} {
		if bytes.Contains(block, []byte("\x00"+key+sep+value+"\x00")) {
			return true
		}
	}
	return false
}
