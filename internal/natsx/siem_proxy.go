package natsx

// The proxy of the stream credentials' consumer creates and deletes.
//
// AUDITRAIL_SIEM imports $JS.API.CONSUMER.CREATE.AUDITRAIL_EVENTS.* (and
// .*.>) and $JS.API.CONSUMER.DELETE.AUDITRAIL_EVENTS.* from subjects of the
// application account (auditrail.siem.consumer.create.* and .*.>,
// auditrail.siem.consumer.delete.*) that only the controlplane role
// subscribes to, and only the admin role may publish to. The server adds
// the requester's account and user public key (Nats-Request-Info: the
// imports share it) to each request. The user JWT already pins the
// consumer's name (siem-<id>) and the organization in the filter of the
// subject; the proxy checks the rest: the requester is a user of
// AUDITRAIL_SIEM and the user of credential <id>, which is active; the body
// asks for a durable pull consumer with explicit acks, bounded sizes and
// one filter inside the organization's subjects, equal to the subject's.
// It then sends a create of its own, made of the checked fields only, with
// the controlplane role's connection, and answers JetStream's response
// unchanged; a delete only of the credential's own consumer. Anything
// else is answered with a JetStream error (403) the client library shows.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/auditrail/auditrail/schemas"
)

// The subjects of the proxy in the application account.
const (
	siemProxyPrefix = "auditrail.siem.consumer"
	siemProxyCreate = siemProxyPrefix + ".create"
	siemProxyDelete = siemProxyPrefix + ".delete"
	// StreamProxyQueue is the queue group of the proxies: one control
	// plane instance answers each request.
	StreamProxyQueue = "auditrail-siem-proxy"
)

// siemProxySubjects are what the controlplane role subscribes to for the
// proxy.
func siemProxySubjects() []string { return []string{siemProxyPrefix + ".>"} }

// Bounds of a consumer a stream credential creates.
const (
	maxStreamCreateBody    = 16 << 10
	maxStreamAckWait       = time.Hour
	maxStreamBackoff       = 10
	maxStreamWaiting       = 512
	maxStreamAckPending    = 10000
	maxStreamBatch         = 10000
	maxStreamRequestBytes  = 64 << 20
	maxStreamExpires       = time.Hour
	maxStreamReplicas      = 5
	maxStreamDescription   = 256
	streamRefusedCode      = 403
	streamRefusedErrCode   = 10012 // JetStream's "consumer create error"
	streamBusyCode         = 503
	streamBusyErrCode      = 10008 // JetStream's "temporarily unavailable"
	streamCreateResponse   = "io.nats.jetstream.api.v1.consumer_create_response"
	streamDeleteResponse   = "io.nats.jetstream.api.v1.consumer_delete_response"
	defaultProxyTimeout    = 5 * time.Second
	defaultProxyConcurrent = 8
)

// ActiveStreamCredentials is what the proxy asks the control plane.
type ActiveStreamCredentials interface {
	// ActiveStreamCredential returns the organization and the name of
	// stream credential id when its NATS user is user and it is neither
	// revoked nor expired; an error otherwise. With current, it first
	// waits until the control plane's state holds every change committed
	// before the call (a revocation recorded by another instance).
	ActiveStreamCredential(ctx context.Context, id, user string, current bool) (org, name string, err error)
}

// StreamConsumerProxy serves the stream credentials' creates and deletes
// with the controlplane role's connection.
type StreamConsumerProxy struct {
	NC      *nats.Conn
	Account string // public key of AUDITRAIL_SIEM: other requesters are refused
	Creds   ActiveStreamCredentials
	Log     *slog.Logger
	// Timeout bounds each request (default 5 s); Concurrent how many run
	// at once (default 8; more are answered 503).
	Timeout    time.Duration
	Concurrent int
}

// Start subscribes (queue group StreamProxyQueue); stop unsubscribes and
// waits for the requests in flight.
func (p *StreamConsumerProxy) Start() (stop func(), err error) {
	if p.Timeout <= 0 {
		p.Timeout = defaultProxyTimeout
	}
	if p.Concurrent <= 0 {
		p.Concurrent = defaultProxyConcurrent
	}
	if p.Log == nil {
		p.Log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	sem := make(chan struct{}, p.Concurrent)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		stopped bool
	)
	sub, err := p.NC.QueueSubscribe(siemProxyPrefix+".>", StreamProxyQueue, func(m *nats.Msg) {
		select {
		case sem <- struct{}{}:
		default:
			p.respond(m, jsError(responseType(m.Subject), streamBusyCode, streamBusyErrCode, "stream credential proxy busy, retry"))
			return
		}
		mu.Lock()
		if stopped {
			mu.Unlock()
			<-sem
			return
		}
		wg.Add(1)
		mu.Unlock()
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer func() {
				if r := recover(); r != nil {
					p.Log.Error("stream credential proxy: panic", "panic", r)
				}
			}()
			rctx, rcancel := context.WithTimeout(ctx, p.Timeout)
			defer rcancel()
			p.respond(m, p.handle(rctx, m))
		}()
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("stream credential proxy: subscribe: %w", err)
	}
	return func() {
		_ = sub.Unsubscribe()
		mu.Lock()
		stopped = true
		mu.Unlock()
		cancel()
		wg.Wait()
	}, nil
}

func (p *StreamConsumerProxy) respond(m *nats.Msg, data []byte) {
	if m.Reply == "" {
		return
	}
	if err := m.Respond(data); err != nil {
		p.Log.Warn("stream credential proxy: respond", "err", err)
	}
}

func responseType(subject string) string {
	if strings.HasPrefix(subject, siemProxyDelete+".") {
		return streamDeleteResponse
	}
	return streamCreateResponse
}

// jsError is a JetStream API error response.
func jsError(typ string, code, errCode int, desc string) []byte {
	b, _ := json.Marshal(map[string]any{"type": typ, "error": map[string]any{"code": code, "err_code": errCode, "description": desc}})
	return b
}

// errRefused is a refusal; its text is answered to the credential.
var errRefused = errors.New("stream credential")

func refused(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errRefused, fmt.Sprintf(format, a...))
}

// handle answers one request: JetStream's response, or a refusal.
func (p *StreamConsumerProxy) handle(ctx context.Context, m *nats.Msg) []byte {
	typ := responseType(m.Subject)
	out, err := p.serve(ctx, m)
	if err != nil {
		if !errors.Is(err, errRefused) {
			p.Log.Warn("stream credential proxy", "subject", m.Subject, "err", err)
			return jsError(typ, streamBusyCode, streamBusyErrCode, "stream credential proxy: JetStream unavailable, retry")
		}
		p.Log.Info("stream credential proxy: refused", "subject", m.Subject, "reason", err)
		return jsError(typ, streamRefusedCode, streamRefusedErrCode, err.Error())
	}
	return out
}

func (p *StreamConsumerProxy) serve(ctx context.Context, m *nats.Msg) ([]byte, error) {
	op, rest, _ := strings.Cut(strings.TrimPrefix(m.Subject, siemProxyPrefix+"."), ".")
	name, filter, _ := strings.Cut(rest, ".")
	id, ok := strings.CutPrefix(name, "siem-")
	if !ok || id == "" {
		return nil, refused("consumer %q is not a stream credential's", name)
	}
	var ci struct {
		Account string `json:"acc"`
		User    string `json:"user"`
	}
	if h := m.Header.Get("Nats-Request-Info"); h == "" || json.Unmarshal([]byte(h), &ci) != nil || ci.Account != p.Account || ci.User == "" {
		return nil, refused("the requester is not a stream credential")
	}
	org, cname, err := p.Creds.ActiveStreamCredential(ctx, id, ci.User, false)
	if err != nil {
		// A credential just made by another instance may not be in this
		// one's state yet.
		org, cname, err = p.Creds.ActiveStreamCredential(ctx, id, ci.User, true)
	}
	if err != nil {
		return nil, refused("%v", err)
	}
	s := schemas.StreamEvents
	switch op {
	case "delete":
		if filter != "" {
			return nil, refused("malformed delete")
		}
		r, err := p.NC.RequestWithContext(ctx, jsAPI+"CONSUMER.DELETE."+s+"."+name, nil)
		if err != nil {
			return nil, fmt.Errorf("delete %s: %w", name, err)
		}
		return r.Data, nil
	case "create":
		body, filter, err := SanitizeStreamCreate(m.Data, org, id, cname, filter)
		if err != nil {
			return nil, err
		}
		r, err := p.NC.RequestWithContext(ctx, jsAPI+"CONSUMER.CREATE."+s+"."+name+"."+filter, body)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
		var resp struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(r.Data, &resp) == nil && len(resp.Error) > 0 {
			return r.Data, nil // JetStream refused: nothing was created
		}
		// A revocation recorded while the consumer was being created (by
		// another instance) deletes it before this create, or is seen now:
		// the consumer goes again.
		if _, _, err := p.Creds.ActiveStreamCredential(ctx, id, ci.User, true); err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.Timeout)
			defer cancel()
			if _, derr := p.NC.RequestWithContext(dctx, jsAPI+"CONSUMER.DELETE."+s+"."+name, nil); derr != nil {
				p.Log.Warn("stream credential proxy: delete the consumer of a revoked credential", "consumer", name, "err", derr)
			}
			return nil, refused("%v", err)
		}
		return r.Data, nil
	}
	return nil, refused("unknown request")
}

// streamCreateRequest is JetStream's consumer create request.
type streamCreateRequest struct {
	Stream   string          `json:"stream_name"`
	Config   json.RawMessage `json:"config"`
	Action   string          `json:"action,omitempty"`
	Pedantic bool            `json:"pedantic,omitempty"`
}

// streamConsumerConfig is JetStream's consumer configuration (nats-server
// v2.15.2's field names): a request with any other field is refused.
type streamConsumerConfig struct {
	Durable            string            `json:"durable_name,omitempty"`
	Name               string            `json:"name,omitempty"`
	Description        string            `json:"description,omitempty"`
	DeliverPolicy      string            `json:"deliver_policy,omitempty"`
	OptStartSeq        uint64            `json:"opt_start_seq,omitempty"`
	OptStartTime       *time.Time        `json:"opt_start_time,omitempty"`
	AckPolicy          string            `json:"ack_policy,omitempty"`
	AckWait            time.Duration     `json:"ack_wait,omitempty"`
	MaxDeliver         int               `json:"max_deliver,omitempty"`
	BackOff            []time.Duration   `json:"backoff,omitempty"`
	FilterSubject      string            `json:"filter_subject,omitempty"`
	FilterSubjects     []string          `json:"filter_subjects,omitempty"`
	ReplayPolicy       string            `json:"replay_policy,omitempty"`
	RateLimit          uint64            `json:"rate_limit_bps,omitempty"`
	SampleFrequency    string            `json:"sample_freq,omitempty"`
	MaxWaiting         int               `json:"max_waiting,omitempty"`
	MaxAckPending      int               `json:"max_ack_pending,omitempty"`
	FlowControl        bool              `json:"flow_control,omitempty"`
	HeadersOnly        bool              `json:"headers_only,omitempty"`
	MaxRequestBatch    int               `json:"max_batch,omitempty"`
	MaxRequestExpires  time.Duration     `json:"max_expires,omitempty"`
	MaxRequestMaxBytes int               `json:"max_bytes,omitempty"`
	DeliverSubject     string            `json:"deliver_subject,omitempty"`
	DeliverGroup       string            `json:"deliver_group,omitempty"`
	Heartbeat          time.Duration     `json:"idle_heartbeat,omitempty"`
	InactiveThreshold  time.Duration     `json:"inactive_threshold,omitempty"`
	Replicas           int               `json:"num_replicas"`
	MemoryStorage      bool              `json:"mem_storage,omitempty"`
	Direct             bool              `json:"direct,omitempty"`
	Sourcing           bool              `json:"sourcing,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	PauseUntil         *time.Time        `json:"pause_until,omitempty"`
	PriorityGroups     []string          `json:"priority_groups,omitempty"`
	PriorityPolicy     string            `json:"priority_policy,omitempty"`
	PinnedTTL          time.Duration     `json:"priority_timeout,omitempty"`
}

// SanitizeStreamCreate checks the body of a consumer create of stream
// credential id of org (named name) on a subject whose filter token is
// subjectFilter ("" for the unfiltered form), and returns the request the
// control plane sends instead — only the checked fields, the consumer
// durable, its description and metadata the control plane's — and its
// filter.
func SanitizeStreamCreate(body []byte, org, id, name, subjectFilter string) ([]byte, string, error) {
	if len(body) > maxStreamCreateBody {
		return nil, "", refused("create request over %d bytes", maxStreamCreateBody)
	}
	var req streamCreateRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "", refused("malformed create request")
	}
	var c streamConsumerConfig
	d := json.NewDecoder(bytes.NewReader(req.Config))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return nil, "", refused("malformed or unsupported consumer configuration: %v", err)
	}
	own := StreamConsumer(id)
	switch {
	case req.Stream != schemas.StreamEvents:
		return nil, "", refused("only stream %s", schemas.StreamEvents)
	case req.Action != "" && req.Action != "create" && req.Action != "update":
		return nil, "", refused("unknown action %q", req.Action)
	case c.Durable != "" && c.Durable != own, c.Name != "" && c.Name != own:
		return nil, "", refused("the credential's consumer is %s", own)
	case len(c.FilterSubjects) > 0:
		return nil, "", refused("filter_subjects: use one filter_subject")
	case subjectFilter != "" && c.FilterSubject != subjectFilter:
		return nil, "", refused("the filter of the body differs from the subject's")
	case !StreamFilterInside(org, c.FilterSubject):
		return nil, "", refused("the filter must lie inside %s", schemas.EventSubject(org, ">"))
	case c.DeliverSubject != "", c.DeliverGroup != "", c.FlowControl, c.Heartbeat != 0, c.RateLimit != 0:
		return nil, "", refused("only pull consumers (no deliver_subject, deliver_group, flow_control, idle_heartbeat, rate_limit_bps)")
	case c.InactiveThreshold != 0:
		return nil, "", refused("no inactive_threshold: the consumer is durable")
	case c.AckPolicy != "" && c.AckPolicy != "explicit":
		return nil, "", refused("ack_policy must be explicit")
	case c.SampleFrequency != "", c.MemoryStorage, c.Direct, c.Sourcing:
		return nil, "", refused("no sample_freq, mem_storage, direct or sourcing")
	case len(c.PriorityGroups) > 0, c.PriorityPolicy != "" && c.PriorityPolicy != "none", c.PinnedTTL != 0:
		return nil, "", refused("no priority groups")
	case c.PauseUntil != nil && !c.PauseUntil.IsZero():
		return nil, "", refused("no pause_until")
	case c.ReplayPolicy != "" && c.ReplayPolicy != "instant" && c.ReplayPolicy != "original":
		return nil, "", refused("replay_policy must be instant or original")
	case c.AckWait != 0 && (c.AckWait < time.Second || c.AckWait > maxStreamAckWait):
		return nil, "", refused("ack_wait between 1s and %s", maxStreamAckWait)
	case len(c.BackOff) > maxStreamBackoff:
		return nil, "", refused("at most %d backoff steps", maxStreamBackoff)
	case c.MaxDeliver < -1:
		return nil, "", refused("max_deliver must be -1 or more")
	case c.MaxWaiting < 0 || c.MaxWaiting > maxStreamWaiting:
		return nil, "", refused("max_waiting at most %d", maxStreamWaiting)
	case c.MaxAckPending < 0 || c.MaxAckPending > maxStreamAckPending:
		return nil, "", refused("max_ack_pending between 1 and %d", maxStreamAckPending)
	case c.MaxRequestBatch < 0 || c.MaxRequestBatch > maxStreamBatch:
		return nil, "", refused("max_batch at most %d", maxStreamBatch)
	case c.MaxRequestMaxBytes < 0 || c.MaxRequestMaxBytes > maxStreamRequestBytes:
		return nil, "", refused("max_bytes at most %d", maxStreamRequestBytes)
	case c.MaxRequestExpires < 0 || c.MaxRequestExpires > maxStreamExpires:
		return nil, "", refused("max_expires at most %s", maxStreamExpires)
	case c.Replicas < 0 || c.Replicas > maxStreamReplicas:
		return nil, "", refused("num_replicas at most %d", maxStreamReplicas)
	case len(c.Description) > maxStreamDescription:
		return nil, "", refused("description at most %d bytes", maxStreamDescription)
	}
	for _, b := range c.BackOff {
		if b < time.Second || b > maxStreamAckWait {
			return nil, "", refused("backoff steps between 1s and %s", maxStreamAckWait)
		}
	}
	switch c.DeliverPolicy {
	case "", "all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject":
	default:
		return nil, "", refused("unknown deliver_policy %q", c.DeliverPolicy)
	}
	meta := streamConsumerMetadata(org, id)
	for k, v := range c.Metadata {
		// The server's own keys come back in a consumer's info.
		if w, ok := meta[k]; !strings.HasPrefix(k, "_nats.") && (!ok || w != v) {
			return nil, "", refused("metadata %q is the control plane's", k)
		}
	}
	c.Durable, c.Name, c.Metadata, c.PauseUntil, c.AckPolicy = own, own, meta, nil, "explicit"
	c.PriorityPolicy = ""
	if c.Description == "" {
		c.Description = streamConsumerDescription(name)
	}
	if c.DeliverPolicy == "" {
		c.DeliverPolicy = "all"
	}
	if c.ReplayPolicy == "" {
		c.ReplayPolicy = "instant"
	}
	cfg, err := json.Marshal(c)
	if err != nil {
		return nil, "", err
	}
	out, err := json.Marshal(streamCreateRequest{Stream: schemas.StreamEvents, Config: cfg, Action: req.Action, Pedantic: req.Pedantic})
	return out, c.FilterSubject, err
}

// StreamFilterInside reports whether filter is a valid subject filter
// inside the subjects of org (auditrail.events.<org>.>).
func StreamFilterInside(org, filter string) bool {
	prefix := schemas.EventSubject(org, "")
	rest, ok := strings.CutPrefix(filter, prefix)
	if !ok || org == "" || strings.ContainsAny(org, ".*> \t\r\n") || rest == "" {
		return false
	}
	toks := strings.Split(rest, ".")
	for i, t := range toks {
		switch {
		case t == "", strings.ContainsAny(t, " \t\r\n"):
			return false
		case t == ">" && i != len(toks)-1:
			return false
		case t != ">" && t != "*" && strings.ContainsAny(t, "*>"):
			return false
		}
	}
	return true
}
