// Command etcdserver is the tests' and the bench's etcd: one member of
// go.etcd.io/etcd/server/v3/embed on loopback, run as a process of its own
// so that the server never links into gpu-hold (and a test can stop, freeze
// or restart it). It prints "ready" once it serves, and stops on TERM/INT.
//
//	etcdserver -data DIR -client http://127.0.0.1:P -peer http://127.0.0.1:Q [-cert F -key F [-ca F]]
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	data := flag.String("data", "", "data directory (kept across restarts)")
	client := flag.String("client", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("peer", "http://127.0.0.1:2380", "peer URL")
	cert := flag.String("cert", "", "server TLS cert (https client URL)")
	key := flag.String("key", "", "server TLS key")
	ca := flag.String("ca", "", "CA that client certs must chain to (client cert auth)")
	flag.Parse()
	if err := run(*data, *client, *peer, *cert, *key, *ca); err != nil {
		fmt.Fprintln(os.Stderr, "etcdserver:", err)
		os.Exit(1)
	}
}

func run(data, client, peer, cert, key, ca string) error {
	cu, err := url.Parse(client)
	if err != nil {
		return err
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = data
	cfg.LogLevel = "error"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = cert, key
	if ca != "" {
		cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = ca, true
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		return fmt.Errorf("not ready within 30s")
	}
	fmt.Println("ready")
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sigc:
	case err := <-e.Err():
		return err
	}
	return nil
}
