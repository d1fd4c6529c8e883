// Package cptest starts the real control plane for the tests of the
// components that consume it (the query service, the MCP endpoint): its
// state mirrored from an embedded JetStream bucket, its Access (a
// bootstrap key, HS256 JWTs) and its admin Service, so that revoking a key
// or a membership is decided as in production.
package cptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/auditrail/auditrail/controlplane"
	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/producers"
)

// Boot is the platform admin's key of a test control plane.
const Boot = "bootstrap-key-of-a-test-control-plane"

// jwtKID is the key id of the JWTs the control plane accepts.
const jwtKID = "hs"

// ControlPlane is a running control plane.
type ControlPlane struct {
	State   *cpstate.State
	Access  *cpstate.Access
	Service *controlplane.Service
	jwtKey  []byte
}

// Start opens the control plane on js (its bucket named bucket; nc
// publishes its audit events) until the test ends.
func Start(t testing.TB, nc *nats.Conn, js jetstream.JetStream, bucket string) *ControlPlane {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	scfg := cpstate.DefaultStateConfig()
	scfg.Bucket = bucket
	state, err := cpstate.OpenState(ctx, js, scfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := &ControlPlane{State: state, jwtKey: []byte("0123456789abcdef0123456789abcdef")}
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{
		{"kty": "oct", "kid": jwtKID, "alg": "HS256", "k": base64.RawURLEncoding.EncodeToString(cp.jwtKey)}}})
	if err != nil {
		t.Fatal(err)
	}
	jcfg := auth.DefaultJWTConfig()
	jcfg.Leeway = 0 // a JWT past its exp is refused at once
	verifier, err := auth.ParseJWKS(jwks, jcfg)
	if err != nil {
		t.Fatal(err)
	}
	cp.Access = cpstate.NewAccess(state, auth.HashKey(Boot), verifier)
	sealer, err := cpstate.NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := producers.New(nc, producers.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cp.Service, err = controlplane.NewService(controlplane.DefaultServiceConfig(), state, cp.Access, sealer,
		producers.NewRecorder(pub, 5*time.Second), httpx.TrustedProxies{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// JWT is a JWT the control plane accepts, for user sub, expiring at exp.
func (cp *ControlPlane) JWT(t testing.TB, sub string, exp time.Time) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": exp.Unix()})
	tok.Header["kid"] = jwtKID
	s, err := tok.SignedString(cp.jwtKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
