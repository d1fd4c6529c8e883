package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// WriteResults replaces the figures it measured in place, appends new
// ones, keeps the others, and leaves the rest of the document alone.
func TestWriteResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	doc := "# Benchmarks\n\nprose\n\n" + ResultsBegin + "\n\n" + resultsHead +
		"| old figure | 1.0 ms | 1.0 (x) | 1.00 | ≤ 1.00 | met | 2026-01-01, 2 CPUs |\n" +
		"| decode (p50) | 9.0 ns | 9.0 (x) | 1.00 | ≤ 1.00 | met | 2026-01-01, 2 CPUs |\n" +
		"\n" + ResultsEnd + "\n\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	m := Machine{CPUs: 2, Model: "Test CPU", At: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), Version: "0.9.0-dev"}
	figs := []Figure{
		{Name: "decode (p50)", Value: 5, Unit: "ns", Reference: 10, RefName: "generic", Goal: 0.8, Lower: true},
		{Name: "new | figure", Value: 30, Unit: "k/s", Reference: 10, RefName: "ref", Goal: 2, Min: 40},
	}
	if err := WriteResults(path, m, figs); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# Benchmarks\n\nprose\n\n" + ResultsBegin + "\n\n" + resultsHead +
		"| old figure | 1.0 ms | 1.0 (x) | 1.00 | ≤ 1.00 | met | 2026-01-01, 2 CPUs |\n" +
		"| decode (p50) | 5.0 ns | 10.0 (generic) | 0.50 | ≤ 0.80 | met | 2026-11-28, 2 CPUs (Test CPU), 0.9.0-dev |\n" +
		"| new \\| figure | 30.0 k/s | 10.0 (ref) | 3.00 | ≥ 2.00, ≥ 40 k/s | **not met** | 2026-11-28, 2 CPUs (Test CPU), 0.9.0-dev |\n" +
		"\n" + ResultsEnd + "\n\nafter\n"
	if string(got) != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	// Again: the same rows, nothing duplicated.
	if err := WriteResults(path, m, figs); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(path); string(again) != want {
		t.Errorf("a second write changed the document:\n%s", again)
	}
	if err := WriteResults(filepath.Join(t.TempDir(), "none.md"), m, figs); err == nil {
		t.Error("a missing file: no error")
	}
	if err := os.WriteFile(path, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteResults(path, m, figs); err == nil || !strings.Contains(err.Error(), "has no line") {
		t.Errorf("no markers: %v", err)
	}
}
