package graph

import (
	"strings"
	"testing"
)

func TestHTMLToText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"<html><head><title>T</title><style>p{}</style></head><body><p>Hello <b>world</b></p><p>Two</p></body></html>", "Hello world\r\nTwo"},
		{"<div>a<br>b</div><script>alert(1)</script>", "a\r\nb"},
		{"<p>Fish &amp; chips &lt;3</p>", "Fish & chips <3"},
		{"<ul><li>one</li><li>two</li></ul>", "- one\r\n- two"},
		{"<pre>  keep\n  spaces</pre>", "  keep\r\n  spaces"},
		{"plain text, no markup", "plain text, no markup"},
		{"<p>déjà vu ☕ 👍</p>", "déjà vu ☕ 👍"},
		{"<p>a</p><hr><p>b</p>", "a\r\n________________________________\r\nb"},
	} {
		if got := htmlToText(tc.in); got != tc.want {
			t.Errorf("htmlToText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTextToHTMLRoundTrip(t *testing.T) {
	in := "line <1> & \"two\"\nline 2"
	h := textToHTML(in)
	if !strings.Contains(h, "line &lt;1&gt; &amp; &#34;two&#34;<br>") {
		t.Fatalf("textToHTML = %q", h)
	}
	if got := htmlToText(h); got != "line <1> & \"two\"\r\nline 2" {
		t.Fatalf("round trip = %q", got)
	}
}

func TestWellFormed(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{newID(restPrefix, 66), true},
		{newID(immutablePrefix, 65), true},
		{"starred", false},
		{"tasks", false},
		{"AAMkA", false},
		{"not base64 !!", false},
		{"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", false}, // base64 but not an Exchange id
	} {
		if got := wellFormed(tc.id); got != tc.want {
			t.Errorf("wellFormed(%q) = %v", tc.id, got)
		}
	}
}

func FuzzHTMLToText(f *testing.F) {
	for _, s := range []string{"<p>x</p>", "<pre>a\nb</pre>", "<<>>", "&amp;&#0;", "<script>", "<li><li>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := htmlToText(s)
		if strings.Contains(out, "\n\r\n\r\n") {
			t.Fatalf("more than one empty line in %q", out)
		}
	})
}
