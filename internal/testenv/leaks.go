package testenv

import "go.uber.org/goleak"

// LeakOptions are the goleak options of every package's TestMain: they
// ignore the goroutines that libraries keep for the life of the process by
// design (fasthttp's server clock, and its worker-pool janitor, which ends
// up to 10 s after the server stops).
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
	}
}
