package mail

import (
	"context"
	"errors"
	"strings"
	"unicode"

	"github.com/auditrail/auditrail/toolrunner"
	"github.com/auditrail/auditrail/toolrunner/toolkits/mail/graphapi"
)

// Tools returns the 13 tools.
func (t *Toolkit) Tools() []toolrunner.Tool {
	return []toolrunner.Tool{
		tool{t, defCreateAndSendEmail(), t.createAndSendEmail},
		tool{t, defCreateDraftEmail(), t.createDraftEmail},
		tool{t, defGetEmail(), t.getEmail},
		tool{t, defListEmailAttachments(), t.listEmailAttachments},
		tool{t, defListEmails(), t.listEmails},
		tool{t, defListEmailsByProperty(), t.listEmailsByProperty},
		tool{t, defListEmailsInFolder(), t.listEmailsInFolder},
		tool{t, defListMailFolders(), t.listMailFolders},
		tool{t, defReplyToEmail(), t.replyToEmail},
		tool{t, defSearchEmails(), t.searchEmails},
		tool{t, defSendDraftEmail(), t.sendDraftEmail},
		tool{t, defUpdateDraftEmail(), t.updateDraftEmail},
		tool{t, defWhoAmI(), t.whoAmI},
	}
}

// tool runs one tool with the call's Graph client.
type tool struct {
	t   *Toolkit
	def toolrunner.Definition
	run func(ctx context.Context, c *graphapi.Client, call toolrunner.Call) (any, error)
}

func (x tool) Definition() toolrunner.Definition { return x.def }

func (x tool) Run(ctx context.Context, call toolrunner.Call) (any, error) {
	c, err := x.t.clientFor(call)
	if err != nil {
		return nil, err
	}
	out, err := x.run(ctx, c, call)
	if err == nil {
		return out, nil
	}
	if ue, ok := errors.AsType[*upstreamError](err); ok {
		x.t.cfg.Log.Warn("graph api error", "toolkit", Name, "tool", x.def.Name, "err", ue.detail)
		return nil, ue.te
	}
	return nil, apiError(err, "the request")
}

// str answers a string input ("" when absent).
func str(in map[string]any, name string) string {
	s, _ := in[name].(string)
	return s
}

func strs(in map[string]any, name string) []string {
	ss, _ := in[name].([]string)
	return ss
}

func integer(in map[string]any, name string) int {
	i, _ := in[name].(int64)
	return int(i)
}

// id checks an id input: not empty, no control characters, not a dot
// segment (ids are path segments of Graph URLs).
func id(in map[string]any, name string) (string, error) {
	v := strings.TrimSpace(str(in, name))
	if v == "" || v == "." || v == ".." || strings.IndexFunc(v, unicode.IsControl) >= 0 || len(v) > 1024 {
		return "", invalid("%s: not an id", name)
	}
	return v, nil
}

func messageWhat(id string) string { return "message " + quoteID(id) }

func quoteID(id string) string {
	if len(id) > 80 {
		id = id[:80] + "…"
	}
	return `"` + id + `"`
}

// page is one page of a listing as the tools answer it.
func page(key string, items []any, token string) map[string]any {
	return map[string]any{key: items, "count": len(items), "pagination_token": nilIfEmpty(token), "has_more": token != ""}
}
