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
	"io/fs"
	"path"
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

// assets reads every embedded file once; a file of an unknown type is a
// programming error.
var assets = func() map[string]asset {
	out := map[string]asset{}
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			panic("dashboard: no content type for " + p)
		}
		sum := sha256.Sum256(b)
		out[strings.TrimPrefix(p, "static/")] = asset{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return out
}()

// Register mounts the page: GET /dashboard redirects to /dashboard/, which
// answers index.html whatever its query (the URL holds the view); the
// modules and the style sheet are under /dashboard/static/. Files are
// revalidated on every load (ETag), so that an upgrade is seen at once.
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
	c.Set(fiber.HeaderCacheControl, "no-cache")
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
