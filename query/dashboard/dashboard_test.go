package dashboard

import (
	"net/http/httptest"

	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// TestModulesPreloaded: index.html preloads exactly the modules of
// static/js but main.js (which its script tag loads): a module added
// without its preload would be fetched a level later (first render), a
// preload of a removed module would 404.
func TestModulesPreloaded(t *testing.T) {
	index := string(assets["index.html"].body)
	var preloaded []string
	for _, m := range regexp.MustCompile(`<link rel="modulepreload" href="static/(js/[^"?]+)\?v=`+version+`">`).FindAllStringSubmatch(index, -1) {
		preloaded = append(preloaded, m[1])
	}
	var modules []string
	for name := range assets {
		if strings.HasPrefix(name, "js/") && strings.HasSuffix(name, ".js") && name != "js/main.js" {
			modules = append(modules, name)
		}
	}
	slices.Sort(preloaded)
	slices.Sort(modules)
	if !slices.Equal(preloaded, modules) {
		t.Errorf("index.html preloads %v\nstatic/js holds %v", preloaded, modules)
	}
	if !strings.Contains(index, `<script type="module" src="static/js/main.js?v=`+version+`"></script>`) {
		t.Errorf("index.html does not load main.js")
	}
}

// TestNoInlineCode: no file of the page holds what the CSP refuses (an
// inline script or handler, a style attribute, eval): it would fail in the
// browser only, silently.
func TestNoInlineCode(t *testing.T) {
	bad := regexp.MustCompile(`<script>|<script [^>]*>[^<]|\son[a-z]+=|\sstyle=|\beval\(|new Function\(|innerHTML|outerHTML\s*=|insertAdjacentHTML|document\.write`)
	for name, a := range assets {
		if !strings.HasSuffix(name, ".html") && !strings.HasSuffix(name, ".js") {
			continue
		}
		if m := bad.FindString(string(a.body)); m != "" {
			t.Errorf("%s holds %q", name, m)
		}
	}
}

// TestReferencesVersioned: every reference of the page to its own files
// (index.html's links, each module's imports) names a file that exists,
// with the build's version; nothing refers to a file unversioned.
func TestReferencesVersioned(t *testing.T) {
	ref := regexp.MustCompile(`(?:from\s*"\./|(?:href|src)="static/)([^"]+)"`)
	refs := 0
	for name, a := range assets {
		dir := ""
		if strings.HasPrefix(name, "js/") {
			dir = "js/"
		}
		for _, m := range ref.FindAllStringSubmatch(string(a.body), -1) {
			refs++
			file, v, ok := strings.Cut(m[1], "?v=")
			if !ok || v != version {
				t.Errorf("%s refers to %q without the version %s", name, m[1], version)
			}
			if _, ok := assets[dir+file]; !ok {
				t.Errorf("%s refers to %q: no such file", name, dir+file)
			}
		}
	}
	if refs < 20 {
		t.Errorf("only %d references found: the pattern no longer matches the page", refs)
	}
}

// TestCaching: index.html is revalidated on every load; a file asked for
// with the build's version is cached for a year; without it (or with
// another), revalidated; a matching ETag answers 304.
func TestCaching(t *testing.T) {
	app := fiber.New()
	Register(app)
	for _, tc := range []struct {
		path, cache string
		status      int
	}{
		{"/dashboard/", "no-cache", 200},
		{"/dashboard/?v=" + version, "no-cache", 200},
		{"/dashboard/static/js/main.js?v=" + version, "public, max-age=31536000, immutable", 200},
		{"/dashboard/static/app.css?v=" + version, "public, max-age=31536000, immutable", 200},
		{"/dashboard/static/js/main.js", "no-cache", 200},
		{"/dashboard/static/js/main.js?v=0123456789abcdef", "no-cache", 200},
		{"/dashboard/static/index.html?v=" + version, "", 404},
	} {
		res, err := app.Test(httptest.NewRequest("GET", tc.path, nil))
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != tc.status || res.Header.Get("Cache-Control") != tc.cache && tc.status == 200 {
			t.Errorf("GET %s: %d, Cache-Control %q; want %d, %q", tc.path, res.StatusCode, res.Header.Get("Cache-Control"), tc.status, tc.cache)
		}
		if res.StatusCode == 200 {
			if csp := res.Header.Get("Content-Security-Policy"); csp != CSP {
				t.Errorf("GET %s: CSP %q", tc.path, csp)
			}
			req := httptest.NewRequest("GET", tc.path, nil)
			req.Header.Set("If-None-Match", res.Header.Get("ETag"))
			if again, err := app.Test(req); err != nil || again.StatusCode != 304 {
				t.Errorf("GET %s with its ETag: %v, want 304", tc.path, again.StatusCode)
			}
		}
	}
}
