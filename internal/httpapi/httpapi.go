// Package httpapi is what every HTTP role shares: the Fiber app with the
// envelope for every answer (errors included: an unknown route is 404, a
// known route with another method 405 with Allow), bearer authentication
// and the shared rate limit. The audit read service (query),
// the admin API (controlplane) and the tool runner API (toolrunner) all build
// on it; none of them imports another.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/auth"
	"github.com/auditrail/auditrail/internal/httpx"
)

// Envelope is the body of every /api/v1 response.
type Envelope struct {
	Code int    `json:"code"`
	Msg  string `json:"msg"`
	Data any    `json:"data,omitempty"`
}

// ListData is data of a list response.
type ListData struct {
	Items      any    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
	HasMore    bool   `json:"has_more"`
}

// HeaderEventID carries the id of the event a request recorded (an admin
// change's audit event, a tool execution's execution event).
const HeaderEventID = "Auditrail-Event-Id"

// DefaultBodyLimit is the largest request body any route takes (413 above).
const DefaultBodyLimit = 1 << 20

// Config configures the app.
type Config struct {
	// BodyLimit bounds request bodies (bytes); larger ones get 413.
	BodyLimit int
	// ReadTimeout, WriteTimeout and IdleTimeout bound a connection.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// DefaultConfig is a 1 MiB body limit and 30 s read and write timeouts.
func DefaultConfig() Config {
	return Config{BodyLimit: DefaultBodyLimit, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	if c.BodyLimit <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0 {
		return fmt.Errorf("httpapi: body limit and timeouts must be positive: %+v", c)
	}
	return nil
}

// NewApp returns a Fiber app with the default configuration whose errors,
// including unknown routes and oversized bodies, are answered with the
// envelope.
func NewApp(log *slog.Logger) *fiber.App {
	app, err := New(DefaultConfig(), log)
	if err != nil {
		panic(err) // the default configuration is valid
	}
	return app
}

// New returns a Fiber app configured by cfg.
func New(cfg Config, log *slog.Logger) (*fiber.App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	return fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			code := fiber.StatusInternalServerError
			msg := "internal error"
			fe, ok := errors.AsType[*fiber.Error](err)
			if se, isStatus := errors.AsType[*httpx.StatusError](err); isStatus && !ok {
				fe, ok = fiber.NewError(se.Code, se.Msg), true
			}
			switch {
			case ok:
				code, msg = fe.Code, fe.Message
				switch code {
				case fiber.StatusRequestEntityTooLarge:
					msg = fmt.Sprintf("request body larger than %d bytes", cfg.BodyLimit)
				case fiber.StatusNotFound:
					if rest, ok := strings.CutPrefix(msg, "Cannot "); ok { // Fiber's own: no route matched
						msg = "no route " + rest
					}
				case fiber.StatusMethodNotAllowed: // Fiber's own, with the Allow header set
					msg = fmt.Sprintf("method %s not allowed on %s; allowed: %s", c.Method(), c.Path(), string(c.Response().Header.Peek(fiber.HeaderAllow)))
				case fiber.StatusUnauthorized: // RFC 6750 3: say which scheme
					challenge := `Bearer realm="auditrail"`
					if msg == msgInvalidCredentials {
						challenge += `, error="invalid_token"`
					}
					c.Set(fiber.HeaderWWWAuthenticate, challenge)
				}
			default:
				log.Error("request failed", "method", c.Method(), "path", c.Path(), "err", err)
			}
			return c.Status(code).JSON(Envelope{Code: code, Msg: msg})
		},
	}), nil
}

// Reply answers status with data in the envelope.
func Reply(c *fiber.Ctx, status int, data any) error {
	msg := "OK"
	if status == fiber.StatusCreated {
		msg = "created"
	}
	return c.Status(status).JSON(Envelope{Code: status, Msg: msg, Data: data})
}

// msgInvalidCredentials answers credentials that do not authenticate.
const msgInvalidCredentials = "invalid credentials"

// Authenticator resolves bearer credentials.
type Authenticator interface {
	// Authenticate resolves a credential, or returns an error wrapping
	// auth.ErrUnauthenticated.
	Authenticate(ctx context.Context, credential string) (auth.Principal, error)
}

// BearerToken returns the credential of an Authorization header (the scheme
// is case-insensitive), or false.
func BearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Authenticate resolves the bearer credential of a request: 401 when it is
// missing or invalid.
func Authenticate(c *fiber.Ctx, a Authenticator) (auth.Principal, error) {
	token, ok := BearerToken(c.Get(fiber.HeaderAuthorization))
	if !ok {
		return auth.Principal{}, fiber.NewError(fiber.StatusUnauthorized, "missing bearer credentials (Authorization: Bearer <API key or token>)")
	}
	p, err := a.Authenticate(c.UserContext(), token)
	if err != nil {
		if errors.Is(err, auth.ErrUnauthenticated) {
			return auth.Principal{}, fiber.NewError(fiber.StatusUnauthorized, msgInvalidCredentials)
		}
		return auth.Principal{}, err
	}
	return p, nil
}

// With returns the handlers of a route: the middleware mw, then h.
func With(mw []fiber.Handler, h fiber.Handler) []fiber.Handler {
	return append(append(make([]fiber.Handler, 0, len(mw)+1), mw...), h)
}

// ErrBadParam marks input errors; their message names the parameter.
var ErrBadParam = errors.New("bad parameter")

// CheckParams refuses what would silently widen a compliance export: a
// query parameter the route does not take (limt=2), a repeated one
// (limit=1&limit=2) and an empty one (limit=). visit calls its argument
// with every key and value of the query string, in order (fasthttp's
// Args.VisitAll).
func CheckParams(visit func(func(key, value []byte)), allowed []string) error {
	var err error
	seen := map[string]bool{}
	visit(func(k, v []byte) {
		if err != nil {
			return
		}
		key := string(k)
		switch {
		case !slices.Contains(allowed, key):
			err = fmt.Errorf("%w: %s: unknown parameter (this route takes %s)", ErrBadParam, key, strings.Join(allowed, ", "))
		case seen[key]:
			err = fmt.Errorf("%w: %s: given more than once", ErrBadParam, key)
		case len(v) == 0:
			err = fmt.Errorf("%w: %s: empty; leave it out instead", ErrBadParam, key)
		}
		seen[key] = true
	})
	return err
}
