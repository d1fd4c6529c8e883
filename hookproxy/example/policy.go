// Package example is the reference webhook server of the contract 1.0
// (auditrail hooks-example): built on the types oapi-codegen generated from
// schemas/openapi/hooks.yaml, with policies from a YAML file. It reads the
// requests of hooks of either contract (auditrail or arcade), answers in
// the auditrail shapes, errors as ErrorResponse and GET /health as
// {"status":"healthy"}. Customers start their own server from it.
package example

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Policy is the YAML policy file.
type Policy struct {
	// DenyDestructive denies tools whose metadata.behavior.destructive is true.
	DenyDestructive bool `yaml:"deny_destructive"`
	// AllowedServiceDomains, when set, allows only tools of these domains.
	AllowedServiceDomains []string `yaml:"allowed_service_domains"`
	// DenyTools lists tools (Toolkit.Name) always denied.
	DenyTools []string `yaml:"deny_tools"`
	// RateLimits limit executions per user and operation.
	RateLimits []RateLimit `yaml:"rate_limits"`
	// ProviderRules deny tools by a key of metadata.extras.
	ProviderRules []ProviderRule `yaml:"provider_rules"`
	// RedactOutputKeys removes these keys from JSON outputs (post hook).
	RedactOutputKeys []string `yaml:"redact_output_keys"`
}

// RateLimit allows Max executions of tools performing Operation per user per Per.
type RateLimit struct {
	Operation string        `yaml:"operation"`
	Max       int           `yaml:"max"`
	Per       time.Duration `yaml:"per"`
}

// ProviderRule denies tools whose metadata.extras[Key] equals Equals.
type ProviderRule struct {
	Key     string `yaml:"key"`
	Equals  string `yaml:"equals"`
	Message string `yaml:"message"`
}

// ErrInvalidPolicy is returned for a policy file that cannot be used.
var ErrInvalidPolicy = errors.New("invalid policy")

// LoadPolicy reads and checks a policy file.
func LoadPolicy(path string) (Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Policy{}, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	return ParsePolicy(b)
}

// ParsePolicy parses and checks a policy; unknown keys are errors.
func ParsePolicy(b []byte) (Policy, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil && err.Error() != "EOF" {
		return Policy{}, fmt.Errorf("%w: %v", ErrInvalidPolicy, err)
	}
	for i, r := range p.RateLimits {
		if r.Operation == "" || r.Max < 1 || r.Per <= 0 {
			return Policy{}, fmt.Errorf("%w: rate_limits[%d]: operation, max >= 1 and per > 0 are required", ErrInvalidPolicy, i)
		}
	}
	for i, r := range p.ProviderRules {
		if r.Key == "" {
			return Policy{}, fmt.Errorf("%w: provider_rules[%d]: key is required", ErrInvalidPolicy, i)
		}
	}
	return p, nil
}
