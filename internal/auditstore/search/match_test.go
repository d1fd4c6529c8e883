package search

import (
	"testing"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/schemas"
)

// The in-memory evaluator on the cases where SQL semantics are easy to get
// wrong: absent fields under negation, Unicode case, addresses. The
// conformance suite (storetest) and FuzzMatchAuditAgreesWithSQL (sqlite)
// hold it to the stores.
func TestMatchAudit(t *testing.T) {
	s := func(v string) *string { return &v }
	rt := schemas.ResourceTypeHook
	project := uuid.MustParse("0193a0b0-0000-7000-8000-000000000002")
	full := schemas.AuditEvent{EventID: uuid.MustParse("0193a0b0-0000-7000-8000-000000000001"), Action: schemas.AuditActionDeleted,
		Source: schemas.AuditSourceCLI, DisplayName: "ÉMILE Zola", PrincipalID: "key_1", PrincipalType: "USER", UserID: s("u1"),
		ResourceType: &rt, ResourceID: s("Res-7"), ResourceDisplay: s("Staging Hook"), ClientIP: s("::ffff:10.1.2.3"), ProjectID: &project}
	bare := schemas.AuditEvent{EventID: uuid.New(), Action: schemas.AuditActionCreated, Source: schemas.AuditSourceAPI, DisplayName: "bob",
		PrincipalID: "key_2", PrincipalType: "ORG_SERVICE_KEY"}
	zoned := bare
	zoned.ClientIP = s("fe80::1%eth0")
	for _, tc := range []struct {
		q                 string
		full, bare, zoned bool
	}{
		{"", true, true, true},
		{"émile", true, false, false},
		{`"staging HOOK"`, true, false, false},
		{"res-7", true, false, false},
		{"-émile", false, true, true},
		{"action:DELETED,CREATED", true, true, true},
		{"-source:CLI", false, true, true},
		{"resource_type:HOOK", true, false, false},
		{"-resource_type:HOOK", false, true, true},
		{"-resource_id:Res-7", false, true, true},
		{"resource_id:res-7", false, false, false},
		{"actor:u1", true, false, false},
		{`actor:"ÉMILE Zola"`, true, false, false},
		{"actor:émile", false, false, false},
		{"-actor:u1", false, true, true},
		{"principal_type:ORG_SERVICE_KEY", false, true, true},
		{"project:" + project.String(), true, false, false},
		{"-project:" + project.String(), false, true, true},
		{"event_id:" + full.EventID.String(), true, false, false},
		{"ip:10.0.0.0/8", true, false, false},
		{"ip:::/0", false, false, false},
		{"ip:::ffff:10.1.0.0/112", true, false, false},
		{"-ip:0.0.0.0/0,::/0", false, true, true},
		{"ip:fe80::/10", false, false, false},
		{"action:DELETED zola -bob", true, false, false},
		{"key_1", false, false, false}, // free text is not in principal_id
	} {
		t.Run(tc.q, func(t *testing.T) {
			q, err := Parse(Audit, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				e    *schemas.AuditEvent
				want bool
			}{{"full", &full, tc.full}, {"bare", &bare, tc.bare}, {"zoned", &zoned, tc.zoned}} {
				if got := q.MatchAudit(c.e); got != c.want {
					t.Errorf("%s: %v, want %v", c.name, got, c.want)
				}
			}
		})
	}
}

func TestMatchExecution(t *testing.T) {
	e := schemas.ExecutionEvent{DisplayName: "Grace HOPPER", UserID: "u1", Tool: schemas.ToolRef{Toolkit: "MailToolkit", Name: "SendEmail"},
		Success: false, ErrorKind: "TIMEOUT", Hooks: []schemas.HookCall{{Decision: "allow"}, {Decision: "deny", FailureModeApplied: "fail_closed", ErrorMessage: `"decision":"allow"`}}}
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"grace", true},
		{"mailtool", true},
		{"sendemail", true},
		{"tool:SendEmail toolkit:MailToolkit user:u1", true},
		{"tool:sendemail", false},
		{"success:false error_kind:TIMEOUT", true},
		{"-success:false", false},
		{"hook_decision:deny", true},
		{"hook_decision:fail_closed", true},
		{"hook_decision:fail_open", false},
		{"-hook_decision:fail_open", true},
		{"hook_decision:allow", true},
	} {
		q, err := Parse(Executions, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := q.MatchExecution(&e); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.q, got, tc.want)
		}
	}
	// A decision only in an error message is no decision.
	q, _ := Parse(Executions, "hook_decision:allow")
	only := schemas.ExecutionEvent{Hooks: []schemas.HookCall{{Decision: "deny", ErrorMessage: `"decision":"allow"`}}}
	if q.MatchExecution(&only) {
		t.Error("hook_decision:allow matched a decision inside an error message")
	}
}
