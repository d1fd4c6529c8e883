// Package tail is `auditrail tail`: follow an organization's events (JSON lines or OCSF).
package tail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/auditstore"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/ocsf"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/apiitem"
)

// Run follows an organization's events on the stream, as JSON lines
// (the API's item shapes) or as OCSF API Activity events.
func Run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail tail")
	nf := cli.AddNATSFlags(fs, "nats://127.0.0.1:4222", false)
	orgFlag := fs.String("org", "", "", "organization UUID to follow (required)")
	format := fs.String("format", "", "json", "json (the API's item shapes) or ocsf (OCSF 1.1 API Activity)")
	since := fs.Duration("since", "", 0, "also print the events of this past period (0: only new events)")
	kinds := fs.String("kinds", "", "audit,execution", "event kinds to follow: audit, execution")
	mkLog := fs.LogFlags("text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := mkLog(os.Stderr)
	if err != nil {
		return err
	}
	if *orgFlag == "" {
		return cli.UsageErrorf("--org is required: the organization whose events to follow (auditrail admin org list shows them)")
	}
	org, err := uuid.Parse(*orgFlag)
	if err != nil {
		return cli.UsageErrorf("--org %q is not a UUID", *orgFlag)
	}
	if *format != "json" && *format != "ocsf" {
		return cli.UsageErrorf("--format: json or ocsf")
	}
	var subjects []string
	for _, k := range strings.Split(*kinds, ",") {
		switch k = strings.TrimSpace(k); k {
		case schemas.KindAudit, schemas.KindExecution:
			subjects = append(subjects, schemas.EventSubject(org.String(), k))
		default:
			return cli.UsageErrorf("--kinds: %q is not audit or execution", k)
		}
	}
	nc, err := nf.Connect("auditrail-tail", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := cli.WaitStreams(wctx, nc, log, schemas.StreamEvents); err != nil {
		return fmt.Errorf("%w (is the platform up? its controlplane creates the streams)", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjects, DeliverPolicy: jetstream.DeliverNewPolicy}
	if *since > 0 {
		start := time.Now().Add(-*since)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	cons, err := js.OrderedConsumer(ctx, schemas.StreamEvents, cfg)
	if err != nil {
		return fmt.Errorf("follow %s: %w", org, err)
	}
	iter, err := cons.Messages()
	if err != nil {
		return err
	}
	defer iter.Stop()
	go func() { <-ctx.Done(); iter.Stop() }()
	out := json.NewEncoder(os.Stdout)
	for {
		m, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return err
		}
		v, err := tailRecord(m.Subject(), m.Data(), *format)
		if err != nil {
			log.Warn("undecodable event skipped (ingest sends it to the DLQ)", "subject", m.Subject(), "err", err)
			continue
		}
		if err := out.Encode(v); err != nil {
			if errors.Is(err, io.ErrClosedPipe) {
				return nil
			}
			return err
		}
	}
}

// tailRecord decodes an event and shapes it for output.
func tailRecord(subject string, data []byte, format string) (any, error) {
	_, kind, _ := schemas.ParseEventSubject(subject)
	if kind == schemas.KindExecution {
		ev, err := schemas.UnmarshalExecutionEvent(data)
		if err != nil {
			return nil, err
		}
		if format == "ocsf" {
			return ocsf.Execution(&ev), nil
		}
		return apiitem.NewExecutionItem(&auditstore.Execution{ExecutionEvent: ev}), nil
	}
	ev, err := schemas.UnmarshalAuditEvent(data)
	if err != nil {
		return nil, err
	}
	entry := schemas.AuditEntry{ID: schemas.EntryID(ev.EventID), AuditEvent: ev}
	item := apiitem.NewItem(&entry)
	item.CreatedTime = "" // not yet stored
	if format == "ocsf" {
		return ocsf.Audit(&ev), nil
	}
	return item, nil
}
