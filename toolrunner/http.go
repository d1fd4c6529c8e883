package toolrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpapi"
)

// Access authenticates callers and authorizes reads of a project.
type Access interface {
	Authenticate(ctx context.Context, credential string) (auth.Principal, error)
	AuthorizeRead(ctx context.Context, p auth.Principal, org uuid.UUID, project *uuid.UUID) error
}

// Server is the tool runner API (CONTRACT.md "Tool runner API").
type Server struct {
	runner *Runner
	access Access
}

// NewServer returns the API of runner.
func NewServer(runner *Runner, access Access) *Server { return &Server{runner: runner, access: access} }

// Register mounts the routes.
func (s *Server) Register(r fiber.Router) {
	r.Get("/api/v1/orgs/:org_id/projects/:project_id/tools", s.list)
	r.Post("/api/v1/orgs/:org_id/projects/:project_id/tools/execute", s.execute)
}

// DefinitionView is a definition as the API shows it.
type DefinitionView struct {
	FullyQualifiedName string `json:"fully_qualified_name"`
	Definition
}

func (s *Server) scope(c *fiber.Ctx, userID string) (Scope, error) {
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
	if err := s.access.AuthorizeRead(c.UserContext(), p, org, &project); err != nil {
		if errors.Is(err, auth.ErrForbidden) {
			return Scope{}, fiber.NewError(fiber.StatusForbidden, err.Error())
		}
		return Scope{}, err
	}
	if userID == "" {
		userID = p.UserID
	}
	if userID == "" || len(userID) > 256 {
		return Scope{}, fiber.NewError(fiber.StatusBadRequest, "user_id: required (1 to 256 characters) when the caller acts as no user")
	}
	return Scope{Org: org, Project: project, UserID: userID}, nil
}

func (s *Server) list(c *fiber.Ctx) error {
	sc, err := s.scope(c, c.Query("user_id"))
	if err != nil {
		return err
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
	return c.JSON(httpapi.Envelope{Code: fiber.StatusOK, Msg: "OK", Data: res})
}

func trimKind(s string) string {
	const p = "invalid input: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
