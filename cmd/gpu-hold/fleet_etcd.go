//go:build etcd

// fleet_etcd.go owns the etcd backend of gpu-hold-fleet (built with -tags
// etcd): the flags turned into etcdq's config, and the fleet queue that
// holds, reaps, the guard and the queue commands open with it.
package main

import (
	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/internal/fleetenv"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/queue/etcdq"
)

func init() {
	fleet = fleetBackend{resolve: etcdResolve, about: func() string { return "built in (etcd client linked)" }}
}

// etcdResolve is the fleet queue of the flags, on etcd.
func etcdResolve(g *globalOpts) (*hold.Fleet, error) {
	c, err := g.etcdConfig()
	if err != nil || c == nil {
		return nil, err
	}
	cfg := *c
	return &hold.Fleet{
		Open:     func(resource string, warn func(string)) (queue.Queue, error) { return etcdq.Open(cfg, resource, warn) },
		Name:     cfg.String(),
		TTL:      cfg.TTL,
		Interval: cfg.Interval(),
	}, nil
}

// etcdConfig is the etcd backend's config, or nil for the directory.
func (g *globalOpts) etcdConfig() (*etcdq.Config, error) {
	f := &g.Fleet
	if !f.selected() {
		return nil, nil
	}
	c := &etcdq.Config{}
	if f.Config != "" {
		if err := c.LoadFile(f.Config); err != nil {
			return nil, usageErr("%v", err)
		}
	}
	if spec := f.spec(); spec != "" {
		if err := c.ParseURL(spec); err != nil {
			return nil, usageErr("%v", err)
		}
	}
	for _, s := range []struct {
		to *string
		v  string
	}{{&c.CACert, f.CACert}, {&c.Cert, f.Cert}, {&c.Key, f.Key}, {&c.User, f.User}, {&c.PasswordFile, f.PasswordFile}} {
		if s.v != "" {
			*s.to = s.v
		}
	}
	if err := c.Finish(); err != nil {
		return nil, usageErr("%v", err)
	}
	c.Host = fleetenv.TicketHost()
	return c, nil
}
