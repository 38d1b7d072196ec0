// node.go owns what a device pattern stands for: the nodes it matches now,
// and the identity an open fd is compared with (st_rdev for device nodes,
// st_dev/st_ino otherwise).
package device

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Node is one existing node a device pattern matched. Character and
// block devices are matched by the device number they stand for (another
// node for the same device, say inside a container, is the same device);
// anything else by the file's own st_dev/st_ino.
type Node struct {
	Path string `json:"path"`
	Kind string `json:"kind"`           // "char", "block" or "file"
	Rdev string `json:"rdev,omitempty"` // "major:minor" of a device node
	key  nodeKey
}

// nodeKey is what an open fd is compared with.
type nodeKey struct {
	kind         byte // 'c', 'b' or 'f'
	major, minor uint32
	ino          uint64 // 0 for device nodes
}

// Expand expands device patterns (paths or globs) to the nodes that
// exist now. Patterns that match nothing, and directories, are skipped; two
// paths to one node (a symlink and its target) yield the first. It fails only
// on a malformed glob.
func Expand(patterns []string) ([]Node, error) {
	var nodes []Node
	seen := map[nodeKey]bool{}
	for _, pat := range patterns {
		paths, err := filepath.Glob(pat)
		if err != nil {
			return nil, fmt.Errorf("device pattern %q is not a valid glob: %v", pat, err)
		}
		for _, p := range paths {
			var stx unix.Statx_t
			if err := unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE|unix.STATX_INO, &stx); err != nil {
				continue // vanished, or a dangling symlink
			}
			key, ok := keyOf(&stx)
			if !ok || seen[key] {
				continue
			}
			seen[key] = true
			n := Node{Path: p, key: key, Kind: "file"}
			switch key.kind {
			case 'c':
				n.Kind = "char"
			case 'b':
				n.Kind = "block"
			}
			if key.kind != 'f' {
				n.Rdev = fmt.Sprintf("%d:%d", key.major, key.minor)
			}
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// keyOf returns the identity of what a statx result describes; ok is false
// for directories, which are never "a device".
func keyOf(stx *unix.Statx_t) (nodeKey, bool) {
	switch uint32(stx.Mode) & unix.S_IFMT {
	case unix.S_IFDIR:
		return nodeKey{}, false
	case unix.S_IFCHR:
		return nodeKey{kind: 'c', major: stx.Rdev_major, minor: stx.Rdev_minor}, true
	case unix.S_IFBLK:
		return nodeKey{kind: 'b', major: stx.Rdev_major, minor: stx.Rdev_minor}, true
	}
	return nodeKey{kind: 'f', major: stx.Dev_major, minor: stx.Dev_minor, ino: stx.Ino}, true
}
