// config_test.go tests the --queue URL and the config's checks.
package etcdq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	var c Config
	if err := c.ParseURL("etcd://a:2379,b:2379/gpu-hold/fleet/?ttl=5&budget=3&connect=30"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Endpoints, " ") != "a:2379 b:2379" || c.Prefix != "/gpu-hold/fleet" || c.TTL != 5*time.Second || c.Budget != 3 || c.ConnectTimeout != 30*time.Second {
		t.Fatalf("parsed %+v", c)
	}
	var d Config
	if err := d.ParseURL("etcd://a:2379/p"); err != nil || d.Finish() != nil || d.ConnectTimeout != 10*time.Second {
		t.Fatalf("the default connect timeout: %v, want 10s", d.ConnectTimeout)
	}
	for _, bad := range []string{"/var/lib/gpu-hold", "etcd://a:2379", "etcd:///p", "etcd://a:1/p?ttl=0", "etcd://a:1/p?budget=x", "etcd://a:1/p?color=red", "etcd://a:1/p?ttl=1", "etcd://a:1/p?connect=0"} {
		var c Config
		err := c.ParseURL(bad)
		if err == nil {
			err = c.Finish()
		}
		if err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestConfigFileAndPassword(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("hunter2\n"), 0o600)
	f := filepath.Join(dir, "etcd.json")
	os.WriteFile(f, []byte(`{"endpoints":["e:2379"],"prefix":"/fleet","budget":2,"connect":3,"user":"alice","password_file":"`+pw+`"}`), 0o600)
	var c Config
	if err := c.LoadFile(f); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.Password != "hunter2" || c.Budget != 2 || c.Prefix != "/fleet" || c.ConnectTimeout != 3*time.Second || strings.Contains(c.String(), "hunter2") {
		t.Fatalf("config %+v", c)
	}
	os.WriteFile(f, []byte(`{"endpoints":["e:2379"],"prefix":"/fleet","pasword":"x"}`), 0o600)
	if err := (&Config{}).LoadFile(f); err == nil {
		t.Error("a misspelt field was accepted")
	}
	nopw := Config{Endpoints: []string{"e:1"}, Prefix: "/p", User: "bob"}
	t.Setenv(PasswordEnv, "")
	if err := nopw.Finish(); err == nil || !strings.Contains(err.Error(), PasswordEnv) {
		t.Errorf("a user without a password: %v", err)
	}
}
