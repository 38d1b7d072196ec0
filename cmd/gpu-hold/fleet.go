// fleet.go owns the flags of the fleet queue on etcd (--queue and its
// environment variable, TLS, user and password, a config file) that every
// subcommand shares, --lost-grace of the hold itself, and the seam to the
// backend behind them: the etcd client in gpu-hold-fleet (fleet_etcd.go),
// the exec into gpu-hold-fleet in gpu-hold (fleet_exec.go), so that the
// holds that never use etcd do not pay for its client's start-up.
package main

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpu-hold/gpu-hold/hold"
	"github.com/gpu-hold/gpu-hold/queue"
)

// QueueEnv selects the queue backend when --queue is not given.
const QueueEnv = "GPU_HOLD_QUEUE"

// etcdPasswordEnv is etcdq.PasswordEnv, named here for the flags' help in
// a build without etcdq (fleet_etcd_test.go checks they agree).
const etcdPasswordEnv = "GPU_HOLD_ETCD_PASSWORD"

// etcdScheme is etcdq.Scheme, named here for a build without etcdq
// (fleet_etcd_test.go checks they agree).
const etcdScheme = "etcd://"

// fleetBinary is the binary built with the etcd backend (-tags etcd),
// installed next to gpu-hold.
const fleetBinary = "gpu-hold-fleet"

// fleetOpts are the etcd flags.
type fleetOpts struct {
	Queue, Config, CACert, Cert, Key, User, PasswordFile string
}

// fleetBackend is how this binary reaches the fleet queue; the build's
// fleet_*.go registers it.
type fleetBackend struct {
	// early runs before any subcommand that may open a queue, when the
	// flags select the fleet queue: gpu-hold's exec into gpu-hold-fleet
	// (it returns only with an error). nil in gpu-hold-fleet.
	early func() error
	// resolve turns the flags into the fleet queue (they select one).
	resolve func(g *globalOpts) (*hold.Fleet, error)
	// about says, for --version and doctor, where the etcd backend is.
	about func() string
	// refuse, when set, refuses flags the backend would refuse, before
	// early. nil in gpu-hold-fleet (its backend says it).
	refuse func(f *fleetOpts) error
}

var fleet fleetBackend

func addFleetFlags(pf *pflag.FlagSet, f *fleetOpts) {
	pf.StringVar(&f.Queue, "queue", "", "queue backend: etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?ttl=S&budget=K&connect=S] for the fleet queue, served by gpu-hold-fleet (default $"+QueueEnv+", else the queue directory)")
	pf.StringVar(&f.Config, "etcd-config", "", "JSON file with the etcd settings (endpoints, prefix, ttl, budget, connect, cacert, cert, key, user, password_file)")
	pf.StringVar(&f.CACert, "etcd-cacert", "", "CA bundle that etcd's server certificate must chain to")
	pf.StringVar(&f.Cert, "etcd-cert", "", "client certificate for etcd")
	pf.StringVar(&f.Key, "etcd-key", "", "client key for etcd")
	pf.StringVar(&f.User, "etcd-user", "", "etcd user (its password from --etcd-password-file or $"+etcdPasswordEnv+")")
	pf.StringVar(&f.PasswordFile, "etcd-password-file", "", "file holding the etcd user's password")
}

// addLostGraceFlag adds --lost-grace to the hold's flags.
func addLostGraceFlag(f *pflag.FlagSet, o *hold.Options) {
	durationVarP(f, &o.LostGrace, "lost-grace", "", 2*time.Second, "time between TERM and KILL when the etcd lease is lost (exit 76); at most the lease's ttl/3 less 500ms, so that the payload is gone before another host can be granted the token: the default is shortened to fit, a longer one given is refused")
}

// spec is the --queue URL, else $GPU_HOLD_QUEUE.
func (f *fleetOpts) spec() string {
	if f.Queue != "" {
		return f.Queue
	}
	return os.Getenv(QueueEnv)
}

// selected says whether the flags ask for the fleet queue rather than the
// directory (a --queue that is no etcd URL too: the backend refuses it).
func (f *fleetOpts) selected() bool { return f.spec() != "" || f.Config != "" }

// fleetEarly is the backend's early step when the flags select the fleet
// queue.
func (g *globalOpts) fleetEarly() error {
	if fleet.early == nil || !g.Fleet.selected() {
		return nil
	}
	if fleet.refuse != nil {
		if err := fleet.refuse(&g.Fleet); err != nil {
			return err
		}
	}
	return fleet.early()
}

// etcdFleet is the fleet queue the flags select, or nil for the directory.
func (g *globalOpts) etcdFleet() (*hold.Fleet, error) {
	if !g.Fleet.selected() {
		return nil, nil
	}
	return fleet.resolve(g)
}

// openFleet opens the etcd queue when one is configured (ok false: use
// the directory).
func (g *globalOpts) openFleet() (q queue.Queue, ok bool, err error) {
	f, err := g.etcdFleet()
	if err != nil || f == nil {
		return nil, err != nil, err
	}
	q, err = f.Open(g.Resource, g.warn)
	if err != nil {
		return nil, true, usageErr("%v", err)
	}
	return q, true, nil
}
