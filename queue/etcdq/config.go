// Package etcdq is the queue backend on etcd, for a resource shared by
// holds on many hosts: tickets are keys on each hold's lease, ordered by
// create revision; a ticket is granted while fewer than the resource's
// budget of tickets are ahead of it; the create revision is the fencing
// token; and the holder keeps its own deadline, since a lease cannot fence
// a device. config.go owns the backend's settings: the --queue URL, the
// config file, TLS and user/password auth.
package etcdq

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Scheme is the URL scheme that selects this backend.
const Scheme = "etcd://"

// Config is where the fleet's etcd is and how to talk to it.
type Config struct {
	Endpoints []string      `json:"endpoints"`
	Prefix    string        `json:"prefix"`
	TTL       time.Duration `json:"-"` // the session lease's TTL (default 10s)
	TTLSec    int           `json:"ttl,omitempty"`
	Budget    int           `json:"budget,omitempty"` // concurrent holders per resource (default: the fleet's, else 1)
	// budgetGiven: Budget was set (URL or file), so it must be the fleet's.
	budgetGiven bool
	// ConnectTimeout bounds the first contact and each call that waits
	// for etcd to answer (default 10s); ConnectSec sets it in seconds.
	ConnectTimeout time.Duration `json:"-"`
	ConnectSec     int           `json:"connect,omitempty"`
	CACert         string        `json:"cacert,omitempty"`
	Cert           string        `json:"cert,omitempty"`
	Key            string        `json:"key,omitempty"`
	User           string        `json:"user,omitempty"`
	PasswordFile   string        `json:"password_file,omitempty"`
	Password       string        `json:"-"` // from PasswordFile or the environment, never a flag
	// Host names this host in tickets (a dead holder on this host is
	// reaped here; one on another host is that host's to reap).
	Host string `json:"-"`
}

// Is reports whether spec selects the etcd backend.
func Is(spec string) bool { return strings.HasPrefix(spec, Scheme) }

// ParseURL reads etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?ttl=S&budget=K&connect=S]
// into c (fields already set by a config file are kept unless the URL
// names them).
func (c *Config) ParseURL(spec string) error {
	if !Is(spec) {
		return fmt.Errorf("queue %q is not an etcd URL: use etcd://HOST:PORT[,HOST:PORT...]/PREFIX", spec)
	}
	rest := strings.TrimPrefix(spec, Scheme)
	hosts, path, _ := strings.Cut(rest, "/")
	path, query, _ := strings.Cut(path, "?")
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.Endpoints = append(c.Endpoints, h)
		}
	}
	if path != "" {
		c.Prefix = "/" + strings.Trim(path, "/")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return fmt.Errorf("queue %q: bad query: %v", spec, err)
	}
	for k, vs := range q {
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 {
			return fmt.Errorf("queue %q: %s=%q must be a whole number of at least 1", spec, k, vs[0])
		}
		switch k {
		case "ttl":
			c.TTLSec = n
		case "budget":
			c.Budget = n
		case "connect":
			c.ConnectSec = n
		default:
			return fmt.Errorf("queue %q: unknown setting %q (known: ttl, budget, connect)", spec, k)
		}
	}
	return nil
}

// LoadFile reads a JSON config file (endpoints, prefix, ttl, budget,
// connect, cacert, cert, key, user, password_file) into c.
func (c *Config) LoadFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read etcd config %s: %v", path, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return fmt.Errorf("etcd config %s: %v (fields: endpoints, prefix, ttl, budget, connect, cacert, cert, key, user, password_file)", path, err)
	}
	return nil
}

// PasswordEnv is the environment variable the password may come from.
const PasswordEnv = "GPU_HOLD_ETCD_PASSWORD"

// Finish fills defaults and the password and checks the result.
func (c *Config) Finish() error {
	if len(c.Endpoints) == 0 {
		return errors.New("no etcd endpoints: use --queue etcd://HOST:PORT/PREFIX or endpoints in the etcd config file")
	}
	if c.Prefix == "" || c.Prefix == "/" {
		return errors.New("no etcd key prefix: use --queue etcd://HOST:PORT/PREFIX (e.g. /gpu-hold)")
	}
	c.Prefix = "/" + strings.Trim(c.Prefix, "/")
	if c.TTLSec > 0 {
		c.TTL = time.Duration(c.TTLSec) * time.Second
	}
	if c.TTL <= 0 {
		c.TTL = 10 * time.Second
	}
	if c.TTL < 2*time.Second {
		return fmt.Errorf("etcd lease ttl %v is too short: use at least 2s", c.TTL)
	}
	c.budgetGiven = c.budgetGiven || c.Budget > 0
	if c.Budget <= 0 {
		c.Budget = 1
	}
	if c.ConnectSec > 0 {
		c.ConnectTimeout = time.Duration(c.ConnectSec) * time.Second
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.User != "" && c.Password == "" {
		switch {
		case c.PasswordFile != "":
			b, err := os.ReadFile(c.PasswordFile)
			if err != nil {
				return fmt.Errorf("cannot read the etcd password file %s: %v", c.PasswordFile, err)
			}
			c.Password = strings.TrimRight(string(b), "\r\n")
		case os.Getenv(PasswordEnv) != "":
			c.Password = os.Getenv(PasswordEnv)
		default:
			return fmt.Errorf("etcd user %q has no password: put it in a file (--etcd-password-file) or in $%s", c.User, PasswordEnv)
		}
	}
	return nil
}

// tlsConfig builds the client's TLS from the CA, cert and key files; nil
// when none is set (plain text, for loopback and tests).
func (c *Config) tlsConfig() (*tls.Config, error) {
	if c.CACert == "" && c.Cert == "" && c.Key == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CACert != "" {
		pem, err := os.ReadFile(c.CACert)
		if err != nil {
			return nil, fmt.Errorf("cannot read etcd CA %s: %v", c.CACert, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA %s holds no PEM certificate", c.CACert)
		}
		tc.RootCAs = pool
	}
	if (c.Cert == "") != (c.Key == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together: give both, or neither")
	}
	if c.Cert != "" {
		pair, err := tls.LoadX509KeyPair(c.Cert, c.Key)
		if err != nil {
			return nil, fmt.Errorf("cannot load etcd client cert %s / key %s: %v", c.Cert, c.Key, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// String names the queue for messages (no credentials).
func (c *Config) String() string {
	return Scheme + strings.Join(c.Endpoints, ",") + c.Prefix
}
