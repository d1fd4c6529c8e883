package toolrunner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/hookproxy"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/internal/testenv"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/toolrunner"
)

// NATS down during executions: the tools still run, and every execution
// event appears in the stream once after NATS returns (the runner publishes
// through the durable outbox, as cmd wires it).
func TestExecutionEventsSurviveNATSOutage(t *testing.T) {
	srv, nc, js := testenv.NewRestartableNATS(t)
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ocfg := producers.DefaultOutboxConfig(t.TempDir())
	ocfg.DirectTimeout = 300 * time.Millisecond
	ocfg.Retry = retry.Policy{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	outbox, err := producers.OpenOutbox(ocfg, pub, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer outbox.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	drained := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { drained <- outbox.Run(runCtx) }()
	defer func() { stop(); <-drained }()

	src := newSources()
	runner := toolrunner.New(toolrunner.DefaultConfig(), registry(t), hookproxy.New(hookproxy.DefaultConfig(), nil), src, src, src, outbox, nil)
	sc := toolrunner.Scope{Org: uuid.New(), Project: uuid.New(), UserID: "u1"}
	run := func(n int) []string {
		var ids []string
		for i := 0; i < n; i++ {
			res, err := runner.Execute(ctx, sc, "TestKit.Echo", map[string]any{"text": "x"})
			if err != nil || !res.Success {
				t.Fatalf("execution %d: %v %+v", i, err, res)
			}
			ids = append(ids, res.ExecutionID)
		}
		return ids
	}
	want := run(2)
	srv.Stop()
	want = append(want, run(10)...)
	if st := outbox.Stats(); st.Pending != 10 {
		t.Fatalf("while NATS is down: %+v, want the 10 events pending", st)
	}
	srv.Start()
	testenv.Eventually(t, 30*time.Second, func() string { return fmt.Sprintf("outbox drained: %+v", outbox.Stats()) },
		func() bool { return outbox.Stats().Pending == 0 })
	c, err := js.OrderedConsumer(ctx, schemas.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{schemas.EventSubject(sc.Org.String(), schemas.KindExecution)}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for range want {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %d events: %v", len(got), err)
		}
		ev, err := schemas.UnmarshalExecutionEvent(m.Data())
		if err != nil {
			t.Fatal(err)
		}
		got[ev.ExecutionID]++
	}
	if _, err := c.Next(jetstream.FetchMaxWait(500 * time.Millisecond)); err == nil {
		t.Fatal("more execution events than executions")
	}
	for _, id := range want {
		if got[id] != 1 {
			t.Fatalf("execution %s recorded %d times", id, got[id])
		}
	}
}
