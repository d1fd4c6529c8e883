package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/controlplane/cpstate"
	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/oauthflow"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Auth providers: an organization's OAuth 2.0 clients (google, microsoft or
// any oauth2 server), under provider.<org>.<enc(id)>. Only the org's owners
// and admins see and change them; the client secret is sealed and shown as
// client_secret_set (and [REDACTED] in audit events).

var (
	providerID   = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	pickerAPIKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
)

// providerView is a provider as the API and audit events show it.
func providerView(p cpstate.AuthProvider) any {
	v := map[string]any{"id": p.ID, "organization_id": p.OrgID, "type": p.Type, "client_id": p.ClientID,
		"client_secret_set": len(p.SealedSecret) > 0, "authorize_url": p.AuthorizeURL, "token_url": p.TokenURL,
		"revoke_url": p.RevokeURL, "userinfo_url": p.UserinfoURL, "api_base_url": p.APIBaseURL,
		"scopes_default": nonNil(p.ScopesDefault), "picker_api_key": p.PickerAPIKey, "created_at": p.CreatedAt, "updated_at": p.UpdatedAt}
	if len(p.SealedSecret) > 0 {
		v["client_secret"] = cpstate.Redacted
	}
	return v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// providerBody is a create (every field) or a patch (the fields given).
type providerBody struct {
	ID            *string   `json:"id"`
	Type          *string   `json:"type"`
	ClientID      *string   `json:"client_id"`
	ClientSecret  *string   `json:"client_secret"`
	AuthorizeURL  *string   `json:"authorize_url"`
	TokenURL      *string   `json:"token_url"`
	RevokeURL     *string   `json:"revoke_url"`
	UserinfoURL   *string   `json:"userinfo_url"`
	APIBaseURL    *string   `json:"api_base_url"`
	ScopesDefault *[]string `json:"scopes_default"`
	PickerAPIKey  *string   `json:"picker_api_key"`
}

// apply sets the given fields of p (the secret is returned for sealing).
func (b providerBody) apply(p *cpstate.AuthProvider) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	set(&p.Type, b.Type)
	set(&p.ClientID, b.ClientID)
	set(&p.AuthorizeURL, b.AuthorizeURL)
	set(&p.TokenURL, b.TokenURL)
	set(&p.RevokeURL, b.RevokeURL)
	set(&p.UserinfoURL, b.UserinfoURL)
	set(&p.APIBaseURL, b.APIBaseURL)
	set(&p.PickerAPIKey, b.PickerAPIKey)
	if b.ScopesDefault != nil {
		p.ScopesDefault = slices.Clone(*b.ScopesDefault)
	}
}

// normalizeProvider validates p and fills the empty endpoints of google
// and microsoft with their real ones; an oauth2 provider names its own.
func normalizeProvider(p *cpstate.AuthProvider) error {
	if !providerID.MatchString(p.ID) {
		return cpstate.Invalid("id", "%q: a lowercase letter, then up to 62 of a-z 0-9 _ -", p.ID)
	}
	switch p.Type {
	case oauthflow.TypeGoogle, oauthflow.TypeMicrosoft:
		d := oauthflow.Defaults[p.Type]
		for _, f := range []struct {
			dst *string
			def string
		}{
			{&p.AuthorizeURL, d.AuthorizeURL}, {&p.TokenURL, d.TokenURL}, {&p.RevokeURL, d.RevokeURL},
			{&p.UserinfoURL, d.UserinfoURL}, {&p.APIBaseURL, d.APIBaseURL},
		} {
			if *f.dst == "" {
				*f.dst = f.def
			}
		}
		if p.ScopesDefault == nil {
			p.ScopesDefault = slices.Clone(d.ScopesDefault)
		}
	case oauthflow.TypeOAuth2:
		if p.AuthorizeURL == "" {
			return cpstate.Invalid("authorize_url", "required for type oauth2")
		}
		if p.TokenURL == "" {
			return cpstate.Invalid("token_url", "required for type oauth2")
		}
	default:
		return cpstate.Invalid("type", "%q is not one of google, microsoft, oauth2", p.Type)
	}
	if p.ClientID == "" || len(p.ClientID) > 1024 {
		return cpstate.Invalid("client_id", "required, at most 1024 characters")
	}
	for _, f := range []struct{ name, v string }{
		{"authorize_url", p.AuthorizeURL}, {"token_url", p.TokenURL}, {"revoke_url", p.RevokeURL},
		{"userinfo_url", p.UserinfoURL}, {"api_base_url", p.APIBaseURL},
	} {
		if f.v == "" {
			continue
		}
		u, err := url.Parse(f.v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(f.v) > 2048 {
			return cpstate.Invalid(f.name, "%q is not an absolute http(s) URL", f.v)
		}
		if u.User != nil || u.Fragment != "" {
			return cpstate.Invalid(f.name, "must not hold credentials or a fragment")
		}
	}
	if p.PickerAPIKey != "" && !pickerAPIKey.MatchString(p.PickerAPIKey) {
		return cpstate.Invalid("picker_api_key", "a Google browser API key: letters, digits, _ and -, at most 256")
	}
	if len(p.ScopesDefault) > 100 {
		return cpstate.Invalid("scopes_default", "at most 100 scopes")
	}
	for _, sc := range p.ScopesDefault {
		if err := validScope(sc); err != nil {
			return cpstate.Invalid("scopes_default", "%v", err)
		}
	}
	p.ScopesDefault = oauthflow.MergeScopes(p.ScopesDefault)
	return nil
}

// validScope refuses what cannot be one scope token (RFC 6749 3.3).
func validScope(sc string) error {
	if sc == "" || len(sc) > 512 || strings.ContainsFunc(sc, func(r rune) bool { return r <= ' ' || r == '"' || r == '\\' || r > '~' }) {
		return fmt.Errorf("%q is not a scope (printable ASCII, no space, quote or backslash)", sc)
	}
	return nil
}

// checkProviderURLs refuses (400 naming the field) a URL that the platform
// calls server-side — token, revoke, userinfo, API base — on an address the
// egress guard refuses. The authorize URL is only opened by the user's
// browser. Every connection is checked again when made.
func (s *Service) checkProviderURLs(ctx context.Context, p cpstate.AuthProvider) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	g := s.egressGuard()
	for _, f := range []struct{ name, v string }{
		{"token_url", p.TokenURL}, {"revoke_url", p.RevokeURL}, {"userinfo_url", p.UserinfoURL}, {"api_base_url", p.APIBaseURL},
	} {
		if f.v == "" {
			continue
		}
		if err := g.CheckURL(ctx, f.v); errors.Is(err, egress.ErrRefused) {
			return cpstate.Invalid(f.name, "%v: auth provider endpoints must be on public addresses", err)
		}
	}
	return nil
}

func (s *Service) sealProviderSecret(key string, p *cpstate.AuthProvider, secret string) error {
	if len(secret) > 4096 {
		return cpstate.Invalid("client_secret", "at most 4096 characters")
	}
	if secret == "" {
		p.SealedSecret = nil
		return nil
	}
	sealed, err := s.sealer.Seal(key, []byte(secret))
	if err != nil {
		return err
	}
	p.SealedSecret = sealed
	return nil
}

func providerMutation(org cpstate.Org, id string) producers.Mutation {
	return producers.Mutation{ResourceType: schemas.ResourceTypeAuthProvider, ResourceID: id, ResourceDisplay: id, OrgID: org.ID}
}

func (s *Service) listProviders(c *fiber.Ctx) error {
	_, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	return listItems(s, c, "provider."+org.ID.String()+".", providerView)
}

func (s *Service) createProvider(c *fiber.Ctx) error {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return err
	}
	var body providerBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if body.ID == nil {
		return httpError(cpstate.Invalid("id", "required"))
	}
	if body.Type == nil {
		return httpError(cpstate.Invalid("type", "required"))
	}
	now := s.now().UTC()
	p := cpstate.AuthProvider{ID: strings.TrimSpace(*body.ID), OrgID: org.ID, CreatedAt: now, UpdatedAt: now}
	body.apply(&p)
	if err := normalizeProvider(&p); err != nil {
		return httpError(err)
	}
	if err := s.checkProviderURLs(c.UserContext(), p); err != nil {
		return httpError(err)
	}
	key := cpstate.ProviderKey(org.ID.String(), p.ID)
	if body.ClientSecret != nil {
		if err := s.sealProviderSecret(key, &p, *body.ClientSecret); err != nil {
			return httpError(err)
		}
	}
	defer s.lock(key)()
	if _, err := s.state.Get(key, &cpstate.AuthProvider{}); err == nil {
		return httpError(fmt.Errorf("%w: auth provider %s exists (PATCH it)", cpstate.ErrConflict, p.ID))
	}
	mut := providerMutation(org, p.ID)
	mut.Action, mut.After = schemas.AuditActionCreated, providerView(p)
	if err := s.commitRecorded(cl, mut, cpstate.SetKey(key, p, 0)); err != nil {
		return httpError(err)
	}
	return httpapi.Reply(c, fiber.StatusCreated, providerView(p))
}

// providerTarget resolves the provider of a provider route.
func (s *Service) providerTarget(c *fiber.Ctx) (*call, cpstate.Org, string, producers.Mutation, error) {
	cl, org, _, err := s.scope(c, true, false)
	if err != nil {
		return nil, cpstate.Org{}, "", producers.Mutation{}, err
	}
	id, err := textParam(c, "provider_id")
	if err != nil {
		return nil, cpstate.Org{}, "", producers.Mutation{}, err
	}
	return cl, org, cpstate.ProviderKey(org.ID.String(), id), providerMutation(org, id), nil
}

func (s *Service) getProvider(c *fiber.Ctx) error {
	_, _, key, mut, err := s.providerTarget(c)
	if err != nil {
		return err
	}
	var p cpstate.AuthProvider
	if _, err := s.state.Get(key, &p); err != nil {
		return httpError(fmt.Errorf("%w: auth provider %s", cpstate.ErrNotFound, mut.ResourceID))
	}
	return httpapi.Reply(c, fiber.StatusOK, providerView(p))
}

// patchProvider changes the fields given; the secret only when given
// (an empty string removes it).
func (s *Service) patchProvider(c *fiber.Ctx) error {
	cl, _, key, mut, err := s.providerTarget(c)
	if err != nil {
		return err
	}
	var body providerBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if body.ID != nil && *body.ID != mut.ResourceID {
		return httpError(cpstate.Invalid("id", "cannot be changed (create another provider)"))
	}
	mut.Action = schemas.AuditActionUpdated
	return updateRecorded(s, cl, key, "auth provider "+mut.ResourceID, mut, providerView, func(p cpstate.AuthProvider) (cpstate.AuthProvider, bool, error) {
		next := p
		next.ScopesDefault = slices.Clone(p.ScopesDefault)
		if body.Type != nil && *body.Type != p.Type {
			// Another type: its endpoints are not the old type's defaults.
			for _, f := range []*string{&next.AuthorizeURL, &next.TokenURL, &next.RevokeURL, &next.UserinfoURL, &next.APIBaseURL} {
				*f = ""
			}
			next.ScopesDefault = nil
		}
		body.apply(&next)
		if err := normalizeProvider(&next); err != nil {
			return p, false, err
		}
		if err := s.checkProviderURLs(c.UserContext(), next); err != nil {
			return p, false, err
		}
		if body.ClientSecret != nil {
			if err := s.sealProviderSecret(key, &next, *body.ClientSecret); err != nil {
				return p, false, err
			}
		}
		if providerEqual(p, next) && body.ClientSecret == nil {
			return p, false, nil
		}
		next.UpdatedAt = s.now().UTC()
		return next, true, nil
	})
}

func providerEqual(a, b cpstate.AuthProvider) bool {
	ja, _ := json.Marshal(providerView(a))
	jb, _ := json.Marshal(providerView(b))
	return string(ja) == string(jb)
}

func (s *Service) deleteProvider(c *fiber.Ctx) error {
	cl, _, key, mut, err := s.providerTarget(c)
	if err != nil {
		return err
	}
	return deleteRecorded(s, cl, key, "auth provider "+mut.ResourceID, mut, providerView, nil)
}
