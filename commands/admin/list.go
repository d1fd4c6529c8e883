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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/auditrail/auditrail/internal/apiclient"
	"github.com/auditrail/auditrail/internal/cli"
	"github.com/auditrail/auditrail/internal/retry"
	"github.com/auditrail/auditrail/schemas"
)

// The formats of `admin logs` and `admin executions`: table and json read
// the list route page by page; csv and jsonl read the export route, which
// answers every matching entry in one response.
const formatHelp = "table (columns), json (the list route's items, one per line), csv or jsonl (the export route: every matching entry; jsonl of a whole organization ends with its checkpoint, for auditrail verify --export)"

// listing is what `admin logs` and `admin executions` share: the filters
// every listing takes and how its output is written.
type listing struct {
	cmd, path string // "admin logs"; the list route's path
	q         url.Values
	limit     int
	all       bool
	format    string
	cols      []string
	row       func(map[string]any) []any
	// limitSet and allSet: given on the command line (csv and jsonl refuse them).
	limitSet, allSet bool
}

// listFlags adds the flags every listing takes and returns what reads them.
func listFlags(fs *cli.Flags, what string) func(l *listing) error {
	q := fs.FlagSet.String("q", "", "search expression, as the dashboard's and the API's q (e.g. 'resource_type:API_KEY -source:SYSTEM laptop')")
	since := fs.FlagSet.String("since", "", what+" at or after this time: RFC 3339 (2026-11-01T09:00:00Z), a date (2026-11-01, UTC) or an age (90m, 24h, 7d)")
	until := fs.FlagSet.String("until", "", what+" before this time (the forms of --since)")
	limit := fs.FlagSet.Int("limit", 50, "entries per page (1-100; table and json)")
	all := fs.FlagSet.Bool("all", false, "follow next_cursor to the last page (table and json; csv and jsonl always export every entry)")
	format := fs.FlagSet.String("format", "table", formatHelp)
	return func(l *listing) error {
		now := time.Now()
		for _, t := range []struct{ flag, param, value string }{{"--since", "since", *since}, {"--until", "until", *until}} {
			if t.value == "" {
				continue
			}
			at, err := ParseTime(t.value, now)
			if err != nil {
				return cli.UsageErrorf("%s: %v", t.flag, err)
			}
			l.q.Set(t.param, at.UTC().Format(time.RFC3339Nano))
		}
		if *q != "" {
			l.q.Set("q", *q)
		}
		switch *format {
		case "table", "json", "csv", "jsonl":
		default:
			return cli.UsageErrorf("--format: table, json, csv or jsonl")
		}
		l.limit, l.all, l.format = *limit, *all, *format
		fs.FlagSet.Visit(func(f *flag.Flag) {
			l.limitSet = l.limitSet || f.Name == "limit"
			l.allSet = l.allSet || f.Name == "all"
		})
		return nil
	}
}

// ParseTime reads a --since or --until: RFC 3339, a date (midnight UTC),
// or an age before now (a Go duration, or whole days as 7d).
func ParseTime(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if d, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(d); err == nil && n >= 0 && n <= 100*366 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give RFC 3339 (2026-11-01T09:00:00Z), a date (2026-11-01) or an age (90m, 24h, 7d)", v)
}

// adminLogs lists audit logs, one page or (--all) every page, or exports them.
func adminLogs(ctx context.Context, base, key string, args []string) error {
	fs := cli.NewFlags("auditrail admin logs ORG")
	project := fs.FlagSet.String("project", "", "project id")
	action := fs.FlagSet.String("action", "", "action: CREATED, UPDATED, DELETED, DISABLED (or AUDIT_ACTION_…)")
	source := fs.FlagSet.String("source", "", "source: API, DASHBOARD, CLI, SDK, SYSTEM (or AUDIT_SOURCE_…)")
	rtype := fs.FlagSet.String("resource-type", "", "resource type: HOOK, API_KEY, … (or RESOURCE_TYPE_…)")
	common := listFlags(fs, "entries")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return cli.UsageErrorf("usage: auditrail admin logs ORG [flags] (-h lists them)")
	}
	l := &listing{cmd: "admin logs", q: url.Values{}}
	if err := common(l); err != nil {
		return err
	}
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
		l.q.Set(f.param, name)
	}
	l.path = projectBase(map[string]string{"ORG": positional[0]}, *project) + "/audit_logs"
	l.cols = []string{"TIMESTAMP", "ACTION", "RESOURCE", "DISPLAY", "BY", "SOURCE"}
	l.row = func(it map[string]any) []any {
		return []any{it["timestamp"], strings.TrimPrefix(fmt.Sprint(it["action"]), "AUDIT_ACTION_"),
			strings.TrimPrefix(fmt.Sprint(it["resource_type"]), "RESOURCE_TYPE_"), it["resource_display"], it["display_name"],
			strings.TrimPrefix(fmt.Sprint(it["source"]), "AUDIT_SOURCE_")}
	}
	return l.run(ctx, base, key)
}

// adminExecutions lists tool executions, one page or (--all) every page, or exports them.
func adminExecutions(ctx context.Context, base, key string, args []string) error {
	fs := cli.NewFlags("auditrail admin executions ORG [PROJECT]")
	user := fs.FlagSet.String("user", "", "only the executions for this user")
	success := fs.FlagSet.String("success", "", "true or false")
	common := listFlags(fs, "executions started")
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) < 1 || len(positional) > 2 {
		return cli.UsageErrorf("usage: auditrail admin executions ORG [PROJECT] [flags] (-h lists them)")
	}
	l := &listing{cmd: "admin executions", q: url.Values{}}
	if err := common(l); err != nil {
		return err
	}
	if *success != "" && *success != "true" && *success != "false" {
		return cli.UsageErrorf("--success: true or false")
	}
	project := ""
	if len(positional) == 2 {
		project = positional[1]
	}
	if *user != "" {
		l.q.Set("user_id", *user)
	}
	if *success != "" {
		l.q.Set("success", *success)
	}
	l.path = projectBase(map[string]string{"ORG": positional[0]}, project) + "/tool_executions"
	l.cols = []string{"STARTED", "TOOL", "USER", "SUCCESS", "ERROR", "MS", "HOOKS"}
	l.row = func(it map[string]any) []any {
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
	return l.run(ctx, base, key)
}

func (l *listing) run(ctx context.Context, base, key string) error {
	if l.format == "csv" || l.format == "jsonl" {
		if l.limitSet || l.allSet {
			return cli.UsageErrorf("--limit and --all page the list (table, json); --format %s exports every matching entry", l.format)
		}
		return l.export(ctx, base, key, os.Stdout, os.Stderr)
	}
	return l.walk(ctx, base, key)
}

// export streams the export route's answer to w, with progress on stderr
// when it is a terminal, and a last line there saying what was written.
func (l *listing) export(ctx context.Context, base, key string, w io.Writer, stderr *os.File) error {
	q := maps.Clone(l.q)
	q.Set("format", l.format)
	resp, err := apiclient.New(base, key, 0).Open(ctx, l.path+"/export?"+q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	p := &progress{cmd: l.cmd, out: stderr, live: term.IsTerminal(int(stderr.Fd())), csv: l.format == "csv"}
	n, err := io.Copy(io.MultiWriter(w, p), resp.Body)
	p.done()
	if err != nil {
		// The server cuts the connection when the export fails midway (or
		// the credential is revoked): what was written is incomplete.
		return fmt.Errorf("the export ended early after %d bytes (%d rows); the output is incomplete: %w", n, p.rows(), err)
	}
	fmt.Fprintf(stderr, "auditrail %s: exported %d %s (%s)\n", l.cmd, p.rows(), map[bool]string{true: "rows", false: "lines"}[p.csv], byteSize(n))
	return nil
}

// progress counts what an export wrote and, on a terminal, shows it at
// most every 200 ms on one line.
type progress struct {
	cmd   string
	out   io.Writer
	live  bool
	csv   bool
	cr    bool // the last write ended in CR
	lines int64
	bytes int64
	last  time.Time
	shown bool
}

func (p *progress) Write(b []byte) (int, error) {
	p.bytes += int64(len(b))
	if p.csv {
		// Records end in CRLF; one may be split across two writes.
		if p.cr && len(b) > 0 && b[0] == '\n' {
			p.lines++
		}
		p.lines += int64(bytes.Count(b, []byte("\r\n")))
		p.cr = len(b) > 0 && b[len(b)-1] == '\r'
	} else {
		p.lines += int64(bytes.Count(b, []byte("\n")))
	}
	if p.live && time.Since(p.last) >= 200*time.Millisecond {
		p.last = time.Now()
		fmt.Fprintf(p.out, "\rauditrail %s: %d rows, %s …", p.cmd, p.rows(), byteSize(p.bytes))
		p.shown = true
	}
	return len(b), nil
}

// rows is the entries written: a CSV's header row is not one.
func (p *progress) rows() int64 {
	if p.csv && p.lines > 0 {
		return p.lines - 1
	}
	return p.lines
}

func (p *progress) done() {
	if p.shown {
		fmt.Fprint(p.out, "\r\033[K")
	}
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
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

// walk prints one page of the listing, or (all) every page, as a table or
// JSON lines; without all, a last line says that more entries follow and
// how to get them.
func (l *listing) walk(ctx context.Context, base, key string) error {
	q := l.q
	q.Set("limit", fmt.Sprint(l.limit))
	tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', 0)
	if l.format == "table" {
		fmt.Fprintln(tw, strings.Join(l.cols, "\t"))
	}
	rows := 0
	for {
		data, err := apiclient.New(base, key, 30*time.Second).Call(ctx, "GET", l.path+"?"+q.Encode(), nil)
		if ae, ok := errors.AsType[*apiclient.Error](err); ok && ae.Status == http.StatusTooManyRequests && l.all {
			// Walking a long log runs into the rate limit: wait it out.
			wait := max(ae.RetryAfter, time.Second)
			fmt.Fprintf(os.Stderr, "auditrail %s: %d rows so far; rate limited, continuing in %s\n", l.cmd, rows, wait)
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
			if l.format == "json" {
				b, _ := json.Marshal(it)
				fmt.Println(string(b))
				continue
			}
			fmt.Fprintln(tw, tableRow(l.row(it)))
		}
		if !page.HasMore {
			break
		}
		if !l.all {
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "auditrail %s: %d shown; %s follow: pass --all for every page (or --limit up to 100 per page; --format csv exports them all)\n",
				l.cmd, rows, countMore(ctx, base, key, l.path, q, page.NextCursor))
			return nil
		}
		q.Set("cursor", page.NextCursor)
	}
	return tw.Flush()
}

// tableRow is one tab-separated row of a table: nil as "-", and no value
// may break the row (tabs and line breaks become spaces).
func tableRow(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		if v == nil {
			v = "-"
		}
		parts[i] = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, fmt.Sprint(v))
	}
	return strings.Join(parts, "\t")
}
