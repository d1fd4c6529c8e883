package storetest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/auditstore/search"
	"github.com/auditrail/auditrail/schemas"
)

func ptr[T any](v T) *T { return &v }

// searchEvents are entries spread over days (so that stores that bound
// their scans by hour must widen), with every field a search reads varied.
func searchEvents(org uuid.UUID, projects []uuid.UUID, base time.Time) []schemas.AuditEvent {
	actions := []schemas.AuditAction{schemas.AuditActionCreated, schemas.AuditActionUpdated, schemas.AuditActionDeleted, schemas.AuditActionDisabled}
	sources := []schemas.AuditSource{schemas.AuditSourceAPI, schemas.AuditSourceCLI, schemas.AuditSourceDashboard}
	types := []schemas.ResourceType{schemas.ResourceTypeProject, schemas.ResourceTypeAPIKey, schemas.ResourceTypeHook}
	names := []string{"Ada Lovelace", "ÉMILE Zola", "svc 100%_done", "bob"}
	ips := []string{"10.1.2.3", "10.2.0.1", "2001:db8::7", "2001:db9::1", "::ffff:10.1.9.9", "", "unknown", "1.2.3", "2001:DB8::A"}
	var evs []schemas.AuditEvent
	for i := 0; i < 150; i++ {
		e := Event(org, base.Add(-time.Duration(i)*47*time.Minute))
		e.Action, e.Source = actions[i%len(actions)], sources[i%len(sources)]
		e.DisplayName = names[i%len(names)]
		e.PrincipalID = fmt.Sprintf("key_%d", i%6)
		e.PrincipalType = []string{"USER", "ORG_SERVICE_KEY"}[i%2]
		if i%4 != 0 {
			e.UserID = ptr(fmt.Sprintf("user_%d", i%5))
		}
		if i%5 != 0 {
			e.ResourceType = ptr(types[i%len(types)])
			e.ResourceID = ptr(fmt.Sprintf("res-%d", i%8))
			e.ResourceDisplay = ptr([]string{"Prod Key", "staging HOOK", "Ünïcode Projekt", "50% off_sale"}[i%4])
		}
		if ip := ips[i%len(ips)]; ip != "" {
			e.ClientIP = ptr(ip)
		}
		if p := i % 3; p < len(projects) {
			e.ProjectID = &projects[p]
		}
		evs = append(evs, e)
	}
	return evs
}

// SearchEvents are the entries of the search conformance case: 150 events of
// org spread over days, every field a search reads varied (unicode names,
// absent fields, IPv4, IPv6, mapped and malformed addresses); a third in
// each of projects, the rest without one.
func SearchEvents(org uuid.UUID, projects []uuid.UUID, base time.Time) []schemas.AuditEvent {
	return searchEvents(org, projects, base)
}

// RandomAuditSearches returns n search expressions drawn (deterministically
// from seed) from the keys of the audit search and values that occur in evs
// or nearly do: negations, lists, quoted values, CIDRs and free text.
func RandomAuditSearches(evs []schemas.AuditEvent, seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	pick := func(vs []string) string { return vs[r.IntN(len(vs))] }
	quote := func(v string) string {
		if strings.ContainsAny(v, " ,\"") {
			return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
		}
		return v
	}
	var actors, resIDs, texts, projects, events []string
	for _, e := range evs {
		actors = append(actors, e.PrincipalID, e.DisplayName)
		if e.UserID != nil {
			actors = append(actors, *e.UserID)
		}
		if e.ResourceID != nil {
			resIDs = append(resIDs, *e.ResourceID)
		}
		if e.ResourceDisplay != nil {
			texts = append(texts, *e.ResourceDisplay)
		}
		if e.ProjectID != nil {
			projects = append(projects, e.ProjectID.String())
		}
		events = append(events, e.EventID.String())
	}
	texts = append(texts, "ada", "LOVE", "émile", "ÜNÏ", "100%", "%", "_", "res-1", "hook", "zzz", "key")
	values := map[string]func() string{
		search.KeyAction: func() string {
			return pick([]string{"CREATED", "UPDATED", "DELETED", "DISABLED", "AUDIT_ACTION_CREATED"})
		},
		search.KeySource:        func() string { return pick([]string{"API", "CLI", "DASHBOARD", "SYSTEM"}) },
		search.KeyResourceType:  func() string { return pick([]string{"PROJECT", "API_KEY", "HOOK", "ORGANIZATION"}) },
		search.KeyResourceID:    func() string { return pick(append(resIDs, "nope")) },
		search.KeyActor:         func() string { return pick(append(actors, "nobody")) },
		search.KeyPrincipalType: func() string { return pick([]string{"USER", "ORG_SERVICE_KEY", "ACCOUNT"}) },
		search.KeyProject: func() string {
			return pick(append(projects, uuid.NewSHA1(uuid.Nil, []byte{byte(r.IntN(256))}).String()))
		},
		search.KeyEventID: func() string { return pick(events) },
		search.KeyIP: func() string {
			return pick([]string{"10.1.2.3", "10.0.0.0/8", "10.1.0.0/16", "2001:db8::/32", "2001:db8::7", "::/0", "0.0.0.0/0",
				"::ffff:10.1.0.0/112", "::ffff:0:0/96", "2001:db8::a", "10.2.0.1/32", "1.2.3.4", "::/1"})
		},
	}
	keys := search.Keys(search.Audit)
	out := make([]string, 0, n)
	for len(out) < n {
		var terms []string
		for k := 1 + r.IntN(3); k > 0; k-- {
			neg := ""
			if r.IntN(3) == 0 {
				neg = "-"
			}
			if r.IntN(4) == 0 {
				terms = append(terms, neg+quote(pick(texts)))
				continue
			}
			key := pick(keys)
			vals := make([]string, 1+r.IntN(3))
			for i := range vals {
				vals[i] = quote(values[key]())
			}
			terms = append(terms, neg+key+":"+strings.Join(vals, ","))
		}
		out = append(out, strings.Join(terms, " "))
	}
	return out
}

// countMatches counts the events of evs in the scope (project, window) for
// which q.MatchAudit holds.
func countMatches(q search.Query, evs []schemas.AuditEvent, project *uuid.UUID, since, until *time.Time) int {
	n := 0
	for i := range evs {
		e := &evs[i]
		if project != nil && (e.ProjectID == nil || *e.ProjectID != *project) {
			continue
		}
		if (since != nil && e.Timestamp.Before(*since)) || (until != nil && !e.Timestamp.Before(*until)) {
			continue
		}
		if q.MatchAudit(e) {
			n++
		}
	}
	return n
}

// auditMatch is the reference semantics of a search term.
func auditMatch(t search.Term, e schemas.AuditEvent) bool {
	any := false
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for j, v := range t.Values {
		var ok bool
		switch t.Key {
		case "":
			f := strings.ToLower(v)
			ok = strings.Contains(strings.ToLower(e.DisplayName), f) || strings.Contains(strings.ToLower(str(e.ResourceDisplay)), f) ||
				strings.Contains(strings.ToLower(str(e.ResourceID)), f)
		case search.KeyAction:
			ok = uint8(e.Action) == t.Nums[j]
		case search.KeySource:
			ok = uint8(e.Source) == t.Nums[j]
		case search.KeyResourceType:
			ok = e.ResourceType != nil && uint8(*e.ResourceType) == t.Nums[j]
		case search.KeyResourceID:
			ok = e.ResourceID != nil && *e.ResourceID == v
		case search.KeyActor:
			ok = e.PrincipalID == v || (e.UserID != nil && *e.UserID == v) || e.DisplayName == v
		case search.KeyPrincipalType:
			ok = e.PrincipalType == v
		case search.KeyProject:
			ok = e.ProjectID != nil && e.ProjectID.String() == v
		case search.KeyEventID:
			ok = e.EventID.String() == v
		case search.KeyIP:
			a, err := netip.ParseAddr(str(e.ClientIP))
			ok = err == nil && t.Prefixes[j].Contains(a.Unmap())
		}
		any = any || ok
	}
	return any != t.Not
}

func testSearch(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	org, p1, p2 := uuid.New(), uuid.New(), uuid.New()
	base := time.Now().Add(-time.Minute)
	evs := searchEvents(org, []uuid.UUID{p1, p2}, base)
	write(t, s, evs)
	write(t, s, []schemas.AuditEvent{Event(uuid.New(), base)}) // another org's
	since, until := base.Add(-40*time.Hour), base.Add(-20*time.Hour)
	cases := []struct {
		name, q      string
		since, until *time.Time
		project      *uuid.UUID
	}{
		{name: "action any of", q: "action:CREATED,AUDIT_ACTION_DELETED"},
		{name: "not source", q: "-source:CLI"},
		{name: "resource_type", q: "resource_type:HOOK"},
		{name: "not resource_type keeps entries without one", q: "-resource_type:HOOK"},
		{name: "resource_id", q: "resource_id:res-3,res-5"},
		{name: "not resource_id", q: "-resource_id:res-3"},
		{name: "actor principal", q: "actor:key_2"},
		{name: "actor user", q: "actor:user_3"},
		{name: "actor display name quoted", q: `actor:"Ada Lovelace"`},
		{name: "not actor", q: `-actor:"Ada Lovelace",user_1`},
		{name: "principal_type", q: "principal_type:ORG_SERVICE_KEY"},
		{name: "project", q: "project:" + p1.String()},
		{name: "not project", q: "-project:" + p1.String()},
		{name: "event_id", q: "event_id:" + evs[17].EventID.String() + "," + evs[99].EventID.String()},
		{name: "ipv4 address", q: "ip:10.1.2.3"},
		{name: "ipv4 cidr with a mapped address", q: "ip:10.1.0.0/16"},
		{name: "ipv4 wide cidr", q: "ip:10.0.0.0/8"},
		{name: "ipv6 cidr", q: "ip:2001:db8::/32"},
		{name: "ipv6 address", q: "ip:2001:db9::1"},
		{name: "not ip", q: "-ip:10.0.0.0/8"},
		{name: "every ipv4 (no malformed address)", q: "ip:0.0.0.0/0"},
		{name: "every ipv6 holds no ipv4", q: "ip:::/0"},
		{name: "mapped cidr", q: "ip:::ffff:10.1.0.0/112"},
		{name: "no address", q: "-ip:0.0.0.0/0,::/0"},
		{name: "free text case-insensitive", q: "ada"},
		{name: "free text unicode", q: "émile"},
		{name: "free text resource_display", q: "hook"},
		{name: "free text unicode display", q: "ÜNÏCODE"},
		{name: "free text resource_id", q: "RES-7"},
		{name: "free text percent and underscore literal", q: "100%_"},
		{name: "free text percent is no wildcard", q: `"0% o"`},
		{name: "free text underscore is no wildcard", q: "f_s"},
		{name: "phrase", q: `"staging hook"`},
		{name: "not free text", q: "-ada"},
		{name: "all terms", q: `action:UPDATED,DISABLED -source:API actor:key_1,key_3 "staging"`},
		{name: "nothing matches", q: `resource_id:"no?pe' \\\" --" ?`},
		{name: "since", since: &since},
		{name: "until", until: &until},
		{name: "since and until with a search", since: &since, until: &until, q: "-action:CREATED"},
		{name: "project listing with search", project: &p2, q: "ip:2001:db8::/32,10.2.0.0/16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sq, err := search.Parse(search.Audit, c.q)
			if err != nil {
				t.Fatal(err)
			}
			var want []schemas.AuditEvent
			for _, e := range evs {
				keep := c.project == nil || (e.ProjectID != nil && *e.ProjectID == *c.project)
				keep = keep && (c.since == nil || !e.Timestamp.Before(*c.since)) && (c.until == nil || e.Timestamp.Before(*c.until))
				for _, term := range sq.Terms {
					keep = keep && auditMatch(term, e)
				}
				if keep {
					want = append(want, e)
				}
			}
			if len(want) == 0 && c.name != "nothing matches" {
				t.Fatal("the test data holds no match")
			}
			if len(want) == len(evs) {
				t.Fatal("the case filters nothing")
			}
			q := auditstore.Query{OrgID: org, ProjectID: c.project, Limit: 4,
				Filter: auditstore.Filter{Search: sq, Window: auditstore.Window{Since: c.since, Until: c.until}}}
			got := ids(all(t, s, q))
			if !slices.Equal(got, sorted(want)) {
				t.Fatalf("q %q: got %d entries, want %d", c.q, len(got), len(want))
			}
			// The in-memory evaluator (the live stream's filter) agrees.
			var matched []schemas.AuditEvent
			for i := range want {
				if sq.MatchAudit(&want[i]) {
					matched = append(matched, want[i])
				}
			}
			if len(matched) != len(want) {
				t.Fatalf("q %q: MatchAudit holds for %d of the %d stored matches", c.q, len(matched), len(want))
			}
			if n := countMatches(sq, evs, c.project, c.since, c.until); n != len(want) {
				t.Fatalf("q %q: MatchAudit holds for %d entries, the store lists %d", c.q, n, len(want))
			}
		})
	}
	t.Run("random expressions: SQL and MatchAudit agree", func(t *testing.T) {
		for _, expr := range RandomAuditSearches(evs, 1, 150) {
			sq, err := search.Parse(search.Audit, expr)
			if err != nil {
				t.Fatalf("%q: %v", expr, err)
			}
			q := auditstore.Query{OrgID: org, Limit: auditstore.MaxLimit, Filter: auditstore.Filter{Search: sq}}
			got := ids(all(t, s, q))
			var want []schemas.AuditEvent
			for i := range evs {
				if sq.MatchAudit(&evs[i]) {
					want = append(want, evs[i])
				}
			}
			if !slices.Equal(got, sorted(want)) {
				t.Fatalf("q %q: the store lists %d entries, MatchAudit holds for %d", expr, len(got), len(want))
			}
		}
	})
	t.Run("empty window refused", func(t *testing.T) {
		_, err := s.ListAudit(ctx(t), auditstore.Query{OrgID: org, Limit: 4, Filter: auditstore.Filter{Window: auditstore.Window{Since: &until, Until: &until}}})
		if err == nil {
			t.Fatal("since = until accepted")
		}
	})
}

func testExecutionsSearch(t *testing.T, open Opener) {
	s, ok := mustOpen(t, open).(auditstore.ExecutionStore)
	if !ok {
		t.Fatal("the store does not keep executions")
	}
	org, p1 := uuid.New(), uuid.New()
	base := time.Now().Add(-time.Minute)
	tools := []schemas.ToolRef{{Toolkit: "DocsToolkit", Name: "GetDocument"}, {Toolkit: "MailToolkit", Name: "SendEmail"}, {Toolkit: "DocsToolkit", Name: "SearchDocuments"}}
	var evs []schemas.ExecutionEvent
	for i := 0; i < 80; i++ {
		e := execEvent(org, p1, base.Add(-time.Duration(i)*53*time.Minute), i%3 != 0)
		e.Tool = tools[i%len(tools)]
		e.UserID = fmt.Sprintf("user_%d", i%4)
		if i%5 == 0 {
			e.DisplayName = "Grace HOPPER"
		}
		switch i % 4 {
		case 1:
			e.Hooks[0].FailureModeApplied, e.Hooks[0].Failure = "fail_open", "timeout"
		case 2:
			e.Hooks = append(e.Hooks, schemas.HookCall{HookID: "h2", Point: "post", Decision: "deny", FailureModeApplied: "fail_closed",
				ErrorMessage: `said "decision":"allow"`})
		case 3:
			e.Hooks = nil
		}
		if !e.Success && i%2 == 0 {
			e.ErrorKind = "TIMEOUT"
		}
		evs = append(evs, e)
	}
	if err := s.WriteExecutions(ctx(t), evs); err != nil {
		t.Fatal(err)
	}
	decided := func(e schemas.ExecutionEvent, d string) bool {
		for _, h := range e.Hooks {
			if h.Decision == d || h.FailureModeApplied == d {
				return true
			}
		}
		return false
	}
	match := func(term search.Term, e schemas.ExecutionEvent) bool {
		any := false
		for _, v := range term.Values {
			var ok bool
			switch term.Key {
			case "":
				f := strings.ToLower(v)
				ok = strings.Contains(strings.ToLower(e.DisplayName), f) || strings.Contains(strings.ToLower(e.Tool.Name), f) ||
					strings.Contains(strings.ToLower(e.Tool.Toolkit), f)
			case search.KeyTool:
				ok = e.Tool.Name == v
			case search.KeyToolkit:
				ok = e.Tool.Toolkit == v
			case search.KeyUser:
				ok = e.UserID == v
			case search.KeySuccess:
				ok = e.Success == (v == "true")
			case search.KeyHookDecision:
				ok = decided(e, v)
			case search.KeyErrorKind:
				ok = e.ErrorKind == v
			}
			any = any || ok
		}
		return any != term.Not
	}
	since, until := base.Add(-50*time.Hour), base.Add(-10*time.Hour)
	cases := []struct {
		name, q      string
		since, until *time.Time
	}{
		{name: "tool", q: "tool:SendEmail,GetDocument"},
		{name: "toolkit", q: "-toolkit:MailToolkit"},
		{name: "user", q: "user:user_1"},
		{name: "success", q: "success:false"},
		{name: "not success", q: "-success:false"},
		{name: "hook_decision deny", q: "hook_decision:deny"},
		{name: "hook_decision allow (no false match in a message)", q: "hook_decision:allow"},
		{name: "hook_decision fail_open", q: "hook_decision:fail_open"},
		{name: "hook_decision any of", q: "hook_decision:fail_open,fail_closed"},
		{name: "not hook_decision", q: "-hook_decision:deny"},
		{name: "error_kind", q: "error_kind:TIMEOUT"},
		{name: "free text", q: "grace"},
		{name: "free text tool", q: "searchdoc"},
		{name: "window and search", q: "toolkit:DocsToolkit", since: &since, until: &until},
		{name: "since", since: &since},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sq, err := search.Parse(search.Executions, c.q)
			if err != nil {
				t.Fatal(err)
			}
			want := newestFirst(evs, func(e schemas.ExecutionEvent) bool {
				keep := (c.since == nil || !e.StartedAt.Before(*c.since)) && (c.until == nil || e.StartedAt.Before(*c.until))
				for _, term := range sq.Terms {
					keep = keep && match(term, e)
				}
				return keep
			})
			if len(want) == 0 || len(want) == len(evs) {
				t.Fatalf("the test data holds %d matches of %d", len(want), len(evs))
			}
			q := auditstore.ExecQuery{OrgID: org, Limit: 4, Search: sq, Window: auditstore.Window{Since: c.since, Until: c.until}}
			var got []auditstore.Execution
			for i := 0; ; i++ {
				if i > 1000 {
					t.Fatal("walk does not end")
				}
				p, err := s.ListExecutions(ctx(t), q)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Items...)
				if !p.HasMore {
					break
				}
				q.After = p.Next()
			}
			if !slices.Equal(execIDs(got), want) {
				t.Fatalf("q %q: got %d executions, want %d", c.q, len(got), len(want))
			}
			// The in-memory evaluator agrees.
			evaluated := newestFirst(evs, func(e schemas.ExecutionEvent) bool {
				return (c.since == nil || !e.StartedAt.Before(*c.since)) && (c.until == nil || e.StartedAt.Before(*c.until)) && sq.MatchExecution(&e)
			})
			if !slices.Equal(evaluated, want) {
				t.Fatalf("q %q: MatchExecution holds for %d executions, the store lists %d", c.q, len(evaluated), len(want))
			}
		})
	}
}
