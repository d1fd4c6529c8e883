// Package browser gives tests a headless chromium driven by chromedp: one
// browser per test binary, started on first use, stopped by testenv.Main or
// testenv.MainNoLeaks. It is its own package so that only the tests that
// drive a browser link chromedp.
package browser

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/auditrail/auditrail/internal/testenv"
)

var shared struct {
	once sync.Once
	ctx  context.Context
	err  error
}

// Tab opens a new tab of the package's browser (headless, NoSandbox, the
// chromium of testenv.Chromium) and closes it when the test ends. Without
// chromium the test fails under AUDITRAIL_REQUIRE_ALL=1 and skips
// otherwise. Give actions a timeout with context.WithTimeout on the tab.
func Tab(t testing.TB) context.Context {
	t.Helper()
	path := testenv.Chromium(t)
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU)
		actx, stopAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, stopBrowser := chromedp.NewContext(actx)
		testenv.OnStop(func() { stopBrowser(); stopAlloc() })
		// Start the browser now, on a context without a deadline: it lives
		// as long as bctx.
		shared.ctx, shared.err = bctx, chromedp.Do(bctx)
	})
	if shared.err != nil {
		testenv.Missing(t, "chromium %s does not start: %v", path, shared.err)
	}
	// A browser context per test: its cookies, cache and connections go with it.
	tab, closeTab := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(closeTab)
	ctx, cancel := context.WithTimeout(tab, 60*time.Second)
	t.Cleanup(cancel)
	// The tab's first Run creates it; do that here, without the timeout.
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("new chromium tab: %v", err)
	}
	return ctx
}
