// Package admin is `auditrail admin NOUN VERB`: the admin and audit API
// from a terminal (source CLI), through apiclient.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/auditrail/auditrail/internal/apiclient"
	"github.com/auditrail/auditrail/internal/cli"
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
	fmt.Fprintln(w, "  logs ORG [--project P] [--action A] [--source S] [--resource-type R] [--q Q] [--since T] [--until T] [--limit N] [--all] [--format table|json|csv|jsonl]")
	fmt.Fprintln(w, "  executions ORG [PROJECT] [--user U] [--success true|false] [--q Q] [--since T] [--until T] [--limit N] [--all] [--format table|json|csv|jsonl]")
	fmt.Fprintln(w, "\nEvery list verb also takes --format table. 'auditrail admin NOUN VERB -h' (and 'admin logs -h') shows a command's flags.")
	fmt.Fprintln(w, "logs and executions --format csv|jsonl export every matching entry through the export route (progress on a terminal).")
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
	if len(rest) >= 1 && rest[0] == "logs" {
		return adminLogs(ctx, *base, *key, rest[1:])
	}
	if len(rest) >= 1 && rest[0] == "executions" {
		return adminExecutions(ctx, *base, *key, rest[1:])
	}
	if slices.ContainsFunc(rest, isHelp) && (len(rest) < 2 || !slices.ContainsFunc(rest[2:], isHelp)) {
		// `admin --help`, `admin org --help`, `admin org create --help`.
		adminUsage(os.Stdout)
		return flag.ErrHelp
	}
	if len(rest) >= 1 && rest[0] == "providers" {
		rest[0] = "provider" // as the issue spells it
	}
	if len(rest) < 2 {
		adminUsage(os.Stderr)
		return cli.UsageErrorf("name a command")
	}
	for _, c := range adminCommands() {
		if c.noun != rest[0] || c.verb != rest[1] {
			continue
		}
		cfs := cli.NewFlags(strings.TrimSpace("auditrail admin " + c.noun + " " + c.verb + " " + strings.Join(c.args, " ")))
		build := c.flags(cfs)
		format := "json"
		if c.verb == "list" {
			cfs.FlagSet.StringVar(&format, "format", "json", "json (the API's answer) or table (one row per item, its scalar fields as columns)")
		}
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
		if format != "json" && format != "table" {
			return cli.UsageErrorf("--format: json or table")
		}
		data, err := apiclient.New(*base, *key, 30*time.Second).Call(ctx, method, path, body)
		if err != nil {
			return err
		}
		if format == "table" {
			return printTable(os.Stdout, data)
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

func isHelp(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }
