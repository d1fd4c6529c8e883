package mcpserver

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/auditrail/auditrail/toolrunner"
)

// AUTHORIZATION_REQUIRED and URL elicitation. A call whose user must
// first grant the tool's provider ends, for a client that shows URLs, in an
// input-required result (SEP-2322) whose one input request is a URL
// elicitation of the authorization URL. The SDK hands it to a client of
// protocol 2026-07-28, which asks the user and calls again with the
// answer; for an older client it sends elicitation/create itself and calls
// the handler again with the answer. The call again:
//   - after "accept", runs the tool once more (the user may have granted
//     it meanwhile) and its result is final: no second question;
//   - after "decline" or "cancel", runs nothing and ends in the tool error.
//
// A client that does not show URLs gets the tool error at once, its text
// naming the URL (errorResult).

// authorizeInput prefixes the id of the input request of an
// authorization; the execution id follows.
const authorizeInput = "authorize:"

// askAuthorization returns the input-required result that asks the user
// to open ar's URL, or nil: no authorization needed, a client that does
// not show URLs, or a call that already carries answers.
func askAuthorization(ss *mcp.ServerSession, p *mcp.CallToolParamsRaw, executionID string, ar *toolrunner.AuthorizationRequest) *mcp.CallToolResult {
	if ar == nil || len(p.InputResponses) > 0 || !showsURLs(ss) || !webURL(ar.URL) {
		return nil
	}
	msg := fmt.Sprintf("Authorize %s for this tool", ar.Provider)
	if len(ar.Scopes) > 0 {
		msg += " (scopes: " + strings.Join(ar.Scopes, " ") + ")"
	}
	msg += "."
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{
		authorizeInput + executionID: &mcp.ElicitParams{Mode: "url", Message: msg, URL: ar.URL, ElicitationID: executionID},
	}}
}

// declinedAuthorization returns the final tool error of a call that
// answers an authorization the user declined or cancelled, or nil.
func declinedAuthorization(p *mcp.CallToolParamsRaw) *mcp.CallToolResult {
	for id, r := range p.InputResponses {
		execution, ok := strings.CutPrefix(id, authorizeInput)
		if !ok {
			continue
		}
		if er, ok := r.(*mcp.ElicitResult); ok && er.Action == "accept" {
			return nil
		}
		return errorResult(&toolrunner.Error{Kind: toolrunner.KindAuthorization, CanRetry: true,
			Message: fmt.Sprintf("the user did not open the authorization URL of execution %s; the tool was not run again", clip(execution))}, nil)
	}
	return nil
}

// showsURLs reports whether the session's client declared URL elicitation.
func showsURLs(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.Capabilities.Elicitation.URL != nil
}

// webURL: only an absolute http(s) URL is shown to a user.
func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

// authorizationOf reads the authorization of an upstream tool error (the
// structured content of errorResult), or nil.
func authorizationOf(res *mcp.CallToolResult) (string, *toolrunner.AuthorizationRequest) {
	if res == nil || !res.IsError || res.StructuredContent == nil {
		return "", nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return "", nil
	}
	var r struct {
		ExecutionID   string                           `json:"execution_id"`
		Error         *toolrunner.Error                `json:"error"`
		Authorization *toolrunner.AuthorizationRequest `json:"authorization"`
	}
	if json.Unmarshal(b, &r) != nil || r.Error == nil || r.Error.Kind != toolrunner.KindAuthorization {
		return "", nil
	}
	return r.ExecutionID, r.Authorization
}
