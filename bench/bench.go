// Package bench holds the benchmarks of `auditrail bench` (make bench). Each
// measures auditrail beside a reference measured in the same run on the same
// machine and reports the ratio.
package bench

import (
	"fmt"
	"io"
	"strings"
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

// NoRatioGoal as a Figure's Goal (with Lower) says that the ratio has no
// goal: the figure's goal is its bound (Max, Min), or it has none (a
// figure reported beside its reference, as the CPU of a store no issue
// bounds).
const NoRatioGoal = 1e9

// goal is the figure's goal as text ("" without one).
func (f Figure) goal(ratioFmt, maxFmt, minFmt string) string {
	var parts []string
	if f.Goal != NoRatioGoal {
		op := ">="
		if f.Lower {
			op = "<="
		}
		parts = append(parts, fmt.Sprintf(ratioFmt, op, f.Goal))
	}
	if f.Max > 0 {
		parts = append(parts, fmt.Sprintf(maxFmt, f.Max, f.Unit))
	}
	if f.Min > 0 {
		parts = append(parts, fmt.Sprintf(minFmt, f.Min, f.Unit))
	}
	return strings.Join(parts, ", ")
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
	goal := f.goal("goal %s %.2f", "<= %g %s", ">= %g %s")
	if goal == "" {
		goal, verdict = "no goal", "a figure"
	}
	fmt.Fprintf(w, "%-44s %12.1f %-8s reference %12.1f (%s)  ratio %.2f  %s: %s\n",
		f.Name, f.Value, f.Unit, f.Reference, f.RefName, f.Ratio(), goal, verdict)
}

func rate(n int, d time.Duration) float64 { return float64(n) / d.Seconds() }
