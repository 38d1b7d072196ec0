// auth_test.go tests the way to a fleet's etcd that is not open: TLS with
// a client certificate (certificates made here), and etcd's user and
// password auth, each against a real server.
package etcdq

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/gpu-hold/gpu-hold/internal/etcdtest"
)

// certs makes a CA and, signed by it, a server cert for 127.0.0.1 and a
// client cert; it returns their PEM files.
func certs(t *testing.T) (ca, srvCert, srvKey, cliCert, cliKey string) {
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(k)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kd)
	}
	ca = write("ca.pem", "CERTIFICATE", caDER)
	srvCert, srvKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return
}

func tryEnqueue(t *testing.T, c Config) error {
	t.Helper()
	c.ConnectTimeout = 3 * time.Second
	q, err := Open(c, "gpu", nil)
	if err != nil {
		return err
	}
	defer q.Close()
	w, err := q.Enqueue(ticket("x"))
	if err == nil {
		w.Cancel()
	}
	return err
}

func TestTLSClientCert(t *testing.T) {
	ca, sc, sk, cc, ck := certs(t)
	s := etcdtest.StartTLS(t, sc, sk, ca)
	var c Config
	c.ParseURL(s.URL("/tls"))
	c.CACert, c.Cert, c.Key = ca, cc, ck
	if err := tryEnqueue(t, c); err != nil {
		t.Fatalf("with the CA and a client cert: %v", err)
	}
	c.Cert, c.Key = "", ""
	if err := tryEnqueue(t, c); err == nil {
		t.Fatal("a server that requires client certs took a client without one")
	}
	var plain Config
	plain.ParseURL(s.URL("/tls"))
	plain.CACert = ca
	plain.Cert = cc
	if err := tryEnqueue(t, plain); err == nil || !strings.Contains(err.Error(), "--etcd-key") {
		t.Fatalf("a cert without its key: %v", err)
	}
}

func TestUserPassword(t *testing.T) {
	s := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "s3cret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("enabling etcd auth: %v", err)
		}
	}
	cli.Close()
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	var c Config
	c.ParseURL(s.URL("/auth"))
	c.User, c.PasswordFile = "root", pw
	if err := tryEnqueue(t, c); err != nil {
		t.Fatalf("with the right password: %v", err)
	}
	os.WriteFile(pw, []byte("wrong\n"), 0o600)
	c.Password = ""
	if err := tryEnqueue(t, c); err == nil || !strings.Contains(err.Error(), "refused user") {
		t.Fatalf("with a wrong password: %v", err)
	}
	var anon Config
	anon.ParseURL(s.URL("/auth"))
	if err := tryEnqueue(t, anon); err == nil {
		t.Fatal("etcd with auth took a ticket from no user")
	}
}
