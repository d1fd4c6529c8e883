//go:build e2e

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/schemas"
)

// `auditrail dlq list` shows a dead letter (a valid event dead-lettered
// while the store was unwell, as ingest did before issue 19), `dlq replay`
// refuses to run without a selection, and replaying its sequence stores
// the event: it is listed by the audit API, and the DLQ is empty.
func TestDLQListAndReplay(t *testing.T) {
	t.Parallel()
	p := startDev(t, t.TempDir())
	key := keyRe.FindString(p.stdout.String())
	nc := p.connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	org := uuid.New()
	rt := schemas.ResourceTypeSetting
	ev := schemas.AuditEvent{EventID: uuid.Must(uuid.NewV7()), Timestamp: time.Now().UTC().Truncate(time.Millisecond), Action: schemas.AuditActionCreated,
		Source: schemas.AuditSourceSystem, DisplayName: "dlq test", OrganizationID: org, PrincipalID: "system", PrincipalType: "SERVICE", ResourceType: &rt}
	data, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	subject := schemas.EventSubject(org.String(), schemas.KindAudit)
	ctx := context.Background()
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: schemas.DLQSubject(subject), Data: data, Header: nats.Header{
		schemas.HeaderDLQSubject: {subject}, schemas.HeaderDLQReason: {"store refused the event: disk full"},
		schemas.HeaderDLQMsgID: {ev.EventID.String()}, schemas.HeaderContentType: {schemas.ContentMsgpack}, schemas.HeaderSchema: {schemas.SchemaAuditV1}}}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(binary(t), append(append([]string{"dlq"}, args...), p.natsArgs(natsx.RoleAdmin)...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	out, code := run("list", "--format", "json", "--org", org.String())
	var d struct {
		Seq     uint64 `json:"seq"`
		Subject string `json:"subject"`
		Reason  string `json:"reason"`
	}
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &d) != nil || d.Subject != subject || !strings.Contains(d.Reason, "disk full") {
		t.Fatalf("dlq list: %d %s", code, out)
	}
	if out, code := run("list"); code != 0 || !strings.Contains(out, "SEQ") || !strings.Contains(out, subject) {
		t.Fatalf("dlq list table: %d %s", code, out)
	}
	if out, code := run("replay"); code != 2 || !strings.Contains(out, "--seq") {
		t.Fatalf("dlq replay without a selection: %d %s", code, out)
	}
	if out, code := run("replay", "--seq", "999999"); code != 1 || !strings.Contains(out, "no such dead letter") {
		t.Fatalf("dlq replay of an unknown sequence: %d %s", code, out)
	}
	if out, code := run("replay", "--seq", strconv.FormatUint(d.Seq, 10)); code != 0 || !strings.Contains(out, "replayed 1 dead letter") {
		t.Fatalf("dlq replay: %d %s", code, out)
	}
	var last string
	testenv.Eventually(t, 20*time.Second, func() string { return "the replayed event listed: " + last }, func() bool {
		_, lr, _ := get(t, p.http, "/api/v1/orgs/"+org.String()+"/audit_logs", key)
		last = fmt.Sprintf("%+v", lr)
		return len(lr.Data.Items) == 1 && lr.Data.Items[0]["event_id"] == ev.EventID.String()
	})
	if out, code := run("list", "--org", org.String()); code != 0 || !strings.Contains(out, "no dead letters") {
		t.Fatalf("dlq list after the replay: %d %s", code, out)
	}
}
