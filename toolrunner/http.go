package toolrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
	"github.com/auditrail/auditrail/internal/httpx"
)

// Access authenticates callers and authorizes the use of a project's tools.
type Access interface {
	Authenticate(ctx context.Context, credential string) (auth.Principal, error)
	// AuthorizeTools returns nil when p may list and run the project's
	// tools, or an error wrapping auth.ErrForbidden.
	AuthorizeTools(ctx context.Context, p auth.Principal, org, project uuid.UUID) error
	// DisplayName is how p appears in the records of org.
	DisplayName(p auth.Principal, org uuid.UUID) string
}

// Server is the tool runner API (CONTRACT.md "Tool runner API").
type Server struct {
	runner  *Runner
	access  Access
	proxies httpx.TrustedProxies
}

// NewServer returns the API of runner; proxies are the peers whose
// X-Forwarded-For names the client recorded with each execution.
func NewServer(runner *Runner, access Access, proxies httpx.TrustedProxies) *Server {
	return &Server{runner: runner, access: access, proxies: proxies}
}

// Register mounts the routes behind the given middleware (the rate limit).
func (s *Server) Register(r fiber.Router, mw ...fiber.Handler) {
	r.Get("/api/v1/orgs/:org_id/projects/:project_id/tools", httpapi.With(mw, s.list)...)
	r.Post("/api/v1/orgs/:org_id/projects/:project_id/tools/execute", httpapi.With(mw, s.execute)...)
}

// DefinitionView is a definition as the API shows it.
type DefinitionView struct {
	FullyQualifiedName string `json:"fully_qualified_name"`
	Definition
}

// Scope authenticates the request of c and decides its scope exactly as
// the tool routes do (CONTRACT.md "Who acts"): the org and project of the
// path, the principal allowed to use the project's tools, and the user it
// acts for (userID: the one the caller names, "" for none). Errors are
// fiber errors with the status to answer (401, 403, 400).
func (s *Server) Scope(c *fiber.Ctx, userID string) (Scope, error) { return s.scope(c, userID) }

func (s *Server) scope(c *fiber.Ctx, userID string) (Scope, error) {
	// A scope outlives its request (an MCP session lists its tools for
	// it in the background): nothing of it may point into the request's
	// memory, which fasthttp reuses for the connection's next request.
	userID = strings.Clone(userID)
	p, err := httpapi.Authenticate(c, s.access)
	if err != nil {
		return Scope{}, err
	}
	org, err := uuid.Parse(c.Params("org_id"))
	if err != nil || len(c.Params("org_id")) != 36 {
		return Scope{}, fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("org_id: %q is not a UUID", c.Params("org_id")))
	}
	project, err := uuid.Parse(c.Params("project_id"))
	if err != nil || len(c.Params("project_id")) != 36 {
		return Scope{}, fiber.NewError(fiber.StatusBadRequest, fmt.Sprintf("project_id: %q is not a UUID", c.Params("project_id")))
	}
	if err := s.access.AuthorizeTools(c.UserContext(), p, org, project); err != nil {
		if errors.Is(err, auth.ErrForbidden) {
			return Scope{}, fiber.NewError(fiber.StatusForbidden, err.Error())
		}
		return Scope{}, err
	}
	userID, err = actsFor(p, userID)
	if err != nil {
		return Scope{}, err
	}
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	return Scope{Org: org, Project: project, UserID: userID, Actor: Actor{
		PrincipalID: p.ID, PrincipalType: p.Type, DisplayName: s.access.DisplayName(p, org),
		ClientIP: s.proxies.ClientIP(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor)).String(),
	}}, nil
}

// Recheck decides again, without a request, whether credential still
// holds the scope sc that Scope gave for it (a long-lived answer, such as
// an MCP session, must not outlive its credential): nil while credential
// still authenticates as sc's principal, may use sc's project and acts for
// sc's user. Once it does not, the error wraps auth.ErrUnauthenticated (a
// key deleted or disabled, a JWT past exp) or auth.ErrForbidden (a
// membership removed); any other error means that it cannot be decided now
// (the control-plane mirror is stale).
func (s *Server) Recheck(ctx context.Context, credential string, sc Scope) error {
	p, err := s.access.Authenticate(ctx, credential)
	if err != nil {
		return fmt.Errorf("tool scope: %w", err)
	}
	if p.ID != sc.Actor.PrincipalID || p.Type != sc.Actor.PrincipalType {
		return fmt.Errorf("%w: the credential is no longer principal %s %s", auth.ErrUnauthenticated, sc.Actor.PrincipalType, sc.Actor.PrincipalID)
	}
	if err := s.access.AuthorizeTools(ctx, p, sc.Org, sc.Project); err != nil {
		return fmt.Errorf("tool scope: %w", err)
	}
	if u, err := actsFor(p, sc.UserID); err != nil || u != sc.UserID {
		return fmt.Errorf("%w: the credential no longer acts for user %s", auth.ErrForbidden, sc.UserID)
	}
	return nil
}

// actsFor decides whom a call acts for (CONTRACT.md "Who acts"): a user's
// key or JWT acts as that user only, so another user_id is refused; a
// service key and the platform admin act for no user of their own and must
// name the end user.
func actsFor(p auth.Principal, userID string) (string, error) {
	if len(userID) > 256 {
		return "", fiber.NewError(fiber.StatusBadRequest, "user_id: at most 256 characters")
	}
	if p.UserID != "" {
		if userID != "" && userID != p.UserID {
			return "", fiber.NewError(fiber.StatusForbidden, fmt.Sprintf("user_id: this credential acts as user %s only; only a project service key may act for other users", p.UserID))
		}
		return p.UserID, nil
	}
	if userID == "" {
		return "", fiber.NewError(fiber.StatusBadRequest, "user_id: required: this credential acts as no user (a service key names the end user it acts for)")
	}
	return userID, nil
}

func (s *Server) list(c *fiber.Ctx) error {
	sc, err := s.scope(c, c.Query("user_id"))
	if err != nil {
		return err
	}
	if err := httpapi.CheckParams(c.Context().QueryArgs().VisitAll, []string{"user_id"}); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, strings.TrimPrefix(err.Error(), httpapi.ErrBadParam.Error()+": "))
	}
	defs, _, err := s.runner.Visible(c.UserContext(), sc)
	if err != nil {
		return err
	}
	items := make([]DefinitionView, len(defs))
	for i, d := range defs {
		items[i] = DefinitionView{FullyQualifiedName: d.FullyQualifiedName(), Definition: d}
	}
	return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: map[string]any{"items": items}})
}

func (s *Server) execute(c *fiber.Ctx) error {
	var body struct {
		ToolName string         `json:"tool_name"`
		Input    map[string]any `json:"input"`
		UserID   string         `json:"user_id"`
	}
	// Authenticate before reading the body: an anonymous caller gets 401.
	if _, err := httpapi.Authenticate(c, s.access); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(c.Body()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return fiber.NewError(fiber.StatusBadRequest, "body: "+err.Error())
	}
	if body.ToolName == "" {
		return fiber.NewError(fiber.StatusBadRequest, "tool_name: required")
	}
	if body.Input == nil {
		body.Input = map[string]any{}
	}
	sc, err := s.scope(c, body.UserID)
	if err != nil {
		return err
	}
	res, err := s.runner.Execute(c.UserContext(), sc, body.ToolName, body.Input)
	switch {
	case errors.Is(err, ErrUnknownTool):
		return fiber.NewError(fiber.StatusNotFound, "tool_name: "+err.Error())
	case errors.Is(err, ErrInvalidInput):
		return fiber.NewError(fiber.StatusBadRequest, "input."+trimKind(err.Error()))
	case err != nil:
		return err
	}
	if res.Recorded {
		c.Set(httpapi.HeaderEventID, res.ExecutionID)
	}
	return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: res})
}

func trimKind(s string) string {
	const p = "invalid input: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
