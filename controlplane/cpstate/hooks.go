package cpstate

import (
	"crypto/tls"
	"crypto/x509"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
)

// HookConfig is a customer webhook server and how to call it (CONTRACT.md).
type HookConfig struct {
	Name     string                `json:"name"`
	Endpoint string                `json:"endpoint"`
	Points   map[string]*HookPoint `json:"points"`
	// Contract is the shape of the requests: ContractAuditrail (default,
	// seeds/001) or ContractArcade (Arcade's logic-extensions schema).
	Contract  string      `json:"contract"`
	Auth      HookAuth    `json:"auth"`
	TimeoutMS int         `json:"timeout_ms"`
	Retries   HookRetries `json:"retries"`
	Breaker   HookBreaker `json:"breaker"`
	Phase     string      `json:"phase"`
	Priority  int         `json:"priority"`
	Enabled   *bool       `json:"enabled"`
}

// HookPoint configures one of access, pre and post.
type HookPoint struct {
	Path        string `json:"path"`
	TimeoutMS   int    `json:"timeout_ms"`
	FailureMode string `json:"failure_mode"`
}

// HookAuth is bearer ({type, token}) or mtls ({type, client_cert_pem,
// client_key_pem, ca_cert_pem}, optionally with a bearer token too: both
// are sent). Token and client key are secrets.
type HookAuth struct {
	Type          string `json:"type"`
	Token         string `json:"token,omitempty"`
	ClientCertPEM string `json:"client_cert_pem,omitempty"`
	ClientKeyPEM  string `json:"client_key_pem,omitempty"`
	CACertPEM     string `json:"ca_cert_pem,omitempty"`
}

// HookRetries: attempts in all (1 = no retry, at most MaxHookAttempts) and
// the first back-off, doubled per retry up to MaxHookBackoffMS with ±20 %
// jitter. Absent fields take their defaults; an explicit 0 is refused.
type HookRetries struct {
	MaxAttempts *int `json:"max_attempts,omitempty"`
	BackoffMS   *int `json:"backoff_ms,omitempty"`
}

// Bounds of a hook's retries (hookproxy.MaxAttempts, hookproxy.MaxBackoff):
// a call of one point holds an execution for at most 5 attempts of at most
// 60 s each and 4 waits of at most 5 s.
const (
	MaxHookAttempts  = 5
	MaxHookBackoffMS = 5000
)

// Attempts returns max_attempts (1 before Normalize).
func (r HookRetries) Attempts() int {
	if r.MaxAttempts == nil {
		return 1
	}
	return *r.MaxAttempts
}

// Backoff returns backoff_ms (100 before Normalize).
func (r HookRetries) Backoff() int {
	if r.BackoffMS == nil {
		return 100
	}
	return *r.BackoffMS
}

// HookBreaker opens after ConsecutiveFailures and half-opens after OpenMS.
type HookBreaker struct {
	ConsecutiveFailures int `json:"consecutive_failures"`
	OpenMS              int `json:"open_ms"`
}

// Hook points and failure modes.
const (
	PointAccess = "access"
	PointPre    = "pre"
	PointPost   = "post"

	FailOpen   = "fail_open"
	FailClosed = "fail_closed"

	ContractAuditrail = "auditrail"
	ContractArcade    = "arcade"
)

var defaultPaths = map[string]string{PointAccess: "/access", PointPre: "/pre", PointPost: "/post"}

// Normalize fills the defaults of CONTRACT.md and validates. Errors wrap
// ErrInvalid and name the field.
func (c *HookConfig) Normalize() error {
	c.Name = strings.TrimSpace(c.Name)
	if c.Name == "" || len(c.Name) > 200 {
		return Invalid("name", "required, at most 200 characters")
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return Invalid("endpoint", "%q is not an http(s) URL", c.Endpoint)
	}
	if c.TimeoutMS == 0 {
		c.TimeoutMS = 5000
	}
	if c.TimeoutMS < 1 || c.TimeoutMS > 60_000 {
		return Invalid("timeout_ms", "%d not in 1..60000", c.TimeoutMS)
	}
	if c.Contract == "" {
		c.Contract = ContractAuditrail
	}
	if c.Contract != ContractAuditrail && c.Contract != ContractArcade {
		return Invalid("contract", "%q is not auditrail or arcade", c.Contract)
	}
	if len(c.Points) == 0 {
		return Invalid("points", "name at least one of access, pre, post")
	}
	for name, p := range c.Points {
		def, ok := defaultPaths[name]
		if !ok {
			return Invalid("points", "unknown point %q; use access, pre, post", name)
		}
		if p == nil {
			p = &HookPoint{}
			c.Points[name] = p
		}
		if p.Path == "" {
			p.Path = def
		}
		if !strings.HasPrefix(p.Path, "/") {
			return Invalid("points."+name+".path", "%q must start with /", p.Path)
		}
		if p.TimeoutMS == 0 {
			p.TimeoutMS = c.TimeoutMS
		}
		if p.TimeoutMS < 1 || p.TimeoutMS > 60_000 {
			return Invalid("points."+name+".timeout_ms", "%d not in 1..60000", p.TimeoutMS)
		}
		if p.FailureMode == "" {
			p.FailureMode = FailClosed
		}
		if p.FailureMode != FailOpen && p.FailureMode != FailClosed {
			return Invalid("points."+name+".failure_mode", "%q is not fail_open or fail_closed", p.FailureMode)
		}
	}
	if c.Auth.Token == Redacted {
		return Invalid("auth.token", "%s is the placeholder of a stored token, not a token", Redacted)
	}
	switch c.Auth.Type {
	case "bearer":
		if c.Auth.Token == "" {
			return Invalid("auth.token", "required for bearer auth")
		}
		c.Auth.ClientCertPEM, c.Auth.ClientKeyPEM, c.Auth.CACertPEM = "", "", ""
	case "mtls":
		if u.Scheme != "https" {
			return Invalid("endpoint", "mtls needs an https endpoint")
		}
		if _, err := tls.X509KeyPair([]byte(c.Auth.ClientCertPEM), []byte(c.Auth.ClientKeyPEM)); err != nil {
			return Invalid("auth.client_cert_pem", "client certificate and key do not form a pair: %v", err)
		}
		if c.Auth.CACertPEM != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(c.Auth.CACertPEM)) {
			return Invalid("auth.ca_cert_pem", "no certificate found")
		}
		// An optional bearer token is kept: servers written to Arcade's
		// schema want the bearer header on every call, mTLS or not.
	default:
		return Invalid("auth.type", "%q is not bearer or mtls", c.Auth.Type)
	}
	attempts, backoff := c.Retries.Attempts(), c.Retries.Backoff()
	if attempts < 1 || attempts > MaxHookAttempts {
		return Invalid("retries.max_attempts", "%d not in 1..%d", attempts, MaxHookAttempts)
	}
	if backoff < 1 || backoff > MaxHookBackoffMS {
		return Invalid("retries.backoff_ms", "%d not in 1..%d", backoff, MaxHookBackoffMS)
	}
	c.Retries = HookRetries{MaxAttempts: &attempts, BackoffMS: &backoff}
	if c.Breaker.ConsecutiveFailures == 0 {
		c.Breaker.ConsecutiveFailures = 5
	}
	if c.Breaker.ConsecutiveFailures < 1 || c.Breaker.ConsecutiveFailures > 1000 {
		return Invalid("breaker.consecutive_failures", "%d not in 1..1000", c.Breaker.ConsecutiveFailures)
	}
	if c.Breaker.OpenMS == 0 {
		c.Breaker.OpenMS = 30_000
	}
	if c.Breaker.OpenMS < 100 || c.Breaker.OpenMS > 3_600_000 {
		return Invalid("breaker.open_ms", "%d not in 100..3600000", c.Breaker.OpenMS)
	}
	if c.Phase == "" {
		c.Phase = "before"
	}
	if c.Phase != "before" && c.Phase != "after" {
		return Invalid("phase", "%q is not before or after", c.Phase)
	}
	if c.Enabled == nil {
		t := true
		c.Enabled = &t
	}
	return nil
}

// Hook is a stored hook configuration. The secret parts of Config.Auth
// (token, client key) are sealed in SealedAuth and blank in Config.
type Hook struct {
	ID         uuid.UUID  `json:"id"`
	OrgID      uuid.UUID  `json:"organization_id"`
	ProjectID  *uuid.UUID `json:"project_id"`
	Config     HookConfig `json:"config"`
	SealedAuth []byte     `json:"sealed_auth,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// Redacted is the configuration as shown to people and audit events:
// secrets replaced by "[REDACTED]".
func (c HookConfig) Redacted() HookConfig {
	if c.Contract == "" {
		c.Contract = ContractAuditrail // stored before the setting existed
	}
	if c.Auth.Token != "" || c.Auth.Type == "bearer" {
		c.Auth.Token = Redacted
	}
	if c.Auth.ClientKeyPEM != "" || c.Auth.Type == "mtls" {
		c.Auth.ClientKeyPEM = Redacted
	}
	pts := make(map[string]*HookPoint, len(c.Points))
	for k, v := range c.Points {
		p := *v
		pts[k] = &p
	}
	c.Points = pts
	return c
}

// Redacted replaces secret values wherever they would be shown.
const Redacted = "[REDACTED]"
