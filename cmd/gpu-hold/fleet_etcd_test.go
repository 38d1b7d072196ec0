//go:build etcd

// fleet_etcd_test.go tests the etcd flags' resolution in gpu-hold-fleet.
package main

import (
	"testing"

	"github.com/gpu-hold/gpu-hold/queue/etcdq"
)

func TestEtcdConfigFromEnv(t *testing.T) {
	g := &globalOpts{}
	t.Setenv(QueueEnv, "")
	if c, err := g.etcdConfig(); c != nil || err != nil {
		t.Fatalf("no --queue, no env: %+v %v", c, err)
	}
	t.Setenv(QueueEnv, "etcd://e1:2379,e2:2379/fleet?budget=2")
	g.Fleet.User, g.Fleet.PasswordFile = "", ""
	c, err := g.etcdConfig()
	if err != nil || c == nil || len(c.Endpoints) != 2 || c.Prefix != "/fleet" || c.Budget != 2 {
		t.Fatalf("from $%s: %+v %v", QueueEnv, c, err)
	}
	g.Fleet.Queue = "/not/a/url"
	if _, err := g.etcdConfig(); err == nil {
		t.Fatal("--queue that is not an etcd URL was accepted")
	}
}

// TestEtcdBackendRegistered: gpu-hold-fleet opens etcd itself and never
// execs (an exec there would loop).
func TestEtcdBackendRegistered(t *testing.T) {
	if fleet.early != nil {
		t.Fatal("the etcd build has an early step: it would exec instead of opening etcd")
	}
	if etcdScheme != etcdq.Scheme {
		t.Fatalf("gpu-hold refuses queues not starting %q, the backend reads %q", etcdScheme, etcdq.Scheme)
	}
	if etcdPasswordEnv != etcdq.PasswordEnv {
		t.Fatalf("flag help names $%s, the backend reads $%s", etcdPasswordEnv, etcdq.PasswordEnv)
	}
	g := &globalOpts{}
	g.Fleet.Queue = "etcd://127.0.0.1:1/fleet"
	f, err := g.etcdFleet()
	if err != nil || f == nil || f.Open == nil || f.String() == "" {
		t.Fatalf("etcdFleet = %+v, %v", f, err)
	}
}
