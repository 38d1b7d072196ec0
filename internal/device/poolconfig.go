// poolconfig.go owns the "pool" entry of a resource in resources.json: an
// explicit pool that replaces discovery, its checks (the file is admin
// input, but a mistake must be an error that names it, never a pool that
// gives two holds one node), and the choice between it and discovery.
package device

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// PoolConfig is a pool as resources.json gives it:
//
//	"gpu": {"devices": ["/dev/nvidia*"], "pool": {
//	  "devices": [{"nodes": ["/dev/nvidia0"], "kind": "nvidia", "uuid": "GPU-..."}, ...],
//	  "shared": ["/dev/nvidiactl"], "backfill": false}}
//
// "devices": [] means no pool (the resource is one token).
type PoolConfig struct {
	Devices  []DevConfig `json:"devices"`
	Shared   []string    `json:"shared,omitempty"`
	Backfill *bool       `json:"backfill,omitempty"` // default true
}

// DevConfig is one device of a configured pool.
type DevConfig struct {
	Nodes []string `json:"nodes"`
	Kind  string   `json:"kind,omitempty"` // nvidia, amd, npu, other (default)
	UUID  string   `json:"uuid,omitempty"`
	PCI   string   `json:"pci,omitempty"`
}

// Bounds on a configured pool.
const (
	maxPoolDevices = 1024
	maxDevNodes    = 16
)

// check reports the first problem of a configured pool.
func (c *PoolConfig) check() error {
	if len(c.Devices) > maxPoolDevices {
		return fmt.Errorf("pool has %d devices, more than %d", len(c.Devices), maxPoolDevices)
	}
	seen := map[string]string{}
	claim := func(p, who string) error {
		if err := checkNodePath(p); err != nil {
			return fmt.Errorf("%s: %v", who, err)
		}
		if prev, dup := seen[p]; dup {
			return fmt.Errorf("node %s is in %s and in %s: a node belongs to one device, or is shared", p, prev, who)
		}
		seen[p] = who
		return nil
	}
	for i, d := range c.Devices {
		who := fmt.Sprintf("pool device %d", i)
		if len(d.Nodes) == 0 || len(d.Nodes) > maxDevNodes {
			return fmt.Errorf("%s has %d nodes: give 1 to %d", who, len(d.Nodes), maxDevNodes)
		}
		switch d.Kind {
		case "", KindNVIDIA, KindAMD, KindNPU, KindOther:
		default:
			return fmt.Errorf("%s: kind %q is not one of nvidia, amd, npu, other", who, d.Kind)
		}
		if d.UUID != "" && !plainID(d.UUID) {
			return fmt.Errorf("%s: uuid %q must be up to 128 letters, digits, '-', ':', '.' or '_'", who, d.UUID)
		}
		if d.PCI != "" && !plainID(d.PCI) {
			return fmt.Errorf("%s: pci %q must be up to 128 letters, digits, '-', ':', '.' or '_'", who, d.PCI)
		}
		for _, n := range d.Nodes {
			if err := claim(n, who); err != nil {
				return err
			}
		}
	}
	for _, s := range c.Shared {
		if err := claim(s, "the shared nodes"); err != nil {
			return err
		}
	}
	return nil
}

// checkNodePath accepts an absolute, clean path with no glob characters:
// a pool names its nodes one by one.
func checkNodePath(p string) error {
	switch {
	case !filepath.IsAbs(p) || filepath.Clean(p) != p:
		return fmt.Errorf("node %q is not a clean absolute path", p)
	case strings.ContainsAny(p, "*?[\\,\n"):
		return fmt.Errorf("node %q has a glob or separator character: name each node", p)
	}
	return nil
}

// pool turns a checked configuration into a Pool.
func (c *PoolConfig) pool() Pool {
	p := Pool{Shared: append([]string(nil), c.Shared...), NoBackfill: c.Backfill != nil && !*c.Backfill}
	for _, d := range c.Devices {
		kind := d.Kind
		if kind == "" {
			kind = KindOther
		}
		p.Devices = append(p.Devices, Dev{Name: filepath.Base(d.Nodes[0]), Kind: kind, Nodes: append([]string(nil), d.Nodes...), UUID: d.UUID, PCI: d.PCI})
	}
	p.Devices = numbered(p.Devices)
	return p
}

// PoolOf is resource r's pool: its resources.json pool when it has one,
// else what Discover finds under root.
func PoolOf(r Resource, root string) Pool {
	if r.Pool != nil {
		return r.Pool.pool()
	}
	return Discover(root, r.Name)
}

// CheckCount checks a hold's device count against its pool: at least 1,
// and no more than the pool has (a pool of none or one takes 1).
func CheckCount(p Pool, n int) error {
	if n < 1 {
		return errors.New("--count must be at least 1")
	}
	if m := max(len(p.Devices), 1); n > m {
		return fmt.Errorf("--count %d is more than the %d device(s) of the pool: see gpu-hold doctor for the pool, or use --count %d", n, m, m)
	}
	return nil
}
