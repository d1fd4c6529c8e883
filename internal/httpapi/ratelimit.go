package httpapi

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/auditrail/auditrail/internal/httpx"
	"github.com/auditrail/auditrail/internal/ratelimit"
)

// Limiter counts a request of a client.
type Limiter interface {
	Allow(ctx context.Context, client string) (ratelimit.Decision, error)
}

// RateLimit limits requests per client (the TCP peer, or what a trusted
// proxy forwarded, see httpx.TrustedProxies.ClientIP), keyed by
// httpx.LimitKey: an IPv4 address, or an IPv6 /64. It sets
// X-RateLimit-Limit, -Remaining and -Reset (seconds until the window ends);
// over the limit it answers 429 with Retry-After. It fails closed: when the
// limiter cannot decide (ratelimit.Limiter itself falls back to a local
// count, so only another Limiter can) the request is refused with 503 and
// Retry-After, and the outage is logged once, not per request.
func RateLimit(l Limiter, proxies httpx.TrustedProxies, log *slog.Logger) fiber.Handler {
	var failing atomic.Bool
	return func(c *fiber.Ctx) error {
		peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
		client := httpx.LimitKey(proxies.ClientIP(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor)))
		ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
		d, err := l.Allow(ctx, client)
		cancel()
		if err != nil {
			if !failing.Swap(true) {
				log.Error("rate limit unavailable; requests are refused until it answers", "err", err)
			}
			c.Set(fiber.HeaderRetryAfter, "1")
			return fiber.NewError(fiber.StatusServiceUnavailable, "rate limit unavailable; retry later")
		}
		if failing.Swap(false) {
			log.Info("rate limit answers again")
		}
		reset := max(0, int(time.Until(d.Reset).Seconds()+0.999))
		c.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
		c.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, d.Remaining)))
		c.Set("X-RateLimit-Reset", strconv.Itoa(reset))
		if !d.Allowed {
			c.Locals(localRateLimited, true)
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(max(1, reset)))
			return fiber.NewError(fiber.StatusTooManyRequests, "rate limit exceeded: "+strconv.Itoa(d.Limit)+" requests per window per client IP (per /64 for IPv6); retry after "+strconv.Itoa(max(1, reset))+"s")
		}
		return c.Next()
	}
}
