// main_test.go owns this package's test process: its eBPF tests pin their
// spares and iterators in a root of their own, not the host's.
package tracker

import (
	"os"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/teststock"
)

func TestMain(m *testing.M) {
	remove := teststock.PrivateRoot()
	code := m.Run()
	remove()
	os.Exit(code)
}
