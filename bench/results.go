package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/cli"
)

// The markers of the section of docs/benchmarks.md that make bench
// writes: one row per figure, the latest measurement of each.
const (
	ResultsBegin = "<!-- make bench writes the table below (auditrail-bench --results); do not edit it by hand -->"
	ResultsEnd   = "<!-- end of the table make bench writes -->"
	resultsHead  = "| figure | value | reference | ratio | goal | verdict | measured |\n|---|---|---|---|---|---|---|\n"
)

// Machine describes where a run measured: the CPUs, the date, the build.
type Machine struct {
	CPUs    int
	Model   string
	At      time.Time
	Version string
}

// ThisMachine is the machine running this process, at now.
func ThisMachine(version string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), At: time.Now().UTC(), Version: version}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.Model = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func (m Machine) String() string {
	s := fmt.Sprintf("%s, %d CPUs", m.At.Format(time.DateOnly), m.CPUs)
	if m.Model != "" {
		s += " (" + m.Model + ")"
	}
	if m.Version != "" {
		s += ", " + m.Version
	}
	return s
}

// row is a figure as a row of the results table.
func (f Figure) row(m Machine) string {
	goal := f.goal("%s %.2f", "≤ %g %s", "≥ %g %s")
	goal = strings.NewReplacer("<=", "≤", ">=", "≥").Replace(goal)
	verdict := "met"
	if !f.Met() {
		verdict = "**not met**"
	}
	if goal == "" {
		goal, verdict = "none", "a figure"
	}
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	return fmt.Sprintf("| %s | %.1f %s | %.1f (%s) | %.2f | %s | %s | %s |",
		cell(f.Name), f.Value, cell(f.Unit), f.Reference, cell(f.RefName), f.Ratio(), goal, verdict, cell(m.String()))
}

// WriteResults puts figures, measured on m, into the results table of
// the Markdown file at path (between ResultsBegin and ResultsEnd): a figure
// already there is replaced in its place, a new one appended; the figures
// of benchmarks not run this time stay as they were.
func WriteResults(path string, m Machine, figures []Figure) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--results: %w", err)
	}
	head, rest, ok := bytes.Cut(raw, []byte(ResultsBegin))
	if !ok {
		return fmt.Errorf("--results: %s has no line %q", path, ResultsBegin)
	}
	table, tail, ok := bytes.Cut(rest, []byte(ResultsEnd))
	if !ok {
		return fmt.Errorf("--results: %s has no line %q", path, ResultsEnd)
	}
	var names []string
	rows := map[string]string{}
	for _, line := range strings.Split(string(table), "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| figure |") {
			continue
		}
		name := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(line, "| "), " | ", 2)[0])
		if _, seen := rows[name]; !seen {
			names = append(names, name)
		}
		rows[name] = line
	}
	for _, f := range figures {
		name := strings.ReplaceAll(f.Name, "|", `\|`)
		if _, seen := rows[name]; !seen {
			names = append(names, name)
		}
		rows[name] = f.row(m)
	}
	var b bytes.Buffer
	b.Write(head)
	b.WriteString(ResultsBegin + "\n\n" + resultsHead)
	for _, n := range names {
		b.WriteString(rows[n] + "\n")
	}
	b.WriteString("\n" + ResultsEnd)
	b.Write(tail)
	return cli.WriteFileAtomic(path, b.Bytes(), 0o644)
}
