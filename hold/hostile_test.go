// hostile_test.go holds the entry point of the pieces of hold's tests that
// run as another uid (plant.AsOther).
package hold

import (
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/plant"
)

// TestHelperAsOther is not a test of its own: it runs the helper
// plant.AsOther names, in the process it started as another uid.
func TestHelperAsOther(t *testing.T) { plant.RunHelper(t) }
