package checkpointer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/internal/tlog"
)

// The signing keys live in the tlog bucket (the sequencer's):
//
//	key.<key_id>  keyRecord: the public fields and the sealed private key
//	key-current   currentRecord: the key_id of the current key
//
// A key becomes current only by a compare-and-set of key-current (Create
// when there is none, Update at the revision read when rotating), so two
// leaders never make two current keys: the loser deletes the key record it
// wrote first. A key record that is neither current nor retired (a
// loser's, or a crash between the two writes) is not listed and is
// removed by the next leader.
const (
	keyPrefix  = "key."
	currentKey = "key-current"
)

type keyRecord struct {
	tlog.PublicKey
	// Sealed is the private key (tlog.PrivateKey.Marshal) sealed with the
	// control plane's secrets keys, its KV key as associated data.
	Sealed []byte `json:"sealed"`
}

// MarshalJSON keeps PublicKey's time format and adds the sealed key.
func (r keyRecord) MarshalJSON() ([]byte, error) {
	pub, err := json.Marshal(r.PublicKey)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(pub, &m); err != nil {
		return nil, err
	}
	m["sealed"], _ = json.Marshal(base64.StdEncoding.EncodeToString(r.Sealed))
	return json.Marshal(m)
}

type currentRecord struct {
	KeyID string `json:"key_id"`
}

// Sealer seals the private keys at rest (cpstate.Sealer).
type Sealer interface {
	Seal(kvKey string, plaintext []byte) ([]byte, error)
	Open(kvKey string, sealed []byte) ([]byte, error)
}

// KeyringConfig configures a Keyring.
type KeyringConfig struct {
	// Name is the signer name of the keys (the note's signature lines).
	Name string
	// KeyLifetime is how long a key is current before the leader rotates.
	KeyLifetime time.Duration
}

// DefaultKeyringConfig returns the defaults.
func DefaultKeyringConfig() KeyringConfig {
	return KeyringConfig{Name: "auditrail", KeyLifetime: 30 * 24 * time.Hour}
}

// Validate checks the configuration.
func (c KeyringConfig) Validate() error {
	if _, _, err := tlog.GenerateKey(c.Name, time.Now()); err != nil {
		return fmt.Errorf("%w: key name: %w", ErrInvalidConfig, err)
	}
	if c.KeyLifetime < time.Minute {
		return fmt.Errorf("%w: key lifetime %s under 1m", ErrInvalidConfig, c.KeyLifetime)
	}
	return nil
}

// Keyring reads the signing keys from the bucket on use. Without a sealer
// it only lists the public keys (the query role); with one, the leader
// also makes, rotates and opens them.
type Keyring struct {
	kv     jetstream.KeyValue
	sealer Sealer
	cfg    KeyringConfig
	log    *slog.Logger
	now    func() time.Time

	mu     sync.Mutex
	opened map[string]tlog.PrivateKey // by key_id
}

// NewKeyring returns a keyring over kv (the tlog bucket). sealer may be
// nil: PublicKeys only.
func NewKeyring(kv jetstream.KeyValue, sealer Sealer, cfg KeyringConfig, log *slog.Logger) (*Keyring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keyring{kv: kv, sealer: sealer, cfg: cfg, log: log, now: time.Now, opened: map[string]tlog.PrivateKey{}}, nil
}

// ErrNoSealer: the keyring was made without a sealer.
var ErrNoSealer = errors.New("keyring has no sealer")

// PublicKeys lists the keys that are or were current, oldest first, as
// GET /api/v1/audit_keys answers them.
func (k *Keyring) PublicKeys(ctx context.Context) ([]tlog.PublicKey, error) {
	recs, cur, _, err := k.read(ctx)
	if err != nil {
		return nil, err
	}
	out := []tlog.PublicKey{}
	for _, r := range recs {
		if r.KeyID == cur || r.NotAfter != nil {
			out = append(out, r.PublicKey)
		}
	}
	return out, nil
}

// read returns every key record (by not_before), the current key_id ("":
// none) and key-current's revision (0: absent).
func (k *Keyring) read(ctx context.Context) ([]keyRecord, string, uint64, error) {
	var (
		cur string
		rev uint64
	)
	e, err := k.kv.Get(ctx, currentKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, "", 0, fmt.Errorf("keyring: read %s: %w", currentKey, err)
	default:
		var c currentRecord
		if err := json.Unmarshal(e.Value(), &c); err != nil {
			return nil, "", 0, fmt.Errorf("keyring: %s: %w", currentKey, err)
		}
		cur, rev = c.KeyID, e.Revision()
	}
	lister, err := k.kv.ListKeysFiltered(ctx, keyPrefix+"*")
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, "", 0, fmt.Errorf("keyring: list: %w", err)
	}
	var recs []keyRecord
	if lister != nil {
		var names []string
		for name := range lister.Keys() {
			names = append(names, name)
		}
		_ = lister.Stop()
		for _, name := range names {
			e, err := k.kv.Get(ctx, name)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				continue // removed since the listing
			}
			if err != nil {
				return nil, "", 0, fmt.Errorf("keyring: read %s: %w", name, err)
			}
			r, err := decodeKey(name, e.Value())
			if err != nil {
				return nil, "", 0, err
			}
			recs = append(recs, r)
		}
	}
	slices.SortFunc(recs, func(a, b keyRecord) int { return a.NotBefore.Compare(b.NotBefore) })
	return recs, cur, rev, nil
}

func decodeKey(name string, b []byte) (keyRecord, error) {
	var w struct {
		KeyID     string     `json:"key_id"`
		Algorithm string     `json:"algorithm"`
		PublicKey string     `json:"public_key"`
		Name      string     `json:"name"`
		NotBefore time.Time  `json:"not_before"`
		NotAfter  *time.Time `json:"not_after"`
		Sealed    string     `json:"sealed"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return keyRecord{}, fmt.Errorf("keyring: %s: %w", name, err)
	}
	sealed, err := base64.StdEncoding.DecodeString(w.Sealed)
	if err != nil {
		return keyRecord{}, fmt.Errorf("keyring: %s: sealed key: %w", name, err)
	}
	r := keyRecord{PublicKey: tlog.PublicKey{KeyID: w.KeyID, Algorithm: w.Algorithm, PublicKey: w.PublicKey, Name: w.Name,
		NotBefore: w.NotBefore.UTC(), NotAfter: w.NotAfter}, Sealed: sealed}
	if r.NotAfter != nil {
		t := r.NotAfter.UTC()
		r.NotAfter = &t
	}
	if name != keyPrefix+r.KeyID {
		return keyRecord{}, fmt.Errorf("keyring: %s holds key %q", name, r.KeyID)
	}
	if _, err := r.Verifier(); err != nil {
		return keyRecord{}, fmt.Errorf("keyring: %s: %w", name, err)
	}
	return r, nil
}

// Current returns the key that signs a checkpoint made now, and the time
// to put in it (never before the key's not_before). For the leader only:
// it makes the first key when none is current, rotates one older than
// KeyLifetime, and tidies records that a crash or a lost race left.
func (k *Keyring) Current(ctx context.Context) (tlog.PrivateKey, tlog.PublicKey, time.Time, error) {
	if k.sealer == nil {
		return tlog.PrivateKey{}, tlog.PublicKey{}, time.Time{}, ErrNoSealer
	}
	for attempt := 0; attempt < 5; attempt++ {
		recs, cur, rev, err := k.read(ctx)
		if err != nil {
			return tlog.PrivateKey{}, tlog.PublicKey{}, time.Time{}, err
		}
		now := k.now().UTC().Truncate(time.Millisecond)
		var current *keyRecord
		for i := range recs {
			if recs[i].KeyID == cur {
				current = &recs[i]
			}
		}
		if current == nil && cur != "" {
			// The current key was made after the records were listed (a
			// leader rotated meanwhile): read again rather than rotate
			// over it, which would leave the key it signed with unlisted.
			continue
		}
		if current != nil {
			k.tidy(ctx, recs, *current)
		}
		if current != nil && now.Before(current.NotBefore.Add(k.cfg.KeyLifetime)) {
			priv, err := k.open(*current)
			if err != nil {
				return tlog.PrivateKey{}, tlog.PublicKey{}, time.Time{}, err
			}
			if now.Before(current.NotBefore) {
				now = current.NotBefore
			}
			return priv, current.PublicKey, now, nil
		}
		// None current (or its record is gone), or it is due: make the next.
		if current != nil && !now.After(current.NotBefore) {
			now = current.NotBefore.Add(time.Millisecond)
		}
		if err := k.rotate(ctx, current, rev, now); err != nil {
			return tlog.PrivateKey{}, tlog.PublicKey{}, time.Time{}, err
		}
	}
	return tlog.PrivateKey{}, tlog.PublicKey{}, time.Time{}, errors.New("keyring: the current key keeps changing")
}

// rotate makes a key valid from nb and makes it current in place of old
// (nil: none) by a compare-and-set of key-current at rev; then retires old.
// Losing the race is not an error: the caller reads again.
func (k *Keyring) rotate(ctx context.Context, old *keyRecord, rev uint64, nb time.Time) error {
	priv, pub, err := tlog.GenerateKey(k.cfg.Name, nb)
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	name := keyPrefix + pub.KeyID
	sealed, err := k.sealer.Seal(name, priv.Marshal())
	if err != nil {
		return fmt.Errorf("keyring: seal: %w", err)
	}
	b, err := json.Marshal(keyRecord{PublicKey: pub, Sealed: sealed})
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	if _, err := k.kv.Create(ctx, name, b); err != nil {
		return fmt.Errorf("keyring: write %s: %w", name, err)
	}
	cb, _ := json.Marshal(currentRecord{KeyID: pub.KeyID})
	if rev == 0 {
		_, err = k.kv.Create(ctx, currentKey, cb)
	} else {
		_, err = k.kv.Update(ctx, currentKey, cb, rev)
	}
	if err != nil {
		// Lost to another leader (or failed): this key never was current.
		if derr := k.kv.Purge(ctx, name); derr != nil {
			k.log.Warn("keyring: remove a key that did not become current", "key_id", pub.KeyID, "err", derr)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongSequence(err) {
			return nil
		}
		return fmt.Errorf("keyring: make %s current: %w", pub.KeyID, err)
	}
	k.mu.Lock()
	k.opened[pub.KeyID] = priv
	k.mu.Unlock()
	k.log.Info("keyring: new signing key", "key_id", pub.KeyID, "name", pub.Name, "not_before", pub.NotBefore)
	if old != nil {
		return k.retire(ctx, *old, nb)
	}
	return nil
}

func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		strings.Contains(err.Error(), "wrong last sequence")
}

// retire sets a former key's not_after.
// Another instance may retire it at the same time (its tidy, after
// reading the new current key): a record found retired already is done.
func (k *Keyring) retire(ctx context.Context, r keyRecord, at time.Time) error {
	name := keyPrefix + r.KeyID
	for attempt := 0; ; attempt++ {
		e, err := k.kv.Get(ctx, name)
		if err != nil {
			return fmt.Errorf("keyring: retire %s: %w", r.KeyID, err)
		}
		var cur keyRecord
		if json.Unmarshal(e.Value(), &cur) == nil && cur.NotAfter != nil {
			return nil // retired by another instance
		}
		r.PublicKey = r.Retire(at)
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("keyring: %w", err)
		}
		_, err = k.kv.Update(ctx, name, b, e.Revision())
		if err == nil {
			return nil
		}
		if !isWrongSequence(err) || attempt >= 2 {
			return fmt.Errorf("keyring: retire %s: %w", r.KeyID, err)
		}
	}
}

// tidy repairs what a crash or a lost race left: a former key without
// not_after (a crash between making its successor current and retiring
// it) gets its successor's not_before; a record newer than the current
// key and never current (a loser that crashed before removing it) goes.
func (k *Keyring) tidy(ctx context.Context, recs []keyRecord, current keyRecord) {
	for i, r := range recs {
		if r.KeyID == current.KeyID || r.NotAfter != nil {
			continue
		}
		if r.NotBefore.Before(current.NotBefore) {
			next := current.NotBefore
			for _, s := range recs[i+1:] {
				if s.NotAfter != nil || s.KeyID == current.KeyID {
					next = s.NotBefore
					break
				}
			}
			if err := k.retire(ctx, r, next); err != nil {
				k.log.Warn("keyring: retire a former key", "key_id", r.KeyID, "err", err)
			}
			continue
		}
		// A record newer than the current key: a loser's that crashed
		// before removing it, or another leader's rotation in flight
		// (its record is written before it becomes current). Only one
		// older than orphanGrace is removed: removing one in flight would
		// leave the key it then signs with unlisted.
		if k.now().Sub(r.NotBefore) < orphanGrace {
			continue
		}
		if err := k.kv.Purge(ctx, keyPrefix+r.KeyID); err != nil {
			k.log.Warn("keyring: remove a key that never was current", "key_id", r.KeyID, "err", err)
		}
	}
}

// orphanGrace is how old a key record that is not current, and newer than
// the current key, must be before tidy removes it.
const orphanGrace = time.Minute

// open unseals a key record's private key (once per key).
func (k *Keyring) open(r keyRecord) (tlog.PrivateKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.opened[r.KeyID]; ok {
		return p, nil
	}
	raw, err := k.sealer.Open(keyPrefix+r.KeyID, r.Sealed)
	if err != nil {
		return tlog.PrivateKey{}, fmt.Errorf("keyring: open key %s: %w", r.KeyID, err)
	}
	p, err := tlog.ParsePrivateKey(raw)
	clear(raw)
	if err != nil {
		return tlog.PrivateKey{}, fmt.Errorf("keyring: key %s: %w", r.KeyID, err)
	}
	if p.KeyID() != r.KeyID || p.Name() != r.Name {
		return tlog.PrivateKey{}, fmt.Errorf("keyring: key %s: sealed key does not match its public key", r.KeyID)
	}
	k.opened[r.KeyID] = p
	return p, nil
}
