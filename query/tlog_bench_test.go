package query_test

import (
	"io"
	"net/http/httptest"
	"testing"
)

// BenchmarkExportJSONL measures the JSONL export of a sequenced log of
// 50,000 entries from SQLite, through the route (rows/s reported).
func BenchmarkExportJSONL(b *testing.B) {
	const n = 50_000
	e := newLogEnv(b, n)
	for _, format := range []string{"jsonl", "csv"} {
		b.Run(format, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", "/api/v1/orgs/"+e.org.String()+"/audit_logs/export?format="+format, nil)
				req.Header.Set("Authorization", "Bearer k")
				resp, err := e.app.Test(req, -1)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
