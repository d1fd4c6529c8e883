package httpapi

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
)

// Limiter counts a request of a client.
type Limiter interface {
	Allow(ctx context.Context, client string) (ratelimit.Decision, error)
}

// RateLimit limits requests per client IP (the TCP peer, or what a trusted
// proxy forwarded) and sets X-RateLimit-Limit, -Remaining and -Reset (seconds
// until the window ends); over the limit it answers 429 with Retry-After.
// When the shared counters cannot be reached it lets the request through
// and logs: the audit API stays readable while NATS recovers.
func RateLimit(l Limiter, proxies httpx.TrustedProxies, log *slog.Logger) fiber.Handler {
	return func(c *fiber.Ctx) error {
		peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
		client := proxies.ClientIP(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor)).String()
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		d, err := l.Allow(ctx, client)
		cancel()
		if err != nil {
			log.Warn("rate limit unavailable; request let through", "client", client, "err", err)
			return c.Next()
		}
		reset := max(0, int(time.Until(d.Reset).Seconds()+0.999))
		c.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
		c.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, d.Remaining)))
		c.Set("X-RateLimit-Reset", strconv.Itoa(reset))
		if !d.Allowed {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(1, reset)))
			return fiber.NewError(fiber.StatusTooManyRequests, "rate limit exceeded: "+strconv.Itoa(d.Limit)+" requests per window per client IP; retry after "+strconv.Itoa(max(1, reset))+"s")
		}
		return c.Next()
	}
}
