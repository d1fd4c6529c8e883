// Package dashboard serves the audit dashboard: one page of plain ES
// modules and a style sheet, embedded in the binary, that reads and
// changes the platform through its public API only (bearer credential
// kept in the tab's sessionStorage). The page is served with a
// Content-Security-Policy that allows scripts and styles from this origin
// alone: no inline script, no eval, no CDN.
package dashboard

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// Path is where the page answers.
const Path = "/dashboard/"

//go:embed static
var files embed.FS

// CSP is the page's Content-Security-Policy: its own modules and style
// sheet, calls to its own origin (the API), images from itself or data:
// URLs (icons), nothing inline, nothing framed, no form posts, no base.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is a static file with its content type and a validator.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".txt":  "text/plain; charset=utf-8",
}

// The page's references to its own files: a module's relative imports and
// index.html's links to static/… . Each gets ?v=<version>.
var (
	importRef = regexp.MustCompile(`(\bfrom\s*"\./[a-z0-9-]+\.js)(")`)
	staticRef = regexp.MustCompile(`((?:href|src)="static/[a-z0-9/-]+\.(?:js|css|svg|png))(")`)
)

// version is a hash of every embedded file, and assets the files with
// every reference to another file versioned: a file asked for with this
// version is cached for a year (no revalidation on later loads: a first
// render without a dozen conditional requests), and the next build with
// any change has another version. index.html itself is revalidated on
// every load (ETag), so it names the current version at once.
var version, assets = func() (string, map[string]asset) {
	raw := map[string][]byte{}
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		if _, ok := contentTypes[path.Ext(p)]; !ok {
			panic("dashboard: no content type for " + p)
		}
		raw[strings.TrimPrefix(p, "static/")] = b
		return nil
	})
	if err != nil {
		panic(err)
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	slices.Sort(names)
	h := sha256.New()
	for _, name := range names {
		fmt.Fprintf(h, "%s %d\n", name, len(raw[name]))
		h.Write(raw[name])
	}
	v := hex.EncodeToString(h.Sum(nil)[:8])
	out := map[string]asset{}
	for name, b := range raw {
		switch path.Ext(name) {
		case ".js":
			b = importRef.ReplaceAll(b, []byte("${1}?v="+v+"${2}"))
		case ".html":
			b = staticRef.ReplaceAll(b, []byte("${1}?v="+v+"${2}"))
		}
		sum := sha256.Sum256(b)
		out[name] = asset{body: b, contentType: contentTypes[path.Ext(name)], etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return v, out
}()

// Register mounts the page: GET /dashboard redirects to /dashboard/, which
// answers index.html whatever its query (the URL holds the view); the
// modules and the style sheet are under /dashboard/static/, named with the
// build's version (see version).
func Register(r fiber.Router) {
	// One route for both: Fiber's routing is not strict about the final slash.
	r.Get("/dashboard", func(c *fiber.Ctx) error {
		if !strings.HasSuffix(string(c.Request().URI().Path()), "/") {
			return c.Redirect(Path, fiber.StatusMovedPermanently)
		}
		return send(c, "index.html")
	})
	r.Get(Path+"static/*", func(c *fiber.Ctx) error {
		name := c.Params("*")
		if name == "index.html" || strings.Contains(name, "..") {
			return fiber.NewError(fiber.StatusNotFound, "no such file")
		}
		return send(c, name)
	})
}

func send(c *fiber.Ctx, name string) error {
	a, ok := assets[name]
	if !ok {
		return fiber.NewError(fiber.StatusNotFound, "no such file")
	}
	c.Set(fiber.HeaderContentType, a.contentType)
	if name != "index.html" && c.Query("v") == version {
		c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	} else {
		c.Set(fiber.HeaderCacheControl, "no-cache")
	}
	c.Set(fiber.HeaderETag, a.etag)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set("Cross-Origin-Resource-Policy", "same-origin")
	c.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderContentSecurityPolicy, CSP)
	if c.Get(fiber.HeaderIfNoneMatch) == a.etag {
		return c.SendStatus(fiber.StatusNotModified)
	}
	return c.Status(fiber.StatusOK).Send(a.body)
}
