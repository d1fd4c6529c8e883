package graph

import (
	stdhtml "html"
	"strings"

	"golang.org/x/net/html"
)

// htmlToText converts an HTML body to text as Exchange does for
// Prefer: outlook.body-content-type="text": markup, scripts, styles and
// the head dropped, block elements and <br> ending lines, entities decoded.
func htmlToText(s string) string {
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		return s
	}
	var b strings.Builder
	var walk func(n *html.Node, pre bool)
	newline := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	walk = func(n *html.Node, pre bool) {
		switch n.Type {
		case html.TextNode:
			t := n.Data
			if !pre {
				t = strings.Join(strings.Fields(t), " ")
				if t == "" {
					if strings.TrimSpace(n.Data) == "" && len(n.Data) > 0 && b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") && !strings.HasSuffix(b.String(), " ") {
						b.WriteByte(' ')
					}
					return
				}
				if startsSpace(n.Data) && b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") && !strings.HasSuffix(b.String(), " ") {
					b.WriteByte(' ')
				}
				b.WriteString(t)
				if endsSpace(n.Data) {
					b.WriteByte(' ')
				}
				return
			}
			b.WriteString(t)
			return
		case html.ElementNode:
			switch n.Data {
			case "script", "style", "head", "title", "noscript", "template":
				return
			case "br":
				b.WriteByte('\n')
				return
			case "hr":
				newline()
				b.WriteString("________________________________\n")
				return
			case "pre":
				pre = true
			}
		}
		block := n.Type == html.ElementNode && isBlock(n.Data)
		if block {
			newline()
		}
		if n.Type == html.ElementNode && n.Data == "li" {
			b.WriteString("- ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, pre)
		}
		if block {
			newline()
		}
	}
	walk(doc, false)
	// Trim the spaces around line ends and keep at most one empty line.
	lines := strings.Split(b.String(), "\n")
	out := make([]string, 0, len(lines))
	blank := 0
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.Trim(strings.Join(out, "\r\n"), "\r\n")
}

func startsSpace(s string) bool { return s != "" && strings.ContainsRune(" \t\r\n\f", rune(s[0])) }
func endsSpace(s string) bool   { return s != "" && strings.ContainsRune(" \t\r\n\f", rune(s[len(s)-1])) }

func isBlock(tag string) bool {
	switch tag {
	case "p", "div", "li", "ul", "ol", "tr", "table", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote",
		"section", "article", "header", "footer", "pre", "dl", "dt", "dd", "body", "address":
		return true
	}
	return false
}

// textToHTML wraps a text body in the HTML Exchange answers for
// Prefer: outlook.body-content-type="html".
func textToHTML(s string) string {
	var b strings.Builder
	b.WriteString("<html><head>\r\n<meta http-equiv=\"Content-Type\" content=\"text/html; charset=utf-8\">\r\n</head>\r\n<body>\r\n<div class=\"PlainText\">")
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("<br>\r\n")
		}
		b.WriteString(stdhtml.EscapeString(l))
	}
	b.WriteString("</div>\r\n</body>\r\n</html>\r\n")
	return b.String()
}

// asHTML answers the body's content as HTML (text escaped and wrapped).
func asHTML(b itemBody) string {
	if strings.EqualFold(b.ContentType, "html") {
		return b.Content
	}
	return textToHTML(b.Content)
}

// innerBody answers the content of an HTML document's body element (the
// whole string when it has none), so a quoted message nests in a reply.
func innerBody(s string) string {
	lower := strings.ToLower(s)
	i := strings.Index(lower, "<body")
	if i < 0 {
		return s
	}
	j := strings.IndexByte(lower[i:], '>')
	if j < 0 {
		return s
	}
	start := i + j + 1
	end := strings.LastIndex(lower, "</body>")
	if end < start {
		end = len(s)
	}
	return s[start:end]
}
