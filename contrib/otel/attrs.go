package leaderotel

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/leaderaware/leaderaware/elector"
)

// attrs is one attribute set as ready-made options, so that recording
// allocates nothing.
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
	obs []metric.ObserveOption
}

func newAttrs(kv ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}, obs: []metric.ObserveOption{o}}
}

// leaseAttrs are the attribute sets of one lease. They do not change.
type leaseAttrs struct {
	lease     attrs
	demotions [nEnum]attrs // by elector.Cause
	fenced    [2]attrs     // committed, refused
	jobs      [2][2]attrs  // by phase, job result
}

// Indexes of leaseAttrs.fenced and leaseAttrs.jobs.
const (
	committed, refused = 0, 1
	phaseStart         = 0
	phaseStop          = 1
	jobOK, jobError    = 0, 1
)

var (
	fencedLabels = [2]string{"committed", "refused"}
	phaseLabels  = [2]string{"start", "stop"}
	jobLabels    = [2]string{"ok", "error"}
)

func newLeaseAttrs(lease string) *leaseAttrs {
	l := leaseKey.String(lease)
	a := &leaseAttrs{lease: newAttrs(l)}
	for cause := range a.demotions {
		a.demotions[cause] = newAttrs(l, causeKey.String(label(elector.Cause(cause))))
	}
	for r := range a.fenced {
		a.fenced[r] = newAttrs(l, fencedKey.String(fencedLabels[r]))
	}
	for phase := range a.jobs {
		for result := range a.jobs[phase] {
			a.jobs[phase][result] = newAttrs(l, phaseKey.String(phaseLabels[phase]), jobResultKey.String(jobLabels[result]))
		}
	}
	return a
}

// nEnum bounds the elector enums an Observer tells apart; values past it,
// or without a name, are recorded as "unknown".
const nEnum = 8

type enum interface {
	~uint8
	String() string
}

// index returns v's slot: v itself if it is a named value, else 0.
func index[T enum](v T) int {
	if int(v) < nEnum && v != 0 && v.String() != "unknown" {
		return int(v)
	}
	return 0
}

// label names the value in slot v.
func label[T enum](v T) string {
	if v == 0 {
		return "unknown"
	}
	return v.String()
}
