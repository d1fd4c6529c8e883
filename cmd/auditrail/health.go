package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/ingest"
)

// The keys of /healthz: one name per component, the same in "checks" (its
// readiness) and beside them (its counters), in every role.
const (
	healthNATS             = "nats"
	healthStore            = "store"
	healthIngestAudit      = "ingest_audit"      // the consumer of audit events
	healthIngestExecutions = "ingest_executions" // the consumer of execution events
	healthHooks            = "hooks"
	healthExecutionOutbox  = "execution_outbox"
	healthAuditOutbox      = "audit_outbox"
)

// consumer is what /healthz reads of an ingest consumer.
type consumer interface {
	Ready() bool
	Stats() ingest.Stats
}

// consumers are the ingest consumers of a process by their /healthz key.
type consumers map[string]consumer

// ingestConsumers names the audit and execution consumers.
func ingestConsumers(audit, executions consumer) consumers {
	return consumers{healthIngestAudit: audit, healthIngestExecutions: executions}
}

// counters adds the counters of each consumer to m under its key.
func (cs consumers) counters(m map[string]any) map[string]any {
	for name, c := range cs {
		m[name] = c.Stats()
	}
	return m
}

// natsCheck fails while a connection (by role) is not up.
func natsCheck(conns map[string]*nats.Conn) check {
	return check{healthNATS, func(context.Context) error {
		for role, nc := range conns {
			if !nc.IsConnected() {
				return fmt.Errorf("nats (%s) %s", role, nc.Status())
			}
		}
		return nil
	}}
}

// consumerChecks are the readiness checks of the consumers cs.
func consumerChecks(cs consumers) []check {
	var checks []check
	for name, c := range cs {
		checks = append(checks, check{name, func(context.Context) error {
			if !c.Ready() {
				return errors.New("consumer not running")
			}
			return nil
		}})
	}
	return checks
}
