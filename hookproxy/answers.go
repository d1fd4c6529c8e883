package hookproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// Answers are read in both contracts' shapes, whatever the hook's contract
// (CONTRACT.md): a server written to Arcade's schema that answers
// well-formed JSON is never "malformed" here, since fail-closed would then
// hide every tool and fail-open silently ignore a deny.

// Selection is the `only` or `deny` of an access answer: toolkit name to
// the tools selected in it.
type Selection map[string]ToolkitPick

// ToolkitPick selects tools of one toolkit: all of them, or the tools
// named, each with the versions listed (none listed: every version).
type ToolkitPick struct {
	All   bool
	Tools map[string][]string
}

// Selects reports whether the pick selects a tool whose versions (in the
// catalog) are versions.
func (p ToolkitPick) Selects(tool string, versions []hooksapi.VersionInfo) bool {
	if p.All {
		return true
	}
	listed, ok := p.Tools[tool]
	if !ok {
		return false
	}
	if len(listed) == 0 {
		return true
	}
	for _, v := range versions {
		if slices.Contains(listed, v.Version) {
			return true
		}
	}
	return false
}

// AccessAnswer is an access hook's answer: Only (when present, Deny is
// ignored) or Deny; both nil change nothing.
type AccessAnswer struct {
	Only, Deny Selection
}

// PreAnswer is a pre hook's answer; Secrets holds override.secrets merged
// from either shape (nil when the answer overrides none).
type PreAnswer struct {
	hooksapi.PreResponse
	Secrets map[string]string
}

// DecodePreResponse decodes and checks the answer of a pre hook.
func DecodePreResponse(b []byte) (PreAnswer, error) {
	var a PreAnswer
	if err := strictDecode(b, &a.PreResponse); err != nil {
		return a, err
	}
	if !a.Code.Valid() {
		return a, fmt.Errorf("code %q is not OK, CHECK_FAILED or RATE_LIMIT_EXCEEDED", a.Code)
	}
	if a.Override != nil && a.Override.Secrets != nil {
		s, err := secretsOf(a.Override.Secrets.Raw())
		if err != nil {
			return a, fmt.Errorf("override.secrets: %w", err)
		}
		a.Secrets = s
	}
	return a, nil
}

// DecodePostResponse decodes and checks the answer of a post hook.
func DecodePostResponse(b []byte) (hooksapi.PostResponse, error) {
	var r hooksapi.PostResponse
	if err := strictDecode(b, &r); err != nil {
		return r, err
	}
	if !r.Code.Valid() {
		return r, fmt.Errorf("code %q is not OK, CHECK_FAILED or RATE_LIMIT_EXCEEDED", r.Code)
	}
	return r, nil
}

// DecodeAccessResponse decodes the answer of an access hook.
func DecodeAccessResponse(b []byte) (AccessAnswer, error) {
	var r hooksapi.AccessResponse
	if err := strictDecode(b, &r); err != nil {
		return AccessAnswer{}, err
	}
	var a AccessAnswer
	var err error
	if a.Only, err = selectionOf("only", r.Only); err != nil {
		return AccessAnswer{}, err
	}
	if a.Deny, err = selectionOf("deny", r.Deny); err != nil {
		return AccessAnswer{}, err
	}
	return a, nil
}

func selectionOf(field string, s *hooksapi.ToolSelection) (Selection, error) {
	if s == nil {
		return nil, nil
	}
	out := make(Selection, len(*s))
	for tk, sel := range *s {
		pick, err := pickOf(sel.Raw())
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", field, tk, err)
		}
		out[tk] = pick
	}
	return out, nil
}

// pickOf reads one toolkit's selection: a list of tool names, or an object
// whose tools keys name the tools with the versions selected; an empty
// list, a missing or empty tools (and null) select the whole toolkit.
func pickOf(b json.RawMessage) (ToolkitPick, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return ToolkitPick{All: true}, nil
	}
	switch b[0] {
	case '[':
		var names hooksapi.ToolNames
		if err := json.Unmarshal(b, &names); err != nil {
			return ToolkitPick{}, fmt.Errorf("not a list of tool names: %v", err)
		}
		if len(names) == 0 {
			return ToolkitPick{All: true}, nil
		}
		p := ToolkitPick{Tools: make(map[string][]string, len(names))}
		for _, n := range names {
			p.Tools[n] = nil
		}
		return p, nil
	case '{':
		var t hooksapi.ToolkitTools
		if err := json.Unmarshal(b, &t); err != nil {
			return ToolkitPick{}, fmt.Errorf("not {\"tools\": {name: [versions]}}: %v", err)
		}
		if t.Tools == nil || len(*t.Tools) == 0 {
			return ToolkitPick{All: true}, nil
		}
		p := ToolkitPick{Tools: make(map[string][]string, len(*t.Tools))}
		for name, versions := range *t.Tools {
			var listed []string
			for _, v := range versions {
				if v.Version != nil && *v.Version != "" {
					listed = append(listed, *v.Version)
				}
			}
			p.Tools[name] = listed
		}
		return p, nil
	}
	return ToolkitPick{}, fmt.Errorf("neither a list of tool names nor {\"tools\": …}")
}

// secretsOf reads override.secrets: an object of secret values, or a list
// of such objects merged in order (a later value wins).
func secretsOf(b json.RawMessage) (map[string]string, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	switch b[0] {
	case '{':
		var m hooksapi.SecretValues
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("not an object of secret values: %v", err)
		}
		return m, nil
	case '[':
		var list hooksapi.SecretValuesList
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("not a list of objects of secret values: %v", err)
		}
		out := map[string]string{}
		for _, m := range list {
			for k, v := range m {
				out[k] = v
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("neither an object nor a list of objects of secret values")
}
