// Package bench holds the benchmarks of `auditrail bench` (make bench). Each
// measures auditrail beside a reference measured in the same run on the same
// machine and reports the ratio.
package bench

import (
	"fmt"
	"io"
	"time"
)

// Figure is one measured quantity beside its reference.
type Figure struct {
	Name      string
	Value     float64
	Unit      string
	Reference float64
	RefName   string
	// Goal is the ratio Value/Reference to reach (or not exceed, when Lower).
	Goal  float64
	Lower bool
	// Max, when set, is an absolute bound the value must not exceed as
	// well (an issue's goal in Unit, e.g. "≤ 30 ms"); Min one it must reach
	// (e.g. "≥ 100k messages/s").
	Max, Min float64
}

// Ratio is Value / Reference.
func (f Figure) Ratio() float64 { return f.Value / f.Reference }

// Met reports whether the goal holds (and Max, when set).
func (f Figure) Met() bool {
	if f.Max > 0 && f.Value > f.Max || f.Min > 0 && f.Value < f.Min {
		return false
	}
	if f.Lower {
		return f.Ratio() <= f.Goal
	}
	return f.Ratio() >= f.Goal
}

// Print writes the figure as one line.
func (f Figure) Print(w io.Writer) {
	verdict := "met"
	if !f.Met() {
		verdict = "NOT met"
	}
	op := ">="
	if f.Lower {
		op = "<="
	}
	bound := ""
	if f.Max > 0 {
		bound = fmt.Sprintf(" and <= %g %s", f.Max, f.Unit)
	}
	if f.Min > 0 {
		bound += fmt.Sprintf(" and >= %g %s", f.Min, f.Unit)
	}
	fmt.Fprintf(w, "%-44s %12.1f %-8s reference %12.1f (%s)  ratio %.2f  goal %s %.2f%s: %s\n",
		f.Name, f.Value, f.Unit, f.Reference, f.RefName, f.Ratio(), op, f.Goal, bound, verdict)
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
