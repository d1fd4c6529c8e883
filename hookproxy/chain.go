package hookproxy

import (
	"context"

	"github.com/auditrail/auditrail/schemas"
	"github.com/auditrail/auditrail/schemas/hooksapi"
)

// Verdict is the outcome of a chain of hooks at one point.
type Verdict struct {
	Allowed bool
	// Kind and Message explain a denial (KindCheckFailed or KindRateLimited).
	Kind    string
	Message string
	Calls   []schemas.HookCall
}

// PreResult is the verdict of the pre hooks with their overrides applied.
type PreResult struct {
	Verdict
	Inputs map[string]any
	// Secrets holds the secret values that hooks replaced, by name.
	Secrets map[string]string
}

// PostResult is the verdict of the post hooks and the output to return.
type PostResult struct {
	Verdict
	Output any
}

func deny(v *Verdict, kind, msg string) {
	v.Allowed, v.Kind, v.Message = false, kind, msg
}

// decided applies a hook's code to v; false when the chain stops.
func decided(v *Verdict, call *schemas.HookCall, h Hook, code hooksapi.Code, msg *string) bool {
	call.Code = string(code)
	if msg != nil {
		call.ErrorMessage = *msg
	}
	switch code {
	case hooksapi.OK:
		call.Decision = "allow"
		return true
	case hooksapi.RATELIMITEXCEEDED:
		call.Decision = "deny"
		deny(v, KindRateLimited, orDefault(call.ErrorMessage, "rate limit exceeded (hook "+h.Name+")"))
	default:
		call.Decision = "deny"
		deny(v, KindCheckFailed, orDefault(call.ErrorMessage, "denied by hook "+h.Name))
	}
	return false
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// failed applies the failure mode of a failed call; false when the chain stops.
func (p *Proxy) failed(v *Verdict, h Hook, point Point, call *schemas.HookCall) bool {
	if p.applyFailure(h, point, call) {
		return true
	}
	deny(v, KindCheckFailed, "hook "+h.Name+" failed ("+call.Failure+") and fails closed")
	return false
}

// Pre runs the pre hooks of hooks in order. Each sees the inputs as the
// hooks before it overrode them; a denial stops the chain.
func (p *Proxy) Pre(ctx context.Context, hooks []Hook, req hooksapi.PreRequest) PreResult {
	res := PreResult{Verdict: Verdict{Allowed: true}, Inputs: req.Inputs}
	for _, h := range Order(hooks) {
		if _, ok := h.Points[Pre]; !ok {
			continue
		}
		req.Inputs = res.Inputs
		var ans PreAnswer
		o, ok := p.invoke(ctx, h, Pre, func() ([]byte, error) { return preBody(h, req) },
			func(b []byte) (err error) { ans, err = DecodePreResponse(b); return err })
		if o.payloadErr != nil {
			deny(&res.Verdict, KindCheckFailed, "inputs cannot be sent to hooks: "+o.payloadErr.Error())
			return res
		}
		call := o.call
		cont := true
		if !ok {
			cont = p.failed(&res.Verdict, h, Pre, &call)
		} else if cont = decided(&res.Verdict, &call, h, ans.Code, ans.ErrorMessage); cont && ans.Override != nil {
			if ans.Override.Inputs != nil {
				res.Inputs = *ans.Override.Inputs
				call.Overridden = true
			}
			if ans.Secrets != nil {
				if res.Secrets == nil {
					res.Secrets = map[string]string{}
				}
				for k, v := range ans.Secrets {
					res.Secrets[k] = v
				}
				call.Overridden = true
			}
		}
		p.observe(Pre, o, call)
		res.Calls = append(res.Calls, call)
		if !cont {
			return res
		}
	}
	return res
}

// Post runs the post hooks in order; each sees the output as overridden by
// the ones before it.
func (p *Proxy) Post(ctx context.Context, hooks []Hook, req hooksapi.PostRequest) PostResult {
	res := PostResult{Verdict: Verdict{Allowed: true}, Output: req.Output}
	for _, h := range Order(hooks) {
		if _, ok := h.Points[Post]; !ok {
			continue
		}
		req.Output = res.Output
		var ans hooksapi.PostResponse
		o, ok := p.invoke(ctx, h, Post, func() ([]byte, error) { return postBody(h, req) },
			func(b []byte) (err error) { ans, err = DecodePostResponse(b); return err })
		if o.payloadErr != nil {
			deny(&res.Verdict, KindCheckFailed, "output cannot be sent to hooks: "+o.payloadErr.Error())
			return res
		}
		call := o.call
		cont := true
		if !ok {
			cont = p.failed(&res.Verdict, h, Post, &call)
		} else if cont = decided(&res.Verdict, &call, h, ans.Code, ans.ErrorMessage); cont && ans.Override != nil && ans.Override.Output != nil {
			res.Output = ans.Override.Output
			call.Overridden = true
		}
		p.observe(Post, o, call)
		res.Calls = append(res.Calls, call)
		if !cont {
			return res
		}
	}
	return res
}

// Visible is the set of tools a user may see: toolkit → tool → true.
type Visible map[string]map[string]bool

// AccessDecision is what the access hooks decided for a user: the tools
// left visible, the calls made, and which call hid each hidden tool.
type AccessDecision struct {
	Visible Visible
	Calls   []schemas.HookCall
	// hiddenBy: toolkit → tool → index in Calls of the hook that hid it.
	hiddenBy map[string]map[string]int
}

func (d *AccessDecision) hide(tk, tool string, call int) {
	delete(d.Visible[tk], tool)
	if d.hiddenBy[tk] == nil {
		d.hiddenBy[tk] = map[string]int{}
	}
	if _, ok := d.hiddenBy[tk][tool]; !ok {
		d.hiddenBy[tk][tool] = call
	}
}

// HiddenBy returns the name of the hook that hid a tool, if one did.
func (d AccessDecision) HiddenBy(toolkit, tool string) (string, bool) {
	i, ok := d.hiddenBy[toolkit][tool]
	if !ok {
		return "", false
	}
	return d.Calls[i].HookName, true
}

// Record returns the access calls as an execution of toolkit.tool records
// them: the call of the hook that hid the tool says decision "deny" (the
// others "allow"); cached marks a decision taken from the cache, when no
// hook was called for this execution (attempts and latency 0). An empty
// tool gives the calls of a listing.
func (d AccessDecision) Record(toolkit, tool string, cached bool) []schemas.HookCall {
	if len(d.Calls) == 0 {
		return nil
	}
	out := append([]schemas.HookCall(nil), d.Calls...)
	if i, ok := d.hiddenBy[toolkit][tool]; ok && tool != "" {
		c := &out[i]
		c.Decision = "deny"
		if c.ErrorMessage == "" && c.Failure == "" {
			c.ErrorMessage = toolkit + "." + tool + " is hidden by access hook " + c.HookName
		}
	}
	if cached {
		for i := range out {
			out[i].Cached, out[i].Attempts, out[i].LatencyMS = true, 0, 0
		}
	}
	return out
}

// Access runs the access hooks in order, each with one batched request for
// the tools still visible. `only` keeps just the tools it lists (and `deny`
// is then ignored), `deny` removes the tools it lists, neither changes
// nothing; an empty list (or a missing or empty `tools`) names a whole
// toolkit, and versions listed for a tool must include its version. A failed hook that fails
// closed hides everything; one that fails open changes nothing.
func (p *Proxy) Access(ctx context.Context, hooks []Hook, userID string, catalog map[string]hooksapi.ToolkitInfo) AccessDecision {
	d := AccessDecision{Visible: Visible{}, hiddenBy: map[string]map[string]int{}}
	visible := d.Visible
	for tk, info := range catalog {
		visible[tk] = map[string]bool{}
		for tool := range info.Tools {
			visible[tk][tool] = true
		}
	}
	for _, h := range Order(hooks) {
		if _, ok := h.Points[Access]; !ok {
			continue
		}
		req := hooksapi.AccessRequest{UserId: userID, Toolkits: map[string]hooksapi.ToolkitInfo{}}
		for tk, tools := range visible {
			if len(tools) == 0 {
				continue
			}
			info := hooksapi.ToolkitInfo{Tools: map[string][]hooksapi.VersionInfo{}}
			for tool := range tools {
				info.Tools[tool] = catalog[tk].Tools[tool]
			}
			req.Toolkits[tk] = info
		}
		var ans AccessAnswer
		o, ok := p.invoke(ctx, h, Access, func() ([]byte, error) { return accessBody(h, req) },
			func(b []byte) (err error) { ans, err = DecodeAccessResponse(b); return err })
		call := o.call
		idx := len(d.Calls)
		if !ok {
			if !p.applyFailure(h, Access, &call) {
				for tk, tools := range visible {
					for tool := range tools {
						d.hide(tk, tool, idx)
					}
				}
			}
			p.observe(Access, o, call)
			d.Calls = append(d.Calls, call)
			continue
		}
		call.Code, call.Decision = string(hooksapi.OK), "allow"
		switch {
		case ans.Only != nil:
			call.Overridden = true
			for tk, tools := range visible {
				keep, listed := ans.Only[tk]
				for tool := range tools {
					if !listed || !keep.Selects(tool, catalog[tk].Tools[tool]) {
						d.hide(tk, tool, idx)
					}
				}
			}
		case ans.Deny != nil:
			call.Overridden = true
			for tk, drop := range ans.Deny {
				for tool := range visible[tk] {
					if drop.Selects(tool, catalog[tk].Tools[tool]) {
						d.hide(tk, tool, idx)
					}
				}
			}
		}
		p.observe(Access, o, call)
		d.Calls = append(d.Calls, call)
	}
	return d
}
