package natsx

// Stream credentials: the NATS users that an organization's SIEM or poller
// holds to read that organization's events from AUDITRAIL_EVENTS.
//
// They live in an account of their own, AUDITRAIL_SIEM, not in the
// application account. Inside the application account any request's reply
// subject is a publish that no permission checks: the server answers a
// consumer info, or delivers the messages a pull asks for, to whatever reply
// subject the requester names — the control plane's services, another
// role's inbox (TestAppAccountUserPublishesThroughTheServer). In
// AUDITRAIL_SIEM a reply can only reach subjects of AUDITRAIL_SIEM: the
// inboxes of other stream credentials, which nobody can read but their owner.
//
// AUDITRAIL_SIEM imports services of the application account: the info of
// a consumer of AUDITRAIL_EVENTS, its pulls (a stream of responses) and its
// acks (and siemNoJS), which JetStream answers, and a consumer's create and
// delete, which the control plane's proxy answers (below). It imports
// nothing else: no stream, KV, DLQ or system subject exists there. A
// credential may use them for its own consumer only, named after its id,
// and subscribe to its own inbox prefix only.
//
// A credential may create (and update) and delete its own consumer, but
// not through JetStream directly: a create request's body is not covered by
// any permission, and nats-server (v2.15.2) does not check a push
// consumer's deliver_subject against the creator's publish permissions
// (nats-io/nats-server#8274): a push consumer created by a credential would
// make the server publish the organization's messages on any subject of the
// application account; an update may set inactive_threshold, after which
// the server deletes the consumer and the next "update" creates a push one.
// So AUDITRAIL_SIEM imports the create and delete subjects of
// AUDITRAIL_EVENTS from subjects of the application account that only the
// control plane serves (siem_proxy.go): the user JWT pins the consumer's
// name (siem-<id>) and the organization in the filter token of the subject,
// the proxy checks the rest of the body (a durable pull consumer, explicit
// acks, bounded sizes, the filter inside the organization's subjects) and
// that the credential is active, and sends a sanitized create of its own.
// The control plane also creates the consumer when the credential is made
// and deletes it when the credential is revoked: from then on the
// credential reaches nothing, and the proxy refuses to create it again.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/auditrail/auditrail/schemas"
)

// SIEMAccount is the name of the account of the stream credentials.
const SIEMAccount = "AUDITRAIL_SIEM"

// siemSeedFile holds the seed of AUDITRAIL_SIEM in the keys directory.
const siemSeedFile = "siem.nk"

// StreamKeyFile is the path of the key that signs stream credentials (the
// seed of AUDITRAIL_SIEM) in the keys directory; the controlplane role reads
// it (--nats-stream-key).
func StreamKeyFile(dir string) string { return filepath.Join(dir, siemSeedFile) }

// StreamConsumer is the name of the durable consumer of stream credential id.
func StreamConsumer(id string) string { return "siem-" + id }

// StreamInboxPrefix is the reply-subject prefix of stream credential id.
func StreamInboxPrefix(id string) string { return "_INBOX_siem-" + id }

// StreamSubjects are the event subjects an organization's credentials read.
func StreamSubjects(org string) []string { return []string{schemas.EventSubject(org, ">")} }

// siemNoJS is a service of the application account that nothing serves:
// AUDITRAIL_SIEM imports it as $JS.API.INFO. An account without JetStream
// otherwise gets the whole JetStream API ($JS.API.>) from the system
// account (nats-server answers "not enabled" there), unless an import of
// its own shadows $JS.API.INFO; and that import would shadow the consumer
// info imported below (the server answers it as the account without
// JetStream).
const siemNoJS = "auditrail.siem.nojs"

// siemService is a service of the application account that AUDITRAIL_SIEM
// imports: subject in the application account, local (when not empty) the
// subject under which AUDITRAIL_SIEM's users request it; share sends the
// requester's account and user (the Nats-Request-Info header) with each
// request.
type siemService struct {
	name, subject, local string
	resp                 jwt.ResponseType
	share                bool
}

// siemServices are the services of the application account that
// AUDITRAIL_SIEM imports: a consumer's info, its pulls and its acks (and
// siemNoJS), served by JetStream; the creation and deletion of a consumer,
// served by the control plane's proxy (siem_proxy.go), which checks the
// request before it sends its own to JetStream.
func siemServices() []siemService {
	s := schemas.StreamEvents
	return []siemService{
		{name: "consumer info", subject: jsAPI + "CONSUMER.INFO." + s + ".*", resp: jwt.ResponseTypeSingleton},
		{name: "no jetstream api", subject: siemNoJS, local: jsAPI + "INFO", resp: jwt.ResponseTypeSingleton},
		{name: "consumer pulls", subject: jsAPI + "CONSUMER.MSG.NEXT." + s + ".*", resp: jwt.ResponseTypeStream},
		{name: "consumer acks", subject: "$JS.ACK." + s + ".*.>", resp: jwt.ResponseTypeSingleton},
		{name: "consumer create", subject: siemProxyCreate + ".*", local: jsAPI + "CONSUMER.CREATE." + s + ".*", resp: jwt.ResponseTypeSingleton, share: true},
		{name: "consumer create filtered", subject: siemProxyCreate + ".*.>", local: jsAPI + "CONSUMER.CREATE." + s + ".*.>", resp: jwt.ResponseTypeSingleton, share: true},
		{name: "consumer delete", subject: siemProxyDelete + ".*", local: jsAPI + "CONSUMER.DELETE." + s + ".*", resp: jwt.ResponseTypeSingleton, share: true},
	}
}

// siemExports are siemServices as the application account exports them.
func siemExports() []*jwt.Export {
	var out []*jwt.Export
	for _, e := range siemServices() {
		out = append(out, &jwt.Export{Name: e.name, Subject: jwt.Subject(e.subject), Type: jwt.Service, ResponseType: e.resp})
	}
	return out
}

// siemAccountClaims is AUDITRAIL_SIEM: the imports of siemServices from the
// application account app, no JetStream of its own.
func siemAccountClaims(siem, app string) *jwt.AccountClaims {
	c := jwt.NewAccountClaims(siem)
	c.Name = SIEMAccount
	for _, e := range siemServices() {
		im := &jwt.Import{Name: e.name, Subject: jwt.Subject(e.subject), Account: app, Type: jwt.Service, Share: e.share}
		if e.local != "" {
			im.LocalSubject = jwt.RenamingSubject(e.local)
		}
		c.Imports.Add(im)
	}
	return c
}

// StreamPermissions are the permissions of stream credential id of org:
// the info of its consumer, its creation (filtered inside the
// organization's subjects, or with the filter in the body, which the
// proxy checks) and deletion, pulls and acks of its messages, its own
// inbox.
func StreamPermissions(org, id string) jwt.Permissions {
	s, c := schemas.StreamEvents, StreamConsumer(id)
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: []string{
			jsAPI + "CONSUMER.INFO." + s + "." + c,
			jsAPI + "CONSUMER.CREATE." + s + "." + c,
			jsAPI + "CONSUMER.CREATE." + s + "." + c + "." + schemas.EventSubject(org, ">"),
			jsAPI + "CONSUMER.DELETE." + s + "." + c,
			jsAPI + "CONSUMER.MSG.NEXT." + s + "." + c,
			"$JS.ACK." + s + "." + c + ".>",
		}},
		Sub: jwt.Permission{Allow: []string{StreamInboxPrefix(id) + ".>"}},
	}
}

// StreamConsumerConfig is the consumer of stream credential id of org: a
// durable pull consumer of every event of the organization still in the
// stream, acknowledged one by one, with the server's defaults otherwise:
// the one a client's own minimal create (the durable name, the filter)
// asks for, so that its "create" of the consumer the control plane made
// succeeds (the proxy adds the description and metadata).
func StreamConsumerConfig(org, id, name string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       StreamConsumer(id),
		Description:   streamConsumerDescription(name),
		FilterSubject: StreamSubjects(org)[0],
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		Metadata:      streamConsumerMetadata(org, id),
	}
}

func streamConsumerDescription(name string) string { return "stream credential " + name }

func streamConsumerMetadata(org, id string) map[string]string {
	return map[string]string{"auditrail_org": org, "auditrail_stream_credential": id}
}

// StreamSigner signs stream credentials with the key of AUDITRAIL_SIEM;
// it holds no other key.
type StreamSigner struct{ kp nkeys.KeyPair }

// StreamSigner returns the signer of the stream credentials.
func (a *Auth) StreamSigner() *StreamSigner { return &StreamSigner{kp: a.siem} }

// LoadStreamSigner reads the key of AUDITRAIL_SIEM (StreamKeyFile, written
// by `auditrail nats-setup`).
func LoadStreamSigner(path string) (*StreamSigner, error) {
	seed, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("stream credentials key: %w", err)
	}
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(string(seed))))
	if err != nil {
		return nil, fmt.Errorf("%w: stream credentials key %s is not an nkey seed", ErrInvalidOption, path)
	}
	if !nkeys.IsValidPublicAccountKey(pub(kp)) {
		return nil, fmt.Errorf("%w: stream credentials key %s is not an account seed", ErrInvalidOption, path)
	}
	return &StreamSigner{kp: kp}, nil
}

// Account is the public key of AUDITRAIL_SIEM.
func (s *StreamSigner) Account() string { return pub(s.kp) }

// Issue returns the credentials file of stream credential id of org,
// valid until expires (enforced by NATS: the JWT's exp), and the public key
// of its user.
func (s *StreamSigner) Issue(org, id string, expires time.Time) (creds []byte, user string, err error) {
	if expires.IsZero() {
		return nil, "", errors.New("stream credential: no expiry")
	}
	u, err := nkeys.CreateUser()
	if err != nil {
		return nil, "", err
	}
	uc := jwt.NewUserClaims(pub(u))
	uc.Name = "stream credential " + id
	uc.Expires = expires.Unix()
	uc.Permissions = StreamPermissions(org, id)
	uc.Tags.Add("org:" + org)
	tok, err := uc.Encode(s.kp)
	if err != nil {
		return nil, "", fmt.Errorf("stream credential jwt: %w", err)
	}
	seed, _ := u.Seed()
	creds, err = jwt.FormatUserConfig(tok, seed)
	return creds, pub(u), err
}

// StreamConsumers creates and deletes the consumers of stream credentials
// on AUDITRAIL_EVENTS, with the controlplane role's connection.
type StreamConsumers struct{ JS jetstream.JetStream }

// Create creates (or finds, with the same configuration) the consumer of
// credential id of org.
func (c StreamConsumers) Create(ctx context.Context, org, id, name string) error {
	if _, err := c.JS.CreateOrUpdateConsumer(ctx, schemas.StreamEvents, StreamConsumerConfig(org, id, name)); err != nil {
		return fmt.Errorf("create consumer %s: %w", StreamConsumer(id), err)
	}
	return nil
}

// Delete deletes the consumer of credential id; a consumer that does not
// exist is no error.
func (c StreamConsumers) Delete(ctx context.Context, id string) error {
	err := c.JS.DeleteConsumer(ctx, schemas.StreamEvents, StreamConsumer(id))
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("delete consumer %s: %w", StreamConsumer(id), err)
	}
	return nil
}

// Exists reports whether the consumer of credential id exists.
func (c StreamConsumers) Exists(ctx context.Context, id string) (bool, error) {
	_, err := c.JS.Consumer(ctx, schemas.StreamEvents, StreamConsumer(id))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	return err == nil, err
}

// streamConsumerAdmin are the subjects with which the controlplane role
// creates (filtered inside an organization's subjects), reads and deletes
// the consumers of stream credentials; ingest's durables stay denied
// (liveStreamDeny).
func streamConsumerAdmin() []string {
	ev := jsAPI + "CONSUMER."
	s := schemas.StreamEvents
	return []string{
		ev + "CREATE." + s + ".*." + schemas.EventSubject("*", ">"),
		ev + "INFO." + s + ".*",
		ev + "DELETE." + s + ".*",
	}
}

// StreamIssuer is what the control plane needs to issue and revoke stream
// credentials: the signer and the controlplane role's consumers.
type StreamIssuer struct {
	Signer    *StreamSigner
	Consumers StreamConsumers
}

// Issue signs a credential (StreamSigner.Issue).
func (i StreamIssuer) Issue(org, id string, expires time.Time) ([]byte, string, error) {
	return i.Signer.Issue(org, id, expires)
}

// CreateConsumer creates the credential's consumer.
func (i StreamIssuer) CreateConsumer(ctx context.Context, org, id, name string) error {
	return i.Consumers.Create(ctx, org, id, name)
}

// DeleteConsumer deletes the credential's consumer.
func (i StreamIssuer) DeleteConsumer(ctx context.Context, id string) error {
	return i.Consumers.Delete(ctx, id)
}
