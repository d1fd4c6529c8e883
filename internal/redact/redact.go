// Package redact hides credentials in connection strings, URLs and error
// messages before they are logged or printed. Every place that logs or
// prints a DSN or URL goes through it.
//
// It handles the forms in use: URLs with userinfo
// (clickhouse://user:pass@host:9000/db, mongodb://u:p@h1,h2/?authSource=admin,
// nats://token@host), secret query parameters (?password=, &token=, …),
// key=value DSNs (host=x password=y) and user:pass@tcp(host)/db.
// Redacting too much is acceptable; leaking is not.
package redact

import (
	"net"
	"regexp"
	"strings"
)

// Mask replaces a hidden value.
const Mask = "xxxxx"

// secretParam matches key=value pairs whose key names a credential, in a
// query string or a key=value DSN. The value runs to the next separator;
// a quoted value to its closing quote.
var secretParam = regexp.MustCompile(`(?i)((?:^|[?&;,\s])[a-z0-9_.\-]*(?:pass|pwd|secret|token|key|credential|auth_?token|signature|sig)[a-z0-9_.\-]*\s*=\s*)('[^']*'?|"[^"]*"?|[^&;,\s]*)`)

// schemeless user:pass@ at the start (mysql-style DSNs: user:pass@tcp(host)/db).
var leadingUserinfo = regexp.MustCompile(`^([^:@/\s]*):[^\s]*@`)

// URL returns s with the password (or token) of its userinfo and every
// secret-looking parameter replaced by Mask. Anything not recognised is
// returned as is.
func URL(s string) string {
	if s == "" {
		return s
	}
	out := s
	if i := strings.Index(out, "://"); i >= 0 {
		out = out[:i+3] + userinfo(out[i+3:])
	} else if strings.Contains(out, "@") {
		if m := leadingUserinfo.FindStringSubmatchIndex(out); m != nil {
			out = out[:m[3]] + ":" + Mask + "@" + out[m[1]:]
		}
	}
	return secretParam.ReplaceAllString(out, "${1}"+Mask)
}

// userinfo redacts the userinfo of the part of a URL after "scheme://".
// A password may carry unescaped '/', '?', '#' or '@': when a "user:"
// precedes the first '@', everything up to the last '@' is the userinfo
// (which may over-redact a path holding '@', never leak).
func userinfo(rest string) string {
	firstAt := strings.Index(rest, "@")
	if firstAt < 0 {
		return rest
	}
	if c := strings.Index(rest, ":"); c >= 0 && c < firstAt && !strings.ContainsAny(rest[:c], "/?#") {
		return rest[:c] + ":" + Mask + rest[strings.LastIndex(rest, "@"):]
	}
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	if firstAt < end {
		// A bare userinfo may be a token (nats://TOKEN@host): hide it all.
		return Mask + rest[strings.LastIndex(rest[:end], "@"):]
	}
	return rest
}

// String redacts every URL-like word of a free text (an error message, a
// log line): each whitespace- or quote-delimited token holding "://", "@"
// or a secret parameter.
func String(s string) string {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '"' || r == '\'' || r == '\n' || r == '\t' || r == '`' })
	seen := map[string]bool{}
	for _, f := range fields {
		if seen[f] {
			continue
		}
		seen[f] = true
		if r := URL(f); r != f {
			s = strings.ReplaceAll(s, f, r)
		}
	}
	return s
}

// Error returns err with each of secrets (and any URL in its message)
// redacted in its message; errors.Is and errors.As still see err.
func Error(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := msg
	for _, sec := range secrets {
		if sec != "" {
			red = strings.ReplaceAll(red, sec, URL(sec))
			if u := URL(sec); u == sec && len(sec) >= 4 && !isAddress(sec) {
				// Not a URL or an address: a raw secret value, hidden whole.
				red = strings.ReplaceAll(red, sec, Mask)
			}
		}
	}
	red = String(red)
	if red == msg {
		return err
	}
	return &redacted{msg: red, err: err}
}

// isAddress reports whether s is a URL (scheme://…) or a host:port, which
// URL has already stripped of any credential: shown, so that an error
// names what it could not reach.
func isAddress(s string) bool {
	if strings.Contains(s, "://") {
		return true
	}
	_, port, err := net.SplitHostPort(s)
	return err == nil && port != ""
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
