// Package admin is `auditrail admin NOUN VERB`: the admin and audit API
// from a terminal (source CLI), through apiclient.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/auditrail/auditrail/internal/apiclient"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// adminCommand is one `auditrail admin NOUN VERB` command.
type adminCommand struct {
	noun, verb string
	args       []string // positional arguments, by name
	usage      string
	// flags adds the command's flags; run builds the request from args and flags.
	flags func(fs *cli.Flags) func(a map[string]string) (method, path string, body any, err error)
}

func esc(s string) string { return url.PathEscape(s) }

func projectBase(a map[string]string, project string) string {
	base := "/api/v1/orgs/" + esc(a["ORG"])
	if project != "" {
		base += "/projects/" + esc(project)
	}
	return base
}

func readValue(flagValue, what string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return "", err
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", cli.UsageErrorf("%s: give --value or pipe it on standard input", what)
	}
	return v, nil
}

func readJSONFile(path string) (json.RawMessage, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, cli.UsageErrorf("%s is not JSON", path)
	}
	return b, nil
}

func noFlags(build func(a map[string]string) (string, string, any, error)) func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
	return func(*cli.Flags) func(a map[string]string) (string, string, any, error) { return build }
}

func adminCommands() []adminCommand {
	hookCmd := func(verb, method, suffix string, withHook, withFile bool) adminCommand {
		args := []string{"ORG"}
		if withHook {
			args = append(args, "HOOK")
		}
		return adminCommand{noun: "hook", verb: verb, args: args, flags: func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
			project := fs.FlagSet.String("project", "", "project id (default: an organization hook)")
			var file *string
			if withFile {
				file = fs.FlagSet.String("file", "", "JSON file of the HookConfig (or merge patch); - for standard input")
			}
			return func(a map[string]string) (string, string, any, error) {
				path := projectBase(a, *project) + "/hooks"
				if withHook {
					path += "/" + esc(a["HOOK"])
				}
				path += suffix
				if !withFile {
					return method, path, nil, nil
				}
				if *file == "" {
					return "", "", nil, cli.UsageErrorf("--file is required")
				}
				body, err := readJSONFile(*file)
				return method, path, body, err
			}
		}}
	}
	providerCmd := func(verb, method string, withID, withFile bool) adminCommand {
		args := []string{"ORG"}
		if withID {
			args = append(args, "ID")
		}
		return adminCommand{noun: "provider", verb: verb, args: args, flags: func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
			var file *string
			if withFile {
				file = fs.FlagSet.String("file", "", "JSON file of the AuthProvider (patch: the fields to change); - for standard input, which keeps client_secret out of shell history")
			}
			return func(a map[string]string) (string, string, any, error) {
				path := "/api/v1/orgs/" + esc(a["ORG"]) + "/auth_providers"
				if withID {
					path += "/" + esc(a["ID"])
				}
				if !withFile {
					return method, path, nil, nil
				}
				if *file == "" {
					return "", "", nil, cli.UsageErrorf("--file is required")
				}
				body, err := readJSONFile(*file)
				return method, path, body, err
			}
		}}
	}
	return []adminCommand{
		{noun: "org", verb: "create", args: []string{"NAME"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "POST", "/api/v1/orgs", map[string]string{"name": a["NAME"]}, nil
		})},
		{noun: "org", verb: "list", args: nil, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", "/api/v1/orgs", nil, nil
		})},
		{noun: "org", verb: "get", args: []string{"ORG"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", "/api/v1/orgs/" + esc(a["ORG"]), nil, nil
		})},
		{noun: "project", verb: "create", args: []string{"ORG", "NAME"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "POST", "/api/v1/orgs/" + esc(a["ORG"]) + "/projects", map[string]string{"name": a["NAME"]}, nil
		})},
		{noun: "project", verb: "list", args: []string{"ORG"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", "/api/v1/orgs/" + esc(a["ORG"]) + "/projects", nil, nil
		})},
		{noun: "member", verb: "set", args: []string{"ORG", "USER"}, flags: func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
			role := fs.FlagSet.String("role", "member", "owner, admin or member")
			name := fs.FlagSet.String("display-name", "", "display name")
			return func(a map[string]string) (string, string, any, error) {
				return "PUT", "/api/v1/orgs/" + esc(a["ORG"]) + "/members/" + esc(a["USER"]), map[string]string{"role": *role, "display_name": *name}, nil
			}
		}},
		{noun: "member", verb: "remove", args: []string{"ORG", "USER"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "DELETE", "/api/v1/orgs/" + esc(a["ORG"]) + "/members/" + esc(a["USER"]), nil, nil
		})},
		{noun: "member", verb: "list", args: []string{"ORG"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", "/api/v1/orgs/" + esc(a["ORG"]) + "/members", nil, nil
		})},
		{noun: "project-member", verb: "set", args: []string{"ORG", "PROJECT", "USER"}, flags: func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
			role := fs.FlagSet.String("role", "member", "admin or member")
			return func(a map[string]string) (string, string, any, error) {
				return "PUT", projectBase(a, a["PROJECT"]) + "/members/" + esc(a["USER"]), map[string]string{"role": *role}, nil
			}
		}},
		{noun: "project-member", verb: "remove", args: []string{"ORG", "PROJECT", "USER"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "DELETE", projectBase(a, a["PROJECT"]) + "/members/" + esc(a["USER"]), nil, nil
		})},
		{noun: "project-member", verb: "list", args: []string{"ORG", "PROJECT"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", projectBase(a, a["PROJECT"]) + "/members", nil, nil
		})},
		{noun: "key", verb: "create", args: []string{"ORG", "USER", "NAME"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "POST", "/api/v1/orgs/" + esc(a["ORG"]) + "/api_keys", map[string]string{"user_id": a["USER"], "name": a["NAME"]}, nil
		})},
		{noun: "key", verb: "list", args: []string{"ORG"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", "/api/v1/orgs/" + esc(a["ORG"]) + "/api_keys", nil, nil
		})},
		{noun: "key", verb: "disable", args: []string{"ORG", "KEY"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "POST", "/api/v1/orgs/" + esc(a["ORG"]) + "/api_keys/" + esc(a["KEY"]) + "/disable", nil, nil
		})},
		{noun: "key", verb: "delete", args: []string{"ORG", "KEY"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "DELETE", "/api/v1/orgs/" + esc(a["ORG"]) + "/api_keys/" + esc(a["KEY"]), nil, nil
		})},
		hookCmd("create", "POST", "", false, true),
		hookCmd("list", "GET", "", false, false),
		hookCmd("get", "GET", "", true, false),
		hookCmd("patch", "PATCH", "", true, true),
		hookCmd("disable", "POST", "/disable", true, false),
		hookCmd("delete", "DELETE", "", true, false),
		{noun: "secret", verb: "set", args: []string{"ORG", "PROJECT", "NAME"}, flags: func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
			value := fs.FlagSet.String("value", "", "the value (default: read from standard input, which keeps it out of shell history)")
			return func(a map[string]string) (string, string, any, error) {
				v, err := readValue(*value, "secret value")
				return "PUT", projectBase(a, a["PROJECT"]) + "/secrets/" + esc(a["NAME"]), map[string]string{"value": v}, err
			}
		}},
		{noun: "secret", verb: "delete", args: []string{"ORG", "PROJECT", "NAME"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "DELETE", projectBase(a, a["PROJECT"]) + "/secrets/" + esc(a["NAME"]), nil, nil
		})},
		{noun: "secret", verb: "list", args: []string{"ORG", "PROJECT"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", projectBase(a, a["PROJECT"]) + "/secrets", nil, nil
		})},
		providerCmd("create", "POST", false, true),
		providerCmd("list", "GET", false, false),
		providerCmd("get", "GET", true, false),
		providerCmd("patch", "PATCH", true, true),
		providerCmd("delete", "DELETE", true, false),
		{noun: "connection", verb: "authorize", args: []string{"ORG", "PROJECT", "USER", "PROVIDER"}, flags: func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
			scopes := fs.FlagSet.String("scopes", "", "comma-separated scopes to ask for, besides the provider's defaults and those already granted")
			return func(a map[string]string) (string, string, any, error) {
				return "POST", projectBase(a, a["PROJECT"]) + "/users/" + esc(a["USER"]) + "/connections/" + esc(a["PROVIDER"]) + "/authorize",
					map[string]any{"scopes": splitList(*scopes)}, nil
			}
		}},
		{noun: "connection", verb: "set", args: []string{"ORG", "PROJECT", "USER", "PROVIDER"}, flags: func(fs *cli.Flags) func(a map[string]string) (string, string, any, error) {
			access := fs.FlagSet.String("access-token", "", "access token (default: read from standard input)")
			refresh := fs.FlagSet.String("refresh-token", "", "refresh token")
			scopes := fs.FlagSet.String("scopes", "", "comma-separated scopes")
			expires := fs.FlagSet.String("expires-at", "", "expiry, RFC 3339")
			return func(a map[string]string) (string, string, any, error) {
				tok, err := readValue(*access, "access token")
				if err != nil {
					return "", "", nil, err
				}
				body := map[string]any{"access_token": tok, "refresh_token": *refresh, "scopes": splitList(*scopes)}
				if *expires != "" {
					t, err := time.Parse(time.RFC3339, *expires)
					if err != nil {
						return "", "", nil, cli.UsageErrorf("--expires-at: %v", err)
					}
					body["expires_at"] = t
				}
				return "PUT", projectBase(a, a["PROJECT"]) + "/users/" + esc(a["USER"]) + "/connections/" + esc(a["PROVIDER"]), body, nil
			}
		}},
		{noun: "connection", verb: "delete", args: []string{"ORG", "PROJECT", "USER", "PROVIDER"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "DELETE", projectBase(a, a["PROJECT"]) + "/users/" + esc(a["USER"]) + "/connections/" + esc(a["PROVIDER"]), nil, nil
		})},
		{noun: "connection", verb: "list", args: []string{"ORG", "PROJECT", "USER"}, flags: noFlags(func(a map[string]string) (string, string, any, error) {
			return "GET", projectBase(a, a["PROJECT"]) + "/users/" + esc(a["USER"]) + "/connections", nil, nil
		})},
	}
}

func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func adminUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: auditrail admin [--url URL] [--key KEY] NOUN VERB ARGS... [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range adminCommands() {
		fmt.Fprintf(w, "  %s %s %s\n", c.noun, c.verb, strings.Join(c.args, " "))
	}
	fmt.Fprintln(w, "  logs ORG [--project P] [--action A] [--source S] [--resource-type R] [--limit N] [--all] [--format table|json]")
	fmt.Fprintln(w, "  executions ORG [PROJECT] [--user U] [--success true|false] [--limit N] [--all] [--format table|json]")
	fmt.Fprintln(w, "\nFilters take the names the tables print (CREATED, CLI, HOOK) or the enum names (AUDIT_ACTION_CREATED).")
	fmt.Fprintln(w, "\nprovider create|patch read the AuthProvider JSON from --file (- for standard input):")
	fmt.Fprintln(w, `  {"id": "google", "type": "google", "client_id": "…", "client_secret": "…", "api_base_url": "…"}`)
	fmt.Fprintln(w, "connection authorize prints the link that the user opens in their browser to connect (valid 10 minutes; a link asked for a user continues only in a browser signed in as that user).")
	fmt.Fprintln(w, "\nRequests carry X-Auditrail-Source: CLI, so the audit log shows where a change came from.")
}

// runAdmin is the admin API from a terminal.
// Run runs `auditrail admin` with args.
func Run(ctx context.Context, args []string) error {
	fs := cli.NewFlags("auditrail admin")
	base := fs.String("url", "", "http://127.0.0.1:8080", "base URL of the admin and audit API")
	key := fs.String("key", "", "", "API key, JWT or bootstrap key (prefer the environment: a flag shows in the process list)")
	fs.Usage = func() { adminUsage(fs.Output()); fs.PrintDefaults() }
	if err := fs.ParseKeepArgs(args); err != nil {
		return err
	}
	if err := apiclient.CheckBaseURL(*base); err != nil {
		return err
	}
	rest := fs.Args()
	if slices.ContainsFunc(rest, isHelp) && (len(rest) < 2 || !slices.ContainsFunc(rest[2:], isHelp)) {
		// `admin --help`, `admin org --help`, `admin org create --help`.
		adminUsage(os.Stdout)
		return flag.ErrHelp
	}
	if len(rest) >= 1 && rest[0] == "providers" {
		rest[0] = "provider" // as the issue spells it
	}
	if len(rest) >= 1 && rest[0] == "logs" {
		return adminLogs(ctx, *base, *key, rest[1:])
	}
	if len(rest) >= 1 && rest[0] == "executions" {
		return adminExecutions(ctx, *base, *key, rest[1:])
	}
	if len(rest) < 2 {
		adminUsage(os.Stderr)
		return cli.UsageErrorf("name a command")
	}
	for _, c := range adminCommands() {
		if c.noun != rest[0] || c.verb != rest[1] {
			continue
		}
		cfs := cli.NewFlags("auditrail admin " + c.noun + " " + c.verb)
		build := c.flags(cfs)
		positional, err := parseInterleaved(cfs, rest[2:])
		if err != nil {
			return err
		}
		if len(positional) != len(c.args) {
			return cli.UsageErrorf("usage: auditrail admin %s %s %s", c.noun, c.verb, strings.Join(c.args, " "))
		}
		a := map[string]string{}
		for i, name := range c.args {
			a[name] = positional[i]
		}
		method, path, body, err := build(a)
		if err != nil {
			return err
		}
		data, err := apiclient.New(*base, *key, 30*time.Second).Call(ctx, method, path, body)
		if err != nil {
			return err
		}
		return printJSON(os.Stdout, data)
	}
	adminUsage(os.Stderr)
	return cli.UsageErrorf("unknown command %q", strings.Join(rest[:2], " "))
}

// parseInterleaved parses flags that may stand before, between or after the
// positional arguments.
func parseInterleaved(fs *cli.Flags, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.ParseKeepArgs(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

func printJSON(w io.Writer, data json.RawMessage) error {
	if len(data) == 0 {
		fmt.Fprintln(w, "ok")
		return nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// adminLogs lists audit logs, one page or (--all) every page.
func adminLogs(ctx context.Context, base, key string, args []string) error {
	fs := cli.NewFlags("auditrail admin logs")
	project := fs.FlagSet.String("project", "", "project id")
	action := fs.FlagSet.String("action", "", "action: CREATED, UPDATED, DELETED, DISABLED (or AUDIT_ACTION_…)")
	source := fs.FlagSet.String("source", "", "source: API, DASHBOARD, CLI, SDK, SYSTEM (or AUDIT_SOURCE_…)")
	rtype := fs.FlagSet.String("resource-type", "", "resource type: HOOK, API_KEY, … (or RESOURCE_TYPE_…)")
	limit := fs.FlagSet.Int("limit", 50, "entries per page (1-100)")
	all := fs.FlagSet.Bool("all", false, "follow next_cursor to the last page")
	format := fs.FlagSet.String("format", "table", "table or json (one entry per line)")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return cli.UsageErrorf("usage: auditrail admin logs ORG [flags]")
	}
	if *format != "table" && *format != "json" {
		return cli.UsageErrorf("--format: table or json")
	}
	q := url.Values{}
	for _, f := range []struct {
		flag, param, value string
		parse              func(string) (string, error)
	}{
		{"--action", "action", *action, func(v string) (string, error) { a, err := schemas.ParseAuditActionFilter(v); return a.String(), err }},
		{"--source", "source", *source, func(v string) (string, error) { s, err := schemas.ParseAuditSourceFilter(v); return s.String(), err }},
		{"--resource-type", "resource_type", *rtype, func(v string) (string, error) { r, err := schemas.ParseResourceTypeFilter(v); return r.String(), err }},
	} {
		if f.value == "" {
			continue
		}
		name, err := f.parse(strings.ToUpper(strings.TrimSpace(f.value)))
		if err != nil {
			return cli.UsageErrorf("%s: %s", f.flag, strings.TrimPrefix(strings.TrimPrefix(err.Error(), schemas.ErrUnknownEnum.Error()+": "), schemas.ErrUnspecifiedFilter.Error()+": "))
		}
		q.Set(f.param, name)
	}
	path := projectBase(map[string]string{"ORG": positional[0]}, *project) + "/audit_logs"
	cols := []string{"TIMESTAMP", "ACTION", "RESOURCE", "DISPLAY", "BY", "SOURCE"}
	row := func(it map[string]any) []any {
		return []any{it["timestamp"], strings.TrimPrefix(fmt.Sprint(it["action"]), "AUDIT_ACTION_"),
			strings.TrimPrefix(fmt.Sprint(it["resource_type"]), "RESOURCE_TYPE_"), it["resource_display"], it["display_name"],
			strings.TrimPrefix(fmt.Sprint(it["source"]), "AUDIT_SOURCE_")}
	}
	return walkListing(ctx, base, key, "admin logs", path, q, *limit, *all, *format, cols, row)
}

// adminExecutions lists tool executions as a table, one page or (--all) every page.
func adminExecutions(ctx context.Context, base, key string, args []string) error {
	fs := cli.NewFlags("auditrail admin executions")
	user := fs.FlagSet.String("user", "", "only the executions for this user")
	success := fs.FlagSet.String("success", "", "true or false")
	limit := fs.FlagSet.Int("limit", 50, "entries per page (1-100)")
	all := fs.FlagSet.Bool("all", false, "follow next_cursor to the last page")
	format := fs.FlagSet.String("format", "table", "table or json (one execution per line)")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) < 1 || len(positional) > 2 {
		return cli.UsageErrorf("usage: auditrail admin executions ORG [PROJECT] [flags]")
	}
	if *format != "table" && *format != "json" {
		return cli.UsageErrorf("--format: table or json")
	}
	if *success != "" && *success != "true" && *success != "false" {
		return cli.UsageErrorf("--success: true or false")
	}
	project := ""
	if len(positional) == 2 {
		project = positional[1]
	}
	q := url.Values{}
	if *user != "" {
		q.Set("user_id", *user)
	}
	if *success != "" {
		q.Set("success", *success)
	}
	path := projectBase(map[string]string{"ORG": positional[0]}, project) + "/tool_executions"
	cols := []string{"STARTED", "TOOL", "USER", "SUCCESS", "ERROR", "MS", "HOOKS"}
	row := func(it map[string]any) []any {
		tool := it["tool_name"]
		if tk, ok := it["tool"].(map[string]any); ok {
			tool = fmt.Sprintf("%v.%v", tk["toolkit"], tk["name"])
		}
		hooks, _ := it["hooks"].([]any)
		decisions := make([]string, 0, len(hooks))
		for _, h := range hooks {
			if hm, ok := h.(map[string]any); ok {
				decisions = append(decisions, fmt.Sprintf("%v:%v", hm["point"], hm["decision"]))
			}
		}
		errKind := any("-")
		if e, ok := it["error"].(map[string]any); ok {
			errKind = e["kind"]
		}
		return []any{it["started_at"], tool, it["user_id"], it["success"], errKind, it["duration_ms"], strings.Join(decisions, ",")}
	}
	return walkListing(ctx, base, key, "admin executions", path, q, *limit, *all, *format, cols, row)
}

// maxCountPages bounds the pages of 100 that countMore reads (each is one
// request against the rate limit).
const maxCountPages = 5

// countMore says how many entries follow cursor: exactly up to
// maxCountPages pages of 100, "more than N" past them, "more entries"
// when the API would not say (rate limited).
func countMore(ctx context.Context, base, key, path string, q url.Values, cursor string) string {
	q = maps.Clone(q)
	q.Set("limit", "100")
	n := 0
	for range maxCountPages {
		q.Set("cursor", cursor)
		data, err := apiclient.New(base, key, 30*time.Second).Call(ctx, "GET", path+"?"+q.Encode(), nil)
		if err != nil {
			return "more entries"
		}
		var page struct {
			Items      []json.RawMessage `json:"items"`
			HasMore    bool              `json:"has_more"`
			NextCursor string            `json:"next_cursor"`
		}
		if json.Unmarshal(data, &page) != nil {
			return "more entries"
		}
		n += len(page.Items)
		if !page.HasMore {
			return fmt.Sprintf("%d more", n)
		}
		cursor = page.NextCursor
	}
	return fmt.Sprintf("more than %d more", n)
}

// walkListing prints one page of a listing, or (all) every page, as a
// table or JSON lines; without all, a last line says that more entries
// follow and how to get them.
func walkListing(ctx context.Context, base, key, cmd, path string, q url.Values, limit int, all bool, format string, cols []string, row func(map[string]any) []any) error {
	q.Set("limit", fmt.Sprint(limit))
	tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	if format == "table" {
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	rows := 0
	for {
		data, err := apiclient.New(base, key, 30*time.Second).Call(ctx, "GET", path+"?"+q.Encode(), nil)
		if ae, ok := errors.AsType[*apiclient.Error](err); ok && ae.Status == http.StatusTooManyRequests && all {
			// Walking a long log runs into the rate limit: wait it out.
			wait := max(ae.RetryAfter, time.Second)
			fmt.Fprintf(os.Stderr, "auditrail %s: %d rows so far; rate limited, continuing in %s\n", cmd, rows, wait)
			if !retry.Sleep(ctx, wait) {
				return ctx.Err()
			}
			continue
		}
		if err != nil {
			return err
		}
		var page struct {
			Items      []map[string]any `json:"items"`
			HasMore    bool             `json:"has_more"`
			NextCursor string           `json:"next_cursor"`
		}
		if err := json.Unmarshal(data, &page); err != nil {
			return err
		}
		rows += len(page.Items)
		for _, it := range page.Items {
			if format == "json" {
				b, _ := json.Marshal(it)
				fmt.Println(string(b))
				continue
			}
			vals := row(it)
			parts := make([]string, len(vals))
			for i, v := range vals {
				if v == nil {
					v = "-"
				}
				parts[i] = fmt.Sprint(v)
			}
			fmt.Fprintln(tw, strings.Join(parts, "\t"))
		}
		if !page.HasMore {
			break
		}
		if !all {
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "auditrail %s: %d shown; %s follow: pass --all for every page (or --limit up to 100 per page)\n",
				cmd, rows, countMore(ctx, base, key, path, q, page.NextCursor))
			return nil
		}
		q.Set("cursor", page.NextCursor)
	}
	return tw.Flush()
}

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }
