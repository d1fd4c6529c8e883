package httpapi

import (
	"time"

	"github.com/gofiber/fiber/v2"
)

// Observer counts the requests of an app (metrics.Registry implements it).
// route is the pattern of the matched route (/api/v1/orgs/:org_id/audit_logs),
// RouteUnmatched when none matched; never a raw path.
type Observer interface {
	ObserveRequest(route, method string, code int, d time.Duration)
	RateLimited(route string)
}

// RouteUnmatched is the route of a request that matched no route (404).
const RouteUnmatched = "unmatched"

// localRateLimited marks a request that RateLimit refused.
const localRateLimited = "auditrail.rate_limited"

// methods are the methods counted by name (others count as OTHER), as
// constants: c.Method() is a view of fasthttp's reused buffer, which a
// label kept beyond the request must not be.
var methods = map[string]string{fiber.MethodGet: fiber.MethodGet, fiber.MethodHead: fiber.MethodHead, fiber.MethodPost: fiber.MethodPost,
	fiber.MethodPut: fiber.MethodPut, fiber.MethodPatch: fiber.MethodPatch, fiber.MethodDelete: fiber.MethodDelete, fiber.MethodOptions: fiber.MethodOptions}

// Observe adds a middleware to app that reports every request to o; call
// it before registering the routes (nil o: nothing is added). The error
// of a handler is answered here, with the app's error handler, so that the
// status reported is the one sent.
func Observe(app *fiber.App, o Observer) {
	if o == nil {
		return
	}
	app.Use(func(c *fiber.Ctx) error {
		start := time.Now()
		mine := c.Route()
		err := c.Next()
		if err != nil {
			if herr := app.Config().ErrorHandler(c, err); herr != nil {
				_ = c.SendStatus(fiber.StatusInternalServerError)
			}
		}
		route := RouteUnmatched
		if r := c.Route(); r != mine && r != nil {
			route = r.Path
		}
		method, ok := methods[c.Method()]
		if !ok {
			method = "OTHER"
		}
		if limited, _ := c.Locals(localRateLimited).(bool); limited {
			o.RateLimited(route)
		}
		o.ObserveRequest(route, method, c.Response().StatusCode(), time.Since(start))
		return nil
	})
}
