package main

import (
	"os"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"

	"github.com/auditrail/auditrail/internal/testenv"
)

// Helpers shared by the in-process tests and the process-level ones (build
// tag e2e: make test-e2e).

// composeService is what the tests read of a service of docker-compose.yml.
type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Restart     string            `yaml:"restart"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Networks map[string]struct {
		IPv4Address string `yaml:"ipv4_address"`
	} `yaml:"networks"`
}

// scrape is one parsed answer of GET /metrics.
type scrape map[string]*dto.MetricFamily

// value sums the series of name whose labels include want (a counter's or
// gauge's value, a histogram's count); -1 when no series matches.
func (s scrape) value(name string, want ...string) float64 {
	fam, ok := s[name]
	if !ok {
		return -1
	}
	found, sum := false, 0.0
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(want); i += 2 {
			match = match && labels[want[i]] == want[i+1]
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	if !found {
		return -1
	}
	return sum
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc composeFile
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return doc
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet  string `yaml:"subnet"`
				IPRange string `yaml:"ip_range"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
}

func TestMain(m *testing.M) { testenv.Main(m) }
