// fleet.go owns the flags of the fleet queue on etcd (--queue and its
// environment variable, TLS, user and password, a config file) that every
// subcommand shares, and --lost-grace of the hold itself.
package main

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/queue"
	"github.com/gpu-hold/gpu-hold/queue/etcdq"
)

// QueueEnv selects the queue backend when --queue is not given.
const QueueEnv = "GPU_HOLD_QUEUE"

// fleetOpts are the etcd flags.
type fleetOpts struct {
	Queue, Config, CACert, Cert, Key, User, PasswordFile string
}

func addFleetFlags(pf *pflag.FlagSet, f *fleetOpts) {
	pf.StringVar(&f.Queue, "queue", "", "queue backend: etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?ttl=S&budget=K] for the fleet queue (default $"+QueueEnv+", else the queue directory)")
	pf.StringVar(&f.Config, "etcd-config", "", "JSON file with the etcd settings (endpoints, prefix, ttl, budget, cacert, cert, key, user, password_file)")
	pf.StringVar(&f.CACert, "etcd-cacert", "", "CA bundle that etcd's server certificate must chain to")
	pf.StringVar(&f.Cert, "etcd-cert", "", "client certificate for etcd")
	pf.StringVar(&f.Key, "etcd-key", "", "client key for etcd")
	pf.StringVar(&f.User, "etcd-user", "", "etcd user (its password from --etcd-password-file or $"+etcdq.PasswordEnv+")")
	pf.StringVar(&f.PasswordFile, "etcd-password-file", "", "file holding the etcd user's password")
}

// addLostGraceFlag adds --lost-grace to the hold's flags.
func addLostGraceFlag(f *pflag.FlagSet, o *hold.Options) {
	durationVarP(f, &o.LostGrace, "lost-grace", "", 2*time.Second, "time between TERM and KILL when the etcd lease is lost (exit 76)")
}

// etcdConfig is the etcd backend's config, or nil for the directory.
func (g *globalOpts) etcdConfig() (*etcdq.Config, error) {
	f := &g.Fleet
	spec := f.Queue
	if spec == "" {
		spec = os.Getenv(QueueEnv)
	}
	if spec == "" && f.Config == "" {
		return nil, nil
	}
	c := &etcdq.Config{}
	if f.Config != "" {
		if err := c.LoadFile(f.Config); err != nil {
			return nil, usageErr("%v", err)
		}
	}
	if spec != "" {
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
	c.Host = hold.TicketHost()
	return c, nil
}

// openFleet opens the etcd queue when one is configured (ok false: use
// the directory).
func (g *globalOpts) openFleet() (q queue.Queue, ok bool, err error) {
	c, err := g.etcdConfig()
	if err != nil || c == nil {
		return nil, err != nil, err
	}
	eq, err := etcdq.Open(*c, g.Resource, g.warn)
	if err != nil {
		return nil, true, usageErr("%v", err)
	}
	return eq, true, nil
}
