package admin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{in: "2026-11-01T09:00:00Z", want: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)},
		{in: "2026-11-01T09:00:00+02:00", want: time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC)},
		{in: "2026-11-01", want: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{in: "7d", want: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)},
		{in: "0d", want: now},
		{in: "90m", want: now.Add(-90 * time.Minute)},
		{in: "24h", want: now.Add(-24 * time.Hour)},
		{in: "yesterday", err: true},
		{in: "-5h", err: true},
		{in: "-1d", err: true},
		{in: "2026-13-01", err: true},
		{in: "99999999d", err: true},
		{in: "", err: true},
	} {
		got, err := ParseTime(c.in, now)
		if c.err {
			if err == nil || !strings.Contains(err.Error(), "RFC 3339") {
				t.Errorf("ParseTime(%q) = %v, %v: want an error naming the forms", c.in, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(c.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestPrintTable(t *testing.T) {
	for _, c := range []struct {
		name, data, want string
		err              bool
	}{
		{
			name: "items, in the API's order, nested objects left out",
			data: `{"items":[{"id":"o1","name":"Acme","role":null,"meta":{"x":1},"scopes":["a","b"],"n":3,"ok":true},
			                {"id":"o2","name":"Tab\there","role":"owner","extra":"late"}]}`,
			want: "ID  NAME      ROLE   SCOPES  N  OK    EXTRA\n" +
				"o1  Acme      -      a,b     3  true  -\n" +
				"o2  Tab here  owner  -       -  -     late\n",
		},
		{name: "a bare array", data: `[{"k":"v"}]`, want: "K\nv\n"},
		{name: "empty", data: `{"items":[]}`, want: "(0 items)\n"},
		{name: "no list", data: `{"id":"x"}`, err: true},
		{name: "not objects", data: `[1,2]`, err: true},
	} {
		var b bytes.Buffer
		err := printTable(&b, json.RawMessage(c.data))
		if c.err {
			if err == nil {
				t.Errorf("%s: no error; printed %q", c.name, b.String())
			}
			continue
		}
		if err != nil || b.String() != c.want {
			t.Errorf("%s: %v\ngot:\n%s\nwant:\n%s", c.name, err, b.String(), c.want)
		}
	}
}

func TestProgressCountsRows(t *testing.T) {
	var out bytes.Buffer
	p := &progress{cmd: "admin logs", out: &out, csv: true}
	for _, chunk := range []string{"id,event_id\r\n", "1,a\r", "\n2,\"multi\nline\"\r\n", "3,c\r\n"} {
		if _, err := p.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if p.rows() != 3 || out.Len() != 0 {
		t.Errorf("rows %d (want 3: a CRLF split across writes counts once), printed %q off a terminal", p.rows(), out.String())
	}
	j := &progress{cmd: "admin logs", out: &out}
	_, _ = j.Write([]byte("{\"a\":1}\n{\"a\":2}\n"))
	if j.rows() != 2 {
		t.Errorf("jsonl rows %d, want 2", j.rows())
	}
}
