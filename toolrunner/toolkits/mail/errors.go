package mail

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("mail toolkit: invalid config")

// upstreamError is a tool error whose cause only the operator log sees.
type upstreamError struct {
	te     *toolrunner.Error
	detail error
}

func (e *upstreamError) Error() string { return e.te.Error() }
func (e *upstreamError) Unwrap() error { return e.te }

// invalidAnswer is an upstream error about what Graph answered.
func invalidAnswer(msg string) *toolrunner.Error {
	return toolrunner.Errorf(toolrunner.KindUpstream, false, "%s", msg)
}

func invalid(format string, args ...any) *toolrunner.Error {
	return toolrunner.Errorf(toolrunner.KindInputInvalid, false, format, args...)
}

// apiError turns an error of a Graph call about what (e.g. `message
// "AAMk…"`) into a tool error: never a raw Graph answer, never a 5xx of
// the platform.
func apiError(err error, what string) error {
	if err == nil {
		return nil
	}
	if te, ok := errors.AsType[*toolrunner.Error](err); ok {
		return te
	}
	if ge, ok := errors.AsType[*graphapi.Error](err); ok {
		msg := strings.TrimSpace(ge.Message)
		code := ge.Code
		if code == "" {
			code = http.StatusText(ge.Status)
		}
		switch {
		case ge.Status == http.StatusNotFound || ge.Code == "ErrorItemNotFound":
			return toolrunner.Errorf(toolrunner.KindNotFound, false, "%s was not found in the user's mailbox (Graph %s: %s)", what, code, msg)
		case ge.Status == http.StatusUnauthorized || ge.Status == http.StatusForbidden:
			return toolrunner.Errorf(toolrunner.KindAuthorizationFailed, true,
				"Microsoft refused the user's authorization (%d %s: %s); reconnect the Microsoft account and retry", ge.Status, code, msg)
		case ge.Status == http.StatusTooManyRequests:
			return toolrunner.Errorf(toolrunner.KindUpstream, true, "Microsoft Graph is throttling the user's requests (%s); retry later", msg)
		case ge.Status >= 500:
			return toolrunner.Errorf(toolrunner.KindUpstream, true, "Microsoft Graph answered %d %s: %s", ge.Status, code, msg)
		case ge.Status >= 400:
			return toolrunner.Errorf(toolrunner.KindInputInvalid, false, "Microsoft Graph refused the request for %s (%s): %s", what, code, msg)
		}
		return toolrunner.Errorf(toolrunner.KindUpstream, false, "Microsoft Graph answered %d %s: %s", ge.Status, code, msg)
	}
	switch {
	case errors.Is(err, provhttp.ErrBodyTooLarge):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false,
			"Microsoft Graph's answer about %s is larger than this platform accepts", what), err}
	case errors.Is(err, graphapi.ErrInvalidAnswer):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false,
			"Microsoft Graph answered %s with values no mailbox has", what), err}
	case errors.Is(err, graphapi.ErrInvalidQuery):
		return invalid("%s", strings.TrimPrefix(err.Error(), graphapi.ErrInvalidQuery.Error()+": "))
	case errors.Is(err, graphapi.ErrForeignLink):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false,
			"Microsoft Graph answered a next-page link outside its API base; it was not followed"), err}
	case errors.Is(err, egress.ErrRefused):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false,
			"the Microsoft API base URL is not reachable from this platform (refused by the egress policy)"), err}
	case errors.Is(err, context.DeadlineExceeded):
		return toolrunner.Errorf(toolrunner.KindTimeout, true, "Microsoft Graph did not answer in time")
	case errors.Is(err, context.Canceled):
		return toolrunner.Errorf(toolrunner.KindTimeout, true, "the call was cancelled")
	}
	return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, true, "Microsoft Graph cannot be reached"), fmt.Errorf("%s: %w", what, err)}
}

// graphCode answers the Graph error code of err ("" when none).
func graphCode(err error) string {
	if ge, ok := errors.AsType[*graphapi.Error](err); ok {
		return ge.Code
	}
	return ""
}
