package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFiles are the user documentation: the README and docs/*.md.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	paths, _ := filepath.Glob("../../docs/*.md")
	for _, p := range append(paths, "../../README.md") {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel("../..", p)
		files[rel] = string(raw)
	}
	if len(files) < 10 {
		t.Fatalf("%d documentation files", len(files))
	}
	return files
}

var (
	inlineCodeRe = regexp.MustCompile("`[^`]*`")
	mdLinkRe     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe    = regexp.MustCompile("(?m)^#{1,6} (.+)$")
	// issueRe finds internal issue numbers ("issue 24", "#24").
	issueRe = regexp.MustCompile(`(?i)\bissues? #?[0-9]+|(^|[\s(])#[0-9]+\b`)
)

// slug is GitHub's anchor of a heading: lower case, punctuation but '-'
// and '_' dropped, spaces as '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '—' && r != '…' && r != '→' && r != '×':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The README is a guide of at most 250 lines; no document names an
// internal issue number; every relative link (and its #anchor) of the
// README and docs/ leads somewhere.
func TestDocsAreAGuide(t *testing.T) {
	files := docFiles(t)
	if n := strings.Count(files["README.md"], "\n"); n > 250 {
		t.Errorf("README.md has %d lines: at most 250 (the rest belongs in docs/)", n)
	}
	anchors := map[string]map[string]bool{}
	for name, text := range files {
		anchors[name] = map[string]bool{}
		// Headings inside code blocks are not headings.
		for _, m := range headingRe.FindAllStringSubmatch(stripCode(text), -1) {
			anchors[name][slug(strings.Trim(m[1], "` "))] = true
		}
	}
	for name, text := range files {
		if m := issueRe.FindString(stripCode(text)); m != "" {
			t.Errorf("%s names an internal issue number (%q): say what changed instead", name, strings.TrimSpace(m))
		}
		for _, m := range mdLinkRe.FindAllStringSubmatch(stripCode(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := name
			if file != "" {
				resolved = filepath.Clean(filepath.Join(filepath.Dir(name), file))
				if _, err := os.Stat(filepath.Join("../..", resolved)); err != nil {
					t.Errorf("%s links to %s: no such file", name, target)
					continue
				}
			}
			if anchor != "" {
				if a, ok := anchors[resolved]; ok && !a[anchor] {
					t.Errorf("%s links to %s: %s has no heading #%s", name, target, resolved, anchor)
				}
			}
		}
	}
}

// stripCode removes fenced code blocks and inline code spans.
func stripCode(s string) string {
	var out strings.Builder
	fenced := false
	for _, line := range strings.SplitAfter(s, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out.WriteString(inlineCodeRe.ReplaceAllString(line, ""))
		}
	}
	return out.String()
}
