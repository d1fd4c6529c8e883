package docs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/api/googleapi"

	"github.com/auditrail/auditrail/internal/egress"
	"github.com/auditrail/auditrail/internal/provhttp"
	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/docs/docmd"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("docs toolkit: invalid config")

// pickerHint ends every not-found error (seeds/002 Errors rule 1).
const pickerHint = "was not found or the user has not granted this app access to it: run " + Name +
	".GenerateGoogleFilePickerUrl, let the user pick the file, then retry"

// upstreamError is a tool error whose cause only the operator log sees.
type upstreamError struct {
	te     *toolrunner.Error
	detail error
}

func (e *upstreamError) Error() string { return e.te.Error() }
func (e *upstreamError) Unwrap() error { return e.te }

// apiError turns an error of a Google API call about what (e.g.
// `document "1abc"`) into a tool error.
func apiError(err error, what string) error {
	if err == nil {
		return nil
	}
	var te *toolrunner.Error
	if errors.As(err, &te) {
		return te
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		msg := ge.Message
		if msg == "" {
			msg = http.StatusText(ge.Code)
		}
		switch {
		case ge.Code == http.StatusForbidden && rateLimited(ge):
			return toolrunner.Errorf(toolrunner.KindUpstream, true, "Google's rate limit was reached (%s); retry later", msg)
		case ge.Code == http.StatusNotFound:
			return toolrunner.Errorf(toolrunner.KindNotFound, false, "%s %s", what, pickerHint)
		case ge.Code == http.StatusForbidden && !insufficientScope(ge):
			// Denied: not picked yet, or the user may only view it.
			return toolrunner.Errorf(toolrunner.KindNotFound, false, "%s %s (Google: %s)", what, pickerHint, msg)
		case ge.Code == http.StatusUnauthorized || ge.Code == http.StatusForbidden:
			return toolrunner.Errorf(toolrunner.KindAuthorizationFailed, true, "Google refused the user's authorization (%d: %s); reconnect the Google account and retry", ge.Code, msg)
		case ge.Code == http.StatusBadRequest || ge.Code == http.StatusConflict || ge.Code == http.StatusRequestEntityTooLarge:
			return toolrunner.Errorf(toolrunner.KindInputInvalid, false, "Google refused the request: %s", msg)
		case ge.Code == http.StatusTooManyRequests || ge.Code >= 500:
			return toolrunner.Errorf(toolrunner.KindUpstream, true, "Google answered %d: %s", ge.Code, msg)
		}
		return toolrunner.Errorf(toolrunner.KindUpstream, false, "Google answered %d: %s", ge.Code, msg)
	}
	switch {
	case errors.Is(err, provhttp.ErrBodyTooLarge):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false, "Google's answer about %s is larger than this platform accepts", what), err}
	case errors.Is(err, provhttp.ErrRedirect):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false, "Google answered a redirect to another host, which is not followed"), err}
	case errors.Is(err, docmd.ErrInvalidDocument):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false, "Google answered %s with a document that is not valid (%s)", what,
			strings.TrimPrefix(err.Error(), docmd.ErrInvalidDocument.Error()+": ")), err}
	case errors.Is(err, egress.ErrRefused):
		return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, false, "the Google API base URL is not reachable from this platform (refused by the egress policy)"), err}
	case errors.Is(err, context.DeadlineExceeded):
		return toolrunner.Errorf(toolrunner.KindTimeout, true, "Google did not answer in time")
	case errors.Is(err, context.Canceled):
		return toolrunner.Errorf(toolrunner.KindTimeout, true, "the call was cancelled")
	}
	return &upstreamError{toolrunner.Errorf(toolrunner.KindUpstream, true, "Google cannot be reached"), fmt.Errorf("%s: %w", what, err)}
}

// insufficientScope: a 403 that is about the token's scopes, not the file.
func insufficientScope(ge *googleapi.Error) bool {
	if strings.Contains(strings.ToLower(ge.Message), "insufficient authentication scopes") ||
		strings.Contains(ge.Header.Get("WWW-Authenticate"), "insufficient_scope") {
		return true
	}
	for _, it := range ge.Errors {
		if it.Reason == "insufficientPermissions" || it.Reason == "ACCESS_TOKEN_SCOPE_INSUFFICIENT" {
			return true
		}
	}
	for _, d := range ge.Details {
		if m, ok := d.(map[string]any); ok && m["reason"] == "ACCESS_TOKEN_SCOPE_INSUFFICIENT" {
			return true
		}
	}
	return false
}

// rateLimited: Drive answers some rate limits with 403.
func rateLimited(ge *googleapi.Error) bool {
	for _, it := range ge.Errors {
		switch it.Reason {
		case "rateLimitExceeded", "userRateLimitExceeded", "sharingRateLimitExceeded":
			return true
		}
	}
	return false
}
