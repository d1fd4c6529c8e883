//go:build e2e

package bench

import "testing"

// The odata benchmark works end to end on a small mailbox: the evaluator
// and the hand-written predicate agree on every message, and the figure
// is set.
func TestODataBenchmarkRuns(t *testing.T) {
	fig, err := OData(5000)
	if err != nil {
		t.Fatal(err)
	}
	if fig.Value <= 0 || fig.Reference <= 0 || fig.Min != 100_000 {
		t.Fatalf("figure %+v", fig)
	}
}

// The reference predicate is not the evaluator: on a message built to
// pass, each of its clauses flips the answer.
func TestODataReference(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"receivedDateTime": "2026-02-01T10:00:00-05:00", "importance": "normal", "isRead": false,
			"subject": "the BUDGET", "toRecipients": []any{},
		}
	}
	if !odataReference(base()) {
		t.Fatal("the base message does not match")
	}
	for name, edit := range map[string]func(map[string]any){
		"before the range": func(m map[string]any) { m["receivedDateTime"] = "2026-01-14T23:59:59Z" },
		"after the range":  func(m map[string]any) { m["receivedDateTime"] = "2026-03-01T00:00:00+01:00" },
		"read, normal":     func(m map[string]any) { m["isRead"] = true },
		"no budget":        func(m map[string]any) { m["subject"] = "lunch" },
	} {
		m := base()
		edit(m)
		if odataReference(m) {
			t.Errorf("%s: still matches", name)
		}
	}
	m := base()
	m["subject"] = "lunch"
	m["toRecipients"] = []any{map[string]any{"emailAddress": map[string]any{"address": "Ann@Contoso.com"}}}
	if !odataReference(m) {
		t.Error("a recipient ann@contoso.com does not match")
	}
}
