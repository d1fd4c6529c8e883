package natsx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// The roles that get NATS credentials, each with only the subjects it needs.
const (
	RoleAdmin        = "admin"        // everything: emit, tail, the nats CLI
	RoleProducer     = "producer"     // publishes events, nothing else
	RoleIngest       = "ingest"       // consumes the event stream, writes the DLQ and the commit marks
	RoleControlPlane = "controlplane" // the only writer of the control-plane bucket
	RoleToolRunner   = "toolrunner"   // publishes execution events, reads the bucket, asks the control plane for token refreshes
	RoleQuery        = "query"        // reads the bucket, records exports (audit events), follows the event stream (live streams)
	RoleDeliver      = "deliver"      // reads the bucket, consumes each destination's durable consumer, writes the delivery bucket
	RoleTLog         = "tlog"         // the tamper-evidence log: its durable, the tlog bucket, publishes checkpoints only, reads the bucket (witnesses)
	RoleLifecycle    = "lifecycle"    // retention: reads the bucket, records expiries (audit events), purges expired subjects
)

// Roles lists every role, admin first.
var Roles = []string{RoleAdmin, RoleProducer, RoleIngest, RoleControlPlane, RoleToolRunner, RoleQuery, RoleDeliver, RoleTLog, RoleLifecycle}

// LifecycleBucket is the lifecycle's KV bucket (the lease of its cycles):
// the lifecycle role writes it.
const LifecycleBucket = "auditrail_lifecycle"

// TLogBucket is the tamper-evidence log's KV bucket (the sequencer's and
// the checkpointer's leases, the signing keys, the witnesses' statuses):
// the tlog role writes it, the query role reads it (GET
// /api/v1/audit_keys), the control plane too (GET …/witnesses).
const TLogBucket = "auditrail_tlog"

// TLogDurable is the sequencer's durable consumer on AUDITRAIL_COMMITS
// (sequencer.DefaultConfig); before 0.12, on AUDITRAIL_EVENTS, where the
// sequencer deletes it.
const TLogDurable = "auditrail-tlog"

// ControlPlaneBucket is the control-plane KV bucket (cpstate.DefaultBucket).
const ControlPlaneBucket = "auditrail_controlplane"

// DeliverBucket is the KV bucket of the delivery role (deliver.DefaultBucket):
// each destination's status, lease and the instances' heartbeats. Only the
// deliver role writes it; the control plane reads the statuses.
const DeliverBucket = "auditrail_deliver"

// OAuthStatesBucket holds the used OAuth states (cpstate.DefaultStatesBucket):
// the control plane creates a key per callback, so that a state works once.
const OAuthStatesBucket = "auditrail_oauth_states"

// ConnRefreshSubject is the control plane's service of token refreshes
// (controlplane.ConnRefreshSubject): the tool runner asks there, the control
// plane refreshes a user's connection and stores it. No role but the control
// plane publishes to the bucket: a KV stream takes rollups (the control
// plane's outbox purges need them), and one message with Nats-Rollup: all on
// any key would erase every key of the bucket.
const ConnRefreshSubject = "auditrail.cp.conn.refresh"

// ResponseTTL is how long a role that serves requests (the control plane)
// may answer one, on the requester's reply subject.
const ResponseTTL = time.Minute

// RateLimitBuckets are the KV buckets of the shared rate limits; every role
// that serves HTTP reads and writes them.
var RateLimitBuckets = []string{"auditrail_ratelimit", "auditrail_ratelimit_admin", "auditrail_ratelimit_tools"}

// AppAccount is the name of the account that holds every auditrail subject.
const AppAccount = "AUDITRAIL"

// Key files in the keys directory; creds files are <role>.creds.
const (
	operatorSeedFile = "operator.nk"
	systemSeedFile   = "system.nk"
	accountSeedFile  = "account.nk"
	// ServerConfFile is the nats-server include that trusts the operator
	// and preloads the accounts (resolver MEMORY).
	ServerConfFile = "auth.conf"
)

// CredsFile is the path of the credentials of role in dir.
func CredsFile(dir, role string) string { return filepath.Join(dir, role+".creds") }

// InboxPrefix is the reply-subject prefix of role: a role may subscribe to
// its own replies only.
func InboxPrefix(role string) string { return "_INBOX_" + role }

// Auth holds the operator, system-account and application-account keys.
// The platform signs the accounts and issues user JWTs with it.
type Auth struct {
	operator, system, account nkeys.KeyPair
	siem                      nkeys.KeyPair // AUDITRAIL_SIEM, the stream credentials' (siem.go)
}

// LoadOrCreateAuth reads the keys kept in dir, creating (0600) the missing
// ones; the same keys are used across restarts.
func LoadOrCreateAuth(dir string) (*Auth, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nats keys dir: %w", err)
	}
	var a Auth
	for _, k := range []struct {
		file string
		kp   *nkeys.KeyPair
		mk   func() (nkeys.KeyPair, error)
	}{
		{operatorSeedFile, &a.operator, nkeys.CreateOperator},
		{systemSeedFile, &a.system, nkeys.CreateAccount},
		{accountSeedFile, &a.account, nkeys.CreateAccount},
		{siemSeedFile, &a.siem, nkeys.CreateAccount},
	} {
		path := filepath.Join(dir, k.file)
		seed, err := os.ReadFile(path)
		switch {
		case err == nil:
			if *k.kp, err = nkeys.FromSeed([]byte(strings.TrimSpace(string(seed)))); err != nil {
				return nil, fmt.Errorf("%s is corrupt: %w", path, err)
			}
		case errors.Is(err, os.ErrNotExist):
			if *k.kp, err = k.mk(); err != nil {
				return nil, err
			}
			s, _ := (*k.kp).Seed()
			if err := writeFile0600(path, append(s, '\n')); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
	}
	return &a, nil
}

func writeFile0600(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func pub(kp nkeys.KeyPair) string {
	p, _ := kp.PublicKey()
	return p
}

// SystemAccount is the public key of the system account.
func (a *Auth) SystemAccount() string { return pub(a.system) }

// Account is the public key of the application account.
func (a *Auth) Account() string { return pub(a.account) }

// operatorClaims is the operator JWT's claims.
func (a *Auth) operatorClaims() (*jwt.OperatorClaims, string, error) {
	oc := jwt.NewOperatorClaims(pub(a.operator))
	oc.Name = "auditrail"
	oc.SystemAccount = pub(a.system)
	tok, err := oc.Encode(a.operator)
	if err != nil {
		return nil, "", fmt.Errorf("operator jwt: %w", err)
	}
	return oc, tok, nil
}

// accountJWTs returns the account JWTs by public key: the system account,
// the application account with JetStream enabled, and AUDITRAIL_SIEM with
// the services the application account exports to it (siem.go).
func (a *Auth) accountJWTs() (map[string]string, error) {
	sys := jwt.NewAccountClaims(pub(a.system))
	sys.Name = "SYS"
	app := jwt.NewAccountClaims(pub(a.account))
	app.Name = AppAccount
	app.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1, MaxAckPending: -1}
	app.Exports.Add(siemExports()...)
	out := map[string]string{}
	for _, c := range []*jwt.AccountClaims{sys, app, siemAccountClaims(pub(a.siem), pub(a.account))} {
		tok, err := c.Encode(a.operator)
		if err != nil {
			return nil, fmt.Errorf("account jwt %s: %w", c.Name, err)
		}
		out[c.Subject] = tok
	}
	return out, nil
}

// Creds returns a credentials file (user JWT and seed) for role, with the
// role's permissions, signed by the application account.
func (a *Auth) Creds(role string) ([]byte, error) {
	perms, err := Permissions(role)
	if err != nil {
		return nil, err
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return nil, err
	}
	uc := jwt.NewUserClaims(pub(user))
	uc.Name = role
	uc.Permissions = perms
	tok, err := uc.Encode(a.account)
	if err != nil {
		return nil, fmt.Errorf("user jwt %s: %w", role, err)
	}
	seed, _ := user.Seed()
	return jwt.FormatUserConfig(tok, seed)
}

// WriteCreds writes <dir>/<role>.creds (0600) for every role.
func (a *Auth) WriteCreds(dir string) error {
	for _, role := range Roles {
		c, err := a.Creds(role)
		if err != nil {
			return err
		}
		if err := writeFile0600(CredsFile(dir, role), c); err != nil {
			return fmt.Errorf("write creds: %w", err)
		}
	}
	return nil
}

// ServerConf returns the nats-server configuration that trusts the operator
// and preloads both accounts in a memory resolver, for an include in the
// server's configuration file.
func (a *Auth) ServerConf() (string, error) {
	_, op, err := a.operatorClaims()
	if err != nil {
		return "", err
	}
	accts, err := a.accountJWTs()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# auditrail NATS authentication (written by `auditrail nats-setup`).\n")
	fmt.Fprintf(&b, "max_control_line: %d\n", MaxControlLine)
	fmt.Fprintf(&b, "operator: %s\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n", op, pub(a.system))
	keys := make([]string, 0, len(accts))
	for k := range accts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %s\n", k, accts[k])
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// configure puts the server in operator mode with a memory resolver.
func (a *Auth) configure(opts *server.Options) error {
	oc, _, err := a.operatorClaims()
	if err != nil {
		return err
	}
	accts, err := a.accountJWTs()
	if err != nil {
		return err
	}
	res := &server.MemAccResolver{}
	for k, v := range accts {
		if err := res.Store(k, v); err != nil {
			return err
		}
	}
	opts.TrustedOperators = []*jwt.OperatorClaims{oc}
	opts.SystemAccount = pub(a.system)
	opts.AccountResolver = res
	return nil
}

const jsAPI = "$JS.API."

// kvRead are the subjects that read and watch bucket b.
func kvRead(b string) []string {
	s := "KV_" + b
	return []string{
		jsAPI + "STREAM.INFO." + s,
		jsAPI + "CONSUMER.CREATE." + s, jsAPI + "CONSUMER.CREATE." + s + ".>",
		jsAPI + "CONSUMER.INFO." + s + ".>", jsAPI + "CONSUMER.DELETE." + s + ".>",
		jsAPI + "CONSUMER.MSG.NEXT." + s + ".>",
		jsAPI + "DIRECT.GET." + s, jsAPI + "DIRECT.GET." + s + ".>",
		jsAPI + "STREAM.MSG.GET." + s,
		"$JS.FC." + s + ".>",
	}
}

// kvWrite are the subjects that create, configure and write bucket b.
func kvWrite(b string) []string {
	s := "KV_" + b
	return append(kvRead(b), "$KV."+b+".>", jsAPI+"STREAM.CREATE."+s, jsAPI+"STREAM.UPDATE."+s)
}

// streamAdmin are the subjects that create and update stream s.
func streamAdmin(s string) []string {
	return []string{jsAPI + "STREAM.INFO." + s, jsAPI + "STREAM.CREATE." + s, jsAPI + "STREAM.UPDATE." + s}
}

// IngestDurables are the default durable consumers of ingest
// (ingest.DefaultConfig, ingest.ExecutionDurable) on AUDITRAIL_EVENTS.
var IngestDurables = []string{"auditrail-ingest-audit", "auditrail-ingest-execution"}

// liveStream are the subjects of the query role's live streams: ephemeral
// (ordered) pull consumers of AUDITRAIL_EVENTS, created only with a filter
// inside auditrail.events.*.> (the filter is part of the create subject and
// the server refuses a request whose filter differs), their pulls, their
// info and their deletion when the client goes away. Deliveries, heartbeats
// and API replies reach the role on its own inbox. Acks, durable consumers
// and every stream operation stay refused.
func liveStream() []string {
	ev := jsAPI + "CONSUMER."
	s := schemas.StreamEvents
	return []string{
		ev + "CREATE." + s + ".*." + schemas.EventSubject("*", ">"),
		ev + "MSG.NEXT." + s + ".*",
		ev + "INFO." + s + ".*",
		ev + "DELETE." + s + ".*",
	}
}

// liveStreamDeny keeps the live-stream grants off ingest's durable
// consumers: consumer names are one token, so the grants above cover every
// consumer of the stream; ingest's (by their default names) may not be
// redefined, pulled from (that would steal and delay its messages) nor
// deleted.
func liveStreamDeny() []string {
	var out []string
	for _, d := range IngestDurables {
		s := schemas.StreamEvents + "." + d
		out = append(out, jsAPI+"CONSUMER.CREATE."+s+".>", jsAPI+"CONSUMER.MSG.NEXT."+s, jsAPI+"CONSUMER.DELETE."+s)
	}
	return out
}

// deliverConsumers are the subjects of the deliver role on AUDITRAIL_EVENTS:
// durable pull consumers created only with a filter inside
// auditrail.events.*.> (the filter is part of the create subject), their
// pulls, info, acks and deletion, and the listing that finds the consumers
// of deleted destinations. Stream operations stay refused, and ingest's
// consumers are denied (deliverDeny).
func deliverConsumers() []string {
	s := schemas.StreamEvents
	return append(liveStream(), jsAPI+"STREAM.INFO."+s, jsAPI+"CONSUMER.LIST."+s, "$JS.ACK."+s+".*.>")
}

// tlogSubjects are the tlog role's: its one durable consumer of
// AUDITRAIL_COMMITS (create, pull, info, acks), the info of ingest's
// default durables (their watermarks), the event stream's info, the
// reading of one of its messages by sequence (the time of a seal), the
// deletion of the durable it had on the event stream before 0.12, and the
// checkpoint subjects; no other event subject.
func tlogSubjects() []string {
	ev, cm := schemas.StreamEvents, schemas.StreamCommits
	c := jsAPI + "CONSUMER."
	out := []string{
		schemas.SubjectCheckpointAll,
		jsAPI + "STREAM.INFO." + ev, jsAPI + "STREAM.MSG.GET." + ev,
		c + "INFO." + ev + "." + TLogDurable, c + "DELETE." + ev + "." + TLogDurable,
		jsAPI + "STREAM.INFO." + cm,
		c + "CREATE." + cm + "." + TLogDurable, c + "CREATE." + cm + "." + TLogDurable + ".>",
		c + "DURABLE.CREATE." + cm + "." + TLogDurable,
		c + "INFO." + cm + "." + TLogDurable, c + "MSG.NEXT." + cm + "." + TLogDurable,
		"$JS.ACK." + cm + "." + TLogDurable + ".>",
	}
	for _, d := range IngestDurables {
		out = append(out, c+"INFO."+ev+"."+d)
	}
	return append(out, kvWrite(TLogBucket)...)
}

// lifecycleSubjects are the lifecycle role's: the expiry and erasure
// records (audit events), the purges of both streams (it removes the
// messages of expired entries, one organization's subject at a time: a
// purge's subject cannot be narrowed further by a permission) and the
// deletion of single messages (those of erased entries), the streams'
// info, and the ordered consumers on the dead-letter stream that find the
// first dead letter after a cutoff or one that names an erased person.
func lifecycleSubjects() []string {
	ev, dlq := schemas.StreamEvents, schemas.StreamDLQ
	c := jsAPI + "CONSUMER."
	return []string{
		schemas.EventSubject("*", schemas.KindAudit),
		jsAPI + "STREAM.INFO." + ev, jsAPI + "STREAM.INFO." + dlq,
		jsAPI + "STREAM.PURGE." + ev, jsAPI + "STREAM.PURGE." + dlq,
		jsAPI + "STREAM.MSG.DELETE." + ev, jsAPI + "STREAM.MSG.DELETE." + dlq,
		c + "CREATE." + dlq + ".>", c + "MSG.NEXT." + dlq + ".>", c + "INFO." + dlq + ".>", c + "DELETE." + dlq + ".>",
	}
}

// deliverDeny keeps the deliver role off ingest's durable consumers: it
// may not redefine, pull from, acknowledge for (that would lose ingest's
// messages) nor delete them.
func deliverDeny() []string {
	out := liveStreamDeny()
	for _, d := range IngestDurables {
		out = append(out, "$JS.ACK."+schemas.StreamEvents+"."+d+".>")
	}
	return out
}

func rateLimits() []string {
	var out []string
	for _, b := range RateLimitBuckets {
		out = append(out, kvWrite(b)...)
	}
	return out
}

// Permissions returns the subjects role may publish to and subscribe to.
// Replies reach a role on its own inbox prefix only.
func Permissions(role string) (jwt.Permissions, error) {
	var pubs []string
	var subs []string
	var resp *jwt.ResponsePermission
	var deny []string
	switch role {
	case RoleAdmin:
		return jwt.Permissions{Pub: jwt.Permission{Allow: []string{">"}}, Sub: jwt.Permission{Allow: []string{">"}}}, nil
	case RoleProducer:
		pubs = []string{schemas.SubjectEventsAll, jsAPI + "STREAM.INFO." + schemas.StreamEvents}
	case RoleIngest:
		ev := schemas.StreamEvents
		pubs = []string{
			schemas.SubjectDLQAll, schemas.SubjectCommitsAll,
			jsAPI + "STREAM.INFO." + ev, jsAPI + "STREAM.INFO." + schemas.StreamDLQ, jsAPI + "STREAM.INFO." + schemas.StreamCommits,
			jsAPI + "CONSUMER.CREATE." + ev, jsAPI + "CONSUMER.CREATE." + ev + ".>",
			jsAPI + "CONSUMER.DURABLE.CREATE." + ev + ".>",
			jsAPI + "CONSUMER.INFO." + ev + ".>", jsAPI + "CONSUMER.MSG.NEXT." + ev + ".>",
			"$JS.ACK." + ev + ".>",
		}
	case RoleControlPlane:
		pubs = append(pubs, schemas.EventSubject("*", schemas.KindAudit))
		pubs = append(pubs, streamAdmin(schemas.StreamEvents)...)
		pubs = append(pubs, streamAdmin(schemas.StreamDLQ)...)
		pubs = append(pubs, streamAdmin(schemas.StreamCommits)...)
		pubs = append(pubs, kvWrite(ControlPlaneBucket)...)
		pubs = append(pubs, kvWrite(OAuthStatesBucket)...)
		pubs = append(pubs, kvRead(DeliverBucket)...) // the destinations' statuses
		pubs = append(pubs, kvRead(TLogBucket)...)    // the witnesses' statuses and the operator's witnesses
		pubs = append(pubs, rateLimits()...)
		pubs = append(pubs, streamConsumerAdmin()...) // the stream credentials' consumers (siem.go)
		deny = liveStreamDeny()
		// It serves the tool runners' token refreshes, answering each
		// once on its reply subject.
		subs = append(subs, ConnRefreshSubject)
		subs = append(subs, siemProxySubjects()...) // the stream credentials' creates and deletes (siem_proxy.go)
		resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: ResponseTTL}
	case RoleToolRunner:
		pubs = append(pubs, schemas.EventSubject("*", schemas.KindExecution), jsAPI+"STREAM.INFO."+schemas.StreamEvents)
		pubs = append(pubs, kvRead(ControlPlaneBucket)...)
		pubs = append(pubs, ConnRefreshSubject) // refreshed tokens: the control plane stores them
		pubs = append(pubs, rateLimits()...)
	case RoleQuery:
		// audit events: each export is recorded in its organization's trail
		pubs = append(pubs, schemas.EventSubject("*", schemas.KindAudit), jsAPI+"STREAM.INFO."+schemas.StreamEvents)
		pubs = append(pubs, kvRead(ControlPlaneBucket)...)
		pubs = append(pubs, rateLimits()...)
		pubs = append(pubs, liveStream()...)
		pubs = append(pubs, kvRead(TLogBucket)...) // the signing keys (audit_keys)
		deny = liveStreamDeny()
	case RoleDeliver:
		pubs = append(pubs, kvRead(ControlPlaneBucket)...)
		pubs = append(pubs, kvWrite(DeliverBucket)...)
		pubs = append(pubs, deliverConsumers()...)
		deny = deliverDeny()
	case RoleTLog:
		pubs = append(pubs, tlogSubjects()...)
		pubs = append(pubs, kvRead(ControlPlaneBucket)...) // the organizations' witnesses
	case RoleLifecycle:
		pubs = append(pubs, lifecycleSubjects()...)
		pubs = append(pubs, kvRead(ControlPlaneBucket)...)
		// the erasures' progress: their keys only
		pubs = append(pubs, "$KV."+ControlPlaneBucket+".erasure.>")
		pubs = append(pubs, kvWrite(LifecycleBucket)...) // its lease
		pubs = append(pubs, liveStream()...)             // reading an organization's messages to erase some
		deny = liveStreamDeny()
	default:
		return jwt.Permissions{}, fmt.Errorf("%w: unknown NATS role %q", ErrInvalidOption, role)
	}
	pubs = append(pubs, jsAPI+"INFO")
	return jwt.Permissions{
		Pub:  jwt.Permission{Allow: pubs, Deny: deny},
		Sub:  jwt.Permission{Allow: append([]string{InboxPrefix(role) + ".>"}, subs...)},
		Resp: resp,
	}, nil
}

// CredsOptions returns the connect options of a credentials file: the
// credentials, and the inbox prefix its permissions allow.
func CredsOptions(path string) ([]nats.Option, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("nats creds: %w", err)
	}
	tok, err := jwt.ParseDecoratedJWT(b)
	if err != nil {
		return nil, fmt.Errorf("nats creds %s: %w", path, err)
	}
	uc, err := jwt.DecodeUserClaims(tok)
	if err != nil {
		return nil, fmt.Errorf("nats creds %s: %w", path, err)
	}
	opts := []nats.Option{nats.UserCredentials(path)}
	for _, s := range uc.Sub.Allow {
		if p, ok := strings.CutSuffix(s, ".>"); ok && strings.HasPrefix(p, "_INBOX_") {
			opts = append(opts, nats.CustomInboxPrefix(p))
			break
		}
	}
	return opts, nil
}

// WaitStreams waits until AUDITRAIL_EVENTS, AUDITRAIL_DLQ and AUDITRAIL_COMMITS exist (the
// controlplane role creates them), retrying with back-off until ctx ends.
func WaitStreams(ctx context.Context, js jetstream.JetStream, log *slog.Logger, names ...string) error {
	if len(names) == 0 {
		names = []string{schemas.StreamEvents, schemas.StreamDLQ, schemas.StreamCommits}
	}
	p := retry.Policy{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Multiplier: 2, Jitter: 0.2}
	return retry.Do(ctx, p, func(ctx context.Context) error {
		for _, n := range names {
			if _, err := js.Stream(ctx, n); err != nil {
				return fmt.Errorf("stream %s: %w", n, err)
			}
		}
		return nil
	}, func(err error, next time.Duration) {
		log.Info("waiting for the streams (the controlplane role creates them)", "err", err, "retry_in", next)
	})
}
