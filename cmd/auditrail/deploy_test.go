package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"
)

const (
	alertsFile    = "../../deploy/prometheus/alerts.yml"
	dashboardFile = "../../deploy/grafana/auditrail.json"
)

var (
	metricRe  = regexp.MustCompile(`auditrail_[a-zA-Z0-9_]+`)
	matcherRe = regexp.MustCompile(`(auditrail_[a-zA-Z0-9_]+)\{([^}]*)\}`)
	labelRe   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
)

// targetLabels are added by Prometheus (job, instance) or by histograms
// (le), not by the process.
var targetLabels = map[string]bool{"job": true, "instance": true, "le": true}

// family resolves a name used in PromQL to the scraped family: itself, or
// the histogram it is a _bucket, _sum or _count series of.
func (s scrape) family(name string) *dto.MetricFamily {
	if f, ok := s[name]; ok {
		return f
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := s[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
				return f
			}
		}
	}
	return nil
}

// checkExpr checks that every auditrail metric of a PromQL expression is
// in the scrape, with the labels its matchers name.
func checkExpr(t *testing.T, s scrape, where, expr string) {
	t.Helper()
	names := metricRe.FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: no auditrail metric in %q", where, expr)
	}
	for _, name := range names {
		if s.family(name) == nil {
			t.Errorf("%s: metric %s is not in a scrape of the roles", where, name)
		}
	}
	for _, m := range matcherRe.FindAllStringSubmatch(expr, -1) {
		f := s.family(m[1])
		if f == nil {
			continue
		}
		have := map[string]bool{}
		for _, series := range f.GetMetric() {
			for _, l := range series.GetLabel() {
				have[l.GetName()] = true
			}
		}
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			if !have[l[1]] && !targetLabels[l[1]] {
				t.Errorf("%s: %s has no label %s", where, m[1], l[1])
			}
		}
	}
}

// checkDeployFiles checks deploy/prometheus/alerts.yml and
// deploy/grafana/auditrail.json against a real scrape: every metric they
// name exists with the labels they match on; the rules are well formed
// (and pass `promtool check rules` where promtool is installed: Debian's
// package prometheus, not installed by .ci/run, being 96 MB).
func checkDeployFiles(t *testing.T, s scrape) {
	t.Helper()
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || alerts[r.Alert] || r.Annotations["summary"] == "" || (r.Labels["severity"] != "warning" && r.Labels["severity"] != "critical") {
				t.Errorf("alert %q: a unique name, a summary and a severity (warning or critical) are required: %+v", r.Alert, r)
			}
			alerts[r.Alert] = true
			checkExpr(t, s, "alert "+r.Alert, r.Expr)
		}
	}
	// What the issue asks the alerts to cover.
	for _, want := range []string{"AuditrailIngestLagGrowing", "AuditrailDeadLettersGrowing", "AuditrailHookBreakerOpen", "AuditrailOutboxNotDraining", "AuditrailHTTP5xxRatio"} {
		if !alerts[want] {
			t.Errorf("no alert %s", want)
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		abs, _ := filepath.Abs(alertsFile)
		if out, err := exec.Command(promtool, "check", "rules", abs).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules: %v\n%s", err, out)
		}
	} else {
		t.Log("promtool not installed (Debian package prometheus): the rules are checked by parsing only")
	}

	raw, err = os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		ID      int      `json:"id"`
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var dash struct {
		Title      string  `json:"title"`
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("dashboard without title or uid")
	}
	ids := map[int]bool{}
	exprs := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d twice", p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs++
				checkExpr(t, s, "panel "+p.Title, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	// What the issue asks the dashboard to show.
	all, _ := json.Marshal(dash.Panels)
	for _, want := range []string{"auditrail_ingest_rows_total", "auditrail_ingest_consumer_pending_messages", "auditrail_ingest_commit_duration_seconds_bucket",
		"auditrail_http_requests_total", "auditrail_http_request_duration_seconds_bucket", "auditrail_hook_calls_total", "auditrail_hook_breakers_open",
		"AUDITRAIL_DLQ", "auditrail_outbox_pending_events", "auditrail_delivery_lag_seconds_bucket"} {
		if !strings.Contains(string(all), want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			checkExpr(t, s, "variable "+v.Name, q["query"].(string))
		}
	}
	t.Logf("deploy files: %d alerts, %d dashboard queries checked against the scrape", len(alerts), exprs)
}

// checkDocMetrics checks that the metric table of docs/operations.md lists exactly the
// auditrail metrics of the scrape.
func checkDocMetrics(t *testing.T, s scrape) {
	t.Helper()
	readme, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	// listed: true when the metric is served at once; false when its row
	// says it is absent until something happened ("absent before the
	// first …": a gauge of the time since an event).
	listed := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`auditrail_") {
			for _, name := range metricRe.FindAllString(cells[1], -1) {
				listed[name] = !strings.Contains(line, "absent before the first")
			}
		}
	}
	for name := range s {
		if _, ok := listed[name]; strings.HasPrefix(name, "auditrail_") && !ok {
			t.Errorf("the metric table of docs/operations.md does not list %s", name)
		}
	}
	for name, atOnce := range listed {
		if _, ok := s[name]; !ok && atOnce {
			t.Errorf("docs/operations.md lists %s, which the roles do not serve", name)
		}
	}
}
