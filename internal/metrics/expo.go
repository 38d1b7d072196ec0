// expo.go owns how the metrics are written: as client_model metric
// families, encoded by prometheus/common/expfmt in the text exposition
// format node_exporter's textfile collector reads (no hand-made escaping
// or number formatting).
package metrics

import (
	"bytes"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// family is one metric family being built.
type family struct{ mf *dto.MetricFamily }

func newFamily(name, help string, typ dto.MetricType) *family {
	return &family{&dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: typ.Enum()}}
}

func labels(kv ...string) []*dto.LabelPair {
	var out []*dto.LabelPair
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &dto.LabelPair{Name: proto.String(kv[i]), Value: proto.String(kv[i+1])})
	}
	return out
}

// add adds a sample with value v (a counter or gauge, by the family's type).
func (f *family) add(v float64, kv ...string) *family {
	m := &dto.Metric{Label: labels(kv...)}
	switch f.mf.GetType() {
	case dto.MetricType_COUNTER:
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	default:
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	f.mf.Metric = append(f.mf.Metric, m)
	return f
}

// addSummary adds a summary's sum and count (no quantiles).
func (f *family) addSummary(sum float64, count uint64, kv ...string) *family {
	f.mf.Metric = append(f.mf.Metric, &dto.Metric{Label: labels(kv...), Summary: &dto.Summary{SampleSum: proto.Float64(sum), SampleCount: proto.Uint64(count)}})
	return f
}

// encode writes the families in the text format, in name order.
func encode(fams ...*family) ([]byte, error) {
	sort.Slice(fams, func(i, j int) bool { return fams[i].mf.GetName() < fams[j].mf.GetName() })
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f.mf); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}
