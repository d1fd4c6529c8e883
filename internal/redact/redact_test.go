package redact_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/redact"
)

func TestURL(t *testing.T) {
	for _, c := range []struct {
		in, want string
		hidden   []string // must not survive
	}{
		{"clickhouse://default:s3cr3t@db:9000/audit", "clickhouse://default:xxxxx@db:9000/audit", []string{"s3cr3t"}},
		{"clickhouse://db:9000/audit", "clickhouse://db:9000/audit", nil},
		{"clickhouse://db:9000/audit?username=u&password=s3cr3t&dial_timeout=1s", "clickhouse://db:9000/audit?username=u&password=xxxxx&dial_timeout=1s", []string{"s3cr3t"}},
		{"tcp://db:9000?password=s3cr3t", "tcp://db:9000?password=xxxxx", []string{"s3cr3t"}},
		{"mongodb://app:p%40ss@h1:27017,h2:27017/db?authSource=admin&replicaSet=rs0", "mongodb://app:xxxxx@h1:27017,h2:27017/db?authSource=admin&replicaSet=rs0", []string{"p%40ss"}},
		{"mongodb://app:p/a?s@s@host/db", "mongodb://app:xxxxx@host/db", []string{"p/a?s@s"}},
		{"nats://s3cr3ttoken@nats:4222", "nats://xxxxx@nats:4222", []string{"s3cr3ttoken"}},
		{"nats://nats:4222", "nats://nats:4222", nil},
		{"postgres://u@host/db?sslmode=disable&sslpassword=s3cr3t", "postgres://xxxxx@host/db?sslmode=disable&sslpassword=xxxxx", []string{"s3cr3t"}},
		{"host=db user=u password=s3cr3t dbname=x", "host=db user=u password=xxxxx dbname=x", []string{"s3cr3t"}},
		{"host=db password='s3 cr3t' dbname=x", "host=db password=xxxxx dbname=x", []string{"s3 cr3t", "cr3t"}},
		{"app:s3cr3t@tcp(127.0.0.1:3306)/db", "app:xxxxx@tcp(127.0.0.1:3306)/db", []string{"s3cr3t"}},
		{"https://hooks.example.com/access?api_key=s3cr3t&x=1", "https://hooks.example.com/access?api_key=xxxxx&x=1", []string{"s3cr3t"}},
		{"https://hooks.example.com/a?access_token=s3cr3t", "https://hooks.example.com/a?access_token=xxxxx", []string{"s3cr3t"}},
		{"", "", nil},
		{"127.0.0.1:8080", "127.0.0.1:8080", nil},
	} {
		got := redact.URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		for _, h := range c.hidden {
			if strings.Contains(got, h) {
				t.Errorf("URL(%q) = %q still holds %q", c.in, got, h)
			}
		}
	}
}

func TestError(t *testing.T) {
	sentinel := errors.New("boom")
	dsn := "clickhouse://u:s3cr3t@db:9000/x"
	err := fmt.Errorf("parse %q: %w", dsn, sentinel)
	red := redact.Error(err, dsn)
	if strings.Contains(red.Error(), "s3cr3t") || !errors.Is(red, sentinel) || !strings.Contains(red.Error(), "db:9000") {
		t.Fatalf("%v", red)
	}
	raw := fmt.Errorf("bad key %s", "rawsecretvalue")
	if got := redact.Error(raw, "rawsecretvalue").Error(); strings.Contains(got, "rawsecretvalue") {
		t.Fatal(got)
	}
	// Redaction hides only secrets: an address or a URL without
	// credentials stays readable.
	for _, addr := range []string{"127.0.0.1:8080", "nats://127.0.0.1:4222", "http://localhost:8080/api"} {
		if got := redact.Error(fmt.Errorf("parse %q/api/v1/orgs: boom", addr), addr).Error(); !strings.Contains(got, addr) {
			t.Errorf("%s hidden: %s", addr, got)
		}
	}
	if got := redact.Error(fmt.Errorf("connect %s: refused", "nats://tok3n1234@h:4222"), "nats://tok3n1234@h:4222").Error(); strings.Contains(got, "tok3n1234") || !strings.Contains(got, "h:4222") {
		t.Errorf("token URL: %s", got)
	}
	if redact.Error(nil, dsn) != nil {
		t.Fatal("nil")
	}
	plain := errors.New("nothing to hide")
	if redact.Error(plain) != plain {
		t.Fatal("unchanged errors are returned as is")
	}
	if got := redact.String(`dial "nats://tok123456@h:4222": refused`); strings.Contains(got, "tok123456") {
		t.Fatal(got)
	}
}

// FuzzURL: whatever the user and password, the password never survives in
// any of the DSN forms.
func FuzzURL(f *testing.F) {
	f.Add("default", "s3cr3t")
	f.Add("u", "p@ss/w?rd#x")
	f.Add("", "tok:en")
	f.Fuzz(func(t *testing.T, user, pass string) {
		if len(pass) < 6 || strings.ContainsAny(user, "@:/?#&;, \t\n'\"=") || strings.ContainsAny(pass, " \t\n\r\v\f'\"x") {
			return // not a credential the forms below can carry
		}
		esc := url.QueryEscape(pass)
		forms := []string{
			"clickhouse://" + user + ":" + url.PathEscape(pass) + "@db:9000/audit",
			"clickhouse://" + user + ":" + pass + "@db:9000/audit",
			"mongodb://" + user + ":" + url.PathEscape(pass) + "@h1:27017,h2:27017/db?authSource=admin",
			"clickhouse://db:9000/audit?username=" + user + "&password=" + esc,
			"host=db user=" + user + " password=" + esc + " dbname=x",
		}
		for _, in := range forms {
			got := redact.URL(in)
			for _, secret := range []string{pass, esc, url.PathEscape(pass)} {
				// The secret may also be a piece of the template (or of
				// the user): it leaks when redaction removed none of its
				// occurrences.
				if n := strings.Count(in, secret); n > 0 && strings.Count(got, secret) >= n {
					t.Fatalf("URL(%q) = %q leaks %q", in, got, secret)
				}
			}
		}
	})
}
