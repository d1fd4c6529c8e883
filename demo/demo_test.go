package demo

import (
	"strings"
	"testing"
)

// The demo's shell lines carry what is known at this start: the keys only
// when they were just made, the NATS lines only with the embedded server.
func TestDemoExports(t *testing.T) {
	ids := IDs{Org: "o-1", Project: "p-1"}
	cases := []struct {
		name      string
		key       string
		env       Env
		want, not []string
	}{
		{"first start", "ak_x", Env{API: "http://127.0.0.1:8080", NATS: "nats://127.0.0.1:4222", AdminCreds: "/d/nats/admin.creds", BootKey: "ark_y"},
			[]string{"export ORG=o-1 PROJECT=p-1 KEY=ak_x\n", "export AUDITRAIL_URL=http://127.0.0.1:8080 AUDITRAIL_KEY=ark_y AUDITRAIL_NATS_URL=nats://127.0.0.1:4222 AUDITRAIL_NATS_CREDS=/d/nats/admin.creds\n"},
			[]string{"# KEY", "# AUDITRAIL_KEY"}},
		{"restart", "", Env{API: "http://127.0.0.1:8080", NATS: "nats://127.0.0.1:4222", AdminCreds: "/d/nats/admin.creds"},
			[]string{"export ORG=o-1 PROJECT=p-1\n", "export AUDITRAIL_URL=http://127.0.0.1:8080 AUDITRAIL_NATS_URL=", "# KEY: the demo key printed at the first start", "# AUDITRAIL_KEY: the bootstrap key printed"},
			[]string{"KEY=ak", "AUDITRAIL_KEY="}},
		{"outside NATS", "ak_x", Env{API: "http://[::1]:8080", BootKey: "ark_y"},
			[]string{"export AUDITRAIL_URL=http://[::1]:8080 AUDITRAIL_KEY=ark_y\n"},
			[]string{"AUDITRAIL_NATS"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Exports(ids, c.key, c.env)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, n := range c.not {
				if strings.Contains(got, n) {
					t.Errorf("has %q:\n%s", n, got)
				}
			}
		})
	}
}
