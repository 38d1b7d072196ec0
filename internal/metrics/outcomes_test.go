// outcomes_test.go owns the check that the metrics start every cause of the
// table of outcomes at zero, so that its rate works from the first hold.
package metrics

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpu-hold/gpu-hold/internal/record"
)

func TestEveryCauseStartsAtZero(t *testing.T) {
	st := &metricsState{Version: 1, Exits: map[string]uint64{}}
	data, err := st.render("gpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range record.Causes() {
		series := fmt.Sprintf(`gpu_hold_exits_total{resource="gpu",cause=%q} 0`, c)
		if !strings.Contains(string(data), series) {
			t.Errorf("the metrics of a fresh resource lack %s: every cause of record.Outcomes starts at 0\n%s", series, data)
		}
	}
}
