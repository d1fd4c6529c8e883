package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/evidence/lease"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/natsx"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/lifecycle"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// retentionFlags are the operator's retention flags: the bounds and grace
// that the control plane enforces on the organizations' settings, and the
// cycle that the lifecycle role (and dev) runs.
type retentionFlags struct {
	min, max, def, grace *string
	interval             *time.Duration
}

func addRetentionFlags(fs *cli.Flags, cycle bool) retentionFlags {
	b := cpstate.DefaultRetentionBounds()
	f := retentionFlags{
		min:   fs.String("retention-min", "", cpstate.FormatRetention(b.Min), "retention: the shortest an organization may set (\"30d\", \"36h\"; 0: none)"),
		max:   fs.String("retention-max", "", cpstate.FormatRetention(b.Max), "retention: the longest an organization may set (0: no ceiling, keeping forever allowed)"),
		def:   fs.String("retention-default", "", cpstate.FormatRetention(b.Default), "retention: what applies to an organization that set none (0: keep forever)"),
		grace: fs.String("retention-grace", "", cpstate.FormatRetention(b.Grace), "retention: how long a change waits before it applies (a longer retention protects at once)"),
	}
	if cycle {
		f.interval = fs.Duration("retention-interval", "", lifecycle.DefaultConfig().Interval, "retention: how often a cycle expires what the organizations' retention no longer keeps")
	}
	return f
}

// bounds parses the bounds.
func (f retentionFlags) bounds() (cpstate.RetentionBounds, error) {
	var b cpstate.RetentionBounds
	for _, v := range []struct {
		name string
		in   *string
		out  *time.Duration
	}{{"--retention-min", f.min, &b.Min}, {"--retention-max", f.max, &b.Max}, {"--retention-default", f.def, &b.Default}, {"--retention-grace", f.grace, &b.Grace}} {
		d, err := cpstate.ParseRetention(*v.in)
		if err != nil {
			return b, cli.UsageErrorf("%s: %v", v.name, err)
		}
		*v.out = d
	}
	if err := b.Validate(); err != nil {
		return b, cli.Usage(err)
	}
	return b, nil
}

// config is the lifecycle's configuration.
func (f retentionFlags) config() (lifecycle.Config, error) {
	c := lifecycle.DefaultConfig()
	var err error
	if c.Bounds, err = f.bounds(); err != nil {
		return c, err
	}
	if f.interval != nil {
		c.Interval = *f.interval
	}
	if err := c.Validate(); err != nil {
		return c, cli.Usage(err)
	}
	return c, nil
}

// stateSettings reads the organizations' lifecycle settings from the
// control-plane state's mirror.
type stateSettings struct{ st *cpstate.State }

func (s stateSettings) Retention(org uuid.UUID) (*cpstate.Retention, error) {
	return cpstate.RetentionOf(s.st, org)
}

func (s stateSettings) LegalHolds(org uuid.UUID) ([]cpstate.LegalHold, error) {
	return cpstate.LegalHolds(s.st, org)
}

// storeHoldCounter counts legal holds in the process's store (dev).
type storeHoldCounter struct{ p *process }

func (c storeHoldCounter) CountHeld(ctx context.Context, h cpstate.LegalHold) (int64, error) {
	return lifecycle.HoldCounter{Store: c.p.store}.CountHeld(ctx, h)
}

// storeSubjectHolds checks legal holds against an erasure's subject in the
// process's store (dev).
type storeSubjectHolds struct{ p *process }

func (c storeSubjectHolds) HeldBy(ctx context.Context, _ uuid.UUID, kind, subject string, holds []cpstate.LegalHold) (*cpstate.LegalHold, int64, error) {
	return lifecycle.HeldSubject(ctx, c.p.store, kind, subject, holds)
}

// stateErasures are the erasures of the control-plane state: read from
// its mirror, their progress written to their keys (the lifecycle's
// credentials write those keys only).
type stateErasures struct {
	st *cpstate.State
	kv jetstream.KeyValue
}

func (e stateErasures) Pending() ([]cpstate.Erasure, error) { return cpstate.PendingErasures(e.st) }

func (e stateErasures) Update(ctx context.Context, er cpstate.Erasure) error {
	b, err := json.Marshal(er)
	if err != nil {
		return err
	}
	if _, err := e.kv.Put(ctx, cpstate.ErasureKey(er.OrgID.String(), er.ID.String()), b); err != nil {
		return fmt.Errorf("store the erasure's progress: %w", err)
	}
	return nil
}

// stateOutbox is the control plane's outbox, as its state's mirror holds
// it.
type stateOutbox struct{ st *cpstate.State }

func (o stateOutbox) PendingPayloads() [][]byte {
	var out [][]byte
	for _, p := range o.st.PendingEvents() {
		out = append(out, p.Value)
	}
	return out
}

// lifecycleLeaseTTL is how long the cycles' lease outlives its holder's
// last renewal (renewed every third of it during a cycle).
const (
	lifecycleLeaseTTL    = 30 * time.Second
	devLifecycleLeaseTTL = 5 * time.Second
)

// runLifecycleModule runs the retention cycles until ctx ends.
func (p *process) runLifecycleModule(ctx context.Context) error {
	select {
	case <-p.store.Ready():
	case <-ctx.Done():
		return nil
	}
	nc := p.conn(natsx.RoleLifecycle)
	pub, err := producers.New(nc, producers.DefaultConfig(), p.s.log)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	streams := lifecycle.NewJetStream(js)
	r, err := lifecycle.New(p.s.lifecycle, p.store, stateSettings{p.state}, pub, streams, p.s.log.With("module", modLifecycle))
	if err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, cpstate.DefaultBucket)
	if err != nil {
		return fmt.Errorf("the control-plane bucket: %w", err)
	}
	r.UseErasures(stateErasures{st: p.state, kv: kv}, streams)
	r.UseOutbox(stateOutbox{p.state})
	var lkv jetstream.KeyValue
	if err := retry.Do(ctx, httpapi.StartPolicy, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, cli.NATSAttemptTimeout)
		defer cancel()
		var err error
		lkv, err = js.CreateOrUpdateKeyValue(actx, jetstream.KeyValueConfig{Bucket: natsx.LifecycleBucket, Replicas: max(1, p.s.nats.Replicas()),
			Description: "auditrail lifecycle: the lease of the retention and erasure cycles"})
		return err
	}, nil); err != nil {
		return fmt.Errorf("lifecycle bucket %s: %w", natsx.LifecycleBucket, err)
	}
	ttl := lifecycleLeaseTTL
	if p.s.dev {
		ttl = devLifecycleLeaseTTL // one process: a restart need not wait long for its own lease
	}
	r.UseLease(lease.New(lkv, "cycle", uuid.NewString()[:8], ttl, p.s.log), ttl/3)
	return r.Run(ctx)
}

// runLifecycle is the production lifecycle role: retention cycles over the
// audit store, the event stream and the dead-letter stream.
func runLifecycle(ctx context.Context, args []string) error {
	f := newRoleFlags(natsx.RoleLifecycle, "127.0.0.1:8086", "listener of /healthz", false, false)
	sf := addRoleStoreFlags(f.fs)
	rf := addRetentionFlags(f.fs, true)
	s, err := f.parse(natsx.RoleLifecycle, args)
	if err != nil {
		return err
	}
	if s.store, err = sf.resolve(); err != nil {
		return err
	}
	if s.lifecycle, err = rf.config(); err != nil {
		return err
	}
	s.waitStreams = []string{schemas.StreamEvents, schemas.StreamDLQ}
	return (&process{s: s}).run(ctx, modLifecycle)
}
