package hookproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func BenchmarkOnceOnly(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, `{"code":"OK"}`)
	}))
	defer srv.Close()
	p := New(DefaultConfig(), nil)
	h := hook("h", srv.URL, FailClosed)
	st, _ := p.state(h, Pre)
	c := st.client
	pc := PointConfig{Path: "/pre", Timeout: 5 * time.Second}
	body, _ := json.Marshal(preReq())
	for b.Loop() {
		if _, err := p.once(context.Background(), c, h, pc, body); err != nil {
			b.Fatal(err)
		}
		if _, err := p.once(context.Background(), c, h, pc, body); err != nil {
			b.Fatal(err)
		}
	}
}
