package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/auditrail/auditrail/ingest"
	"github.com/auditrail/auditrail/internal/auditstore/clickhouse"
	"github.com/auditrail/auditrail/internal/chserver"
	"github.com/auditrail/auditrail/producers"
	"github.com/auditrail/auditrail/schemas"
)

// Names of the processes of the roles run.
const (
	procIngest       = "ingest"
	procTLog         = "tlog"
	procQuery        = "query (a feed poller, a page reader, each once a second)"
	procControlPlane = "controlplane"
	procBenchNATS    = "NATS, the publisher and the readers (not counted)"
)

// roles carries the steady load of steady() through the roles as separate
// processes — `auditrail ingest`, `tlog`, `query` and `controlplane` — on
// this process's NATS server and one ClickHouse server, while a poller
// follows one organization's feed through the query role (1,000 entries a
// page, once a second when it has caught up, as compliance systems poll)
// and another reads its newest page once a second (a dashboard), until
// every entry is listable and in a signed checkpoint:
// the CPU of each role per event, and its peak RSS, for sizing. This
// process holds the NATS server, the publisher and the readers: its CPU
// is not counted (NATS's own is the drain's figure).
func (b *costBench) roles(ctx context.Context, srv *chserver.Server, srvPID int) (CostRun, error) {
	run := CostRun{Name: "ingest, tlog, query and controlplane as separate processes and the server, under the steady load"}
	bn, err := startNATS(ctx, filepath.Join(b.dir, "nats-roles"))
	if err != nil {
		return run, err
	}
	defer bn.close()
	const db = "bench_roles"
	dsn := srv.DSN(db)
	store, err := clickhouse.Open(ctx, dsn) // the schema, before the roles start
	if err != nil {
		return run, err
	}
	store.Close()
	url := bn.ns.ClientURL()
	key := "ark_bench_" + uuid.NewString()
	cursor := make([]byte, 32)
	if _, err := rand.Read(cursor); err != nil {
		return run, err
	}
	type started struct {
		name string
		c    *roleChild
		base string // its HTTP API, for the readers
	}
	var roles []started
	defer func() {
		for _, r := range roles {
			if err := r.c.stop(); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
	}()
	start := func(name, role string, api bool, args ...string) error {
		addr := "127.0.0.1:0"
		if api {
			port, err := chserver.FreePort()
			if err != nil {
				return err
			}
			addr = fmt.Sprintf("127.0.0.1:%d", port)
			args = append(args, "--bootstrap-key", key)
		}
		c, err := startRole(ctx, role, append([]string{"--nats-url", url, "--http", addr, "--log-level", "warn"}, args...)...)
		if err != nil {
			return err
		}
		roles = append(roles, started{name: name, c: c, base: "http://" + addr})
		if api {
			return waitHealthy(ctx, c, "http://"+addr)
		}
		return nil
	}
	secrets := make([]byte, 32)
	if _, err := rand.Read(secrets); err != nil {
		return run, err
	}
	if err := start(procControlPlane, "controlplane", true, "--admin-rate-limit", "1000000/60s",
		"--secrets-keys", base64.StdEncoding.EncodeToString(secrets), "--public-url", "http://127.0.0.1"); err != nil {
		return run, err
	}
	if err := start(procQuery, "query", true, "--clickhouse", dsn, "--clickhouse-migrate=false", "--rate-limit", "1000000/60s",
		"--cursor-keys", base64.StdEncoding.EncodeToString(cursor)); err != nil {
		return run, err
	}
	if err := start(procIngest, "ingest", false, "--clickhouse", dsn, "--clickhouse-migrate=false"); err != nil {
		return run, err
	}
	tl, err := startTLogChild(ctx, url, dsn, ingest.DefaultConfig().Durable)
	if err != nil {
		return run, err
	}
	roles = append(roles, started{name: procTLog, c: tl})
	cp := &devProcess{base: roles[0].base, key: key, client: &http.Client{}}
	reader := &devProcess{base: roles[1].base, key: key, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	defer reader.client.CloseIdleConnections()

	orgs := make([]uuid.UUID, b.cfg.Orgs)
	for i := range orgs {
		if orgs[i], err = cp.createOrg(ctx, fmt.Sprintf("Roles %d", i)); err != nil {
			return run, err
		}
	}
	cp.client.CloseIdleConnections()
	pub, err := producers.New(bn.nc, producers.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		return run, err
	}
	signed := newSignedSizes()
	sub, err := bn.nc.Subscribe(schemas.SubjectCheckpointAll, signed.note)
	if err != nil {
		return run, err
	}
	defer sub.Unsubscribe() //nolint:errcheck // the connection closes after
	if err := waitConsumer(ctx, bn.js); err != nil {
		return run, err
	}
	time.Sleep(time.Second) // the roles' start done

	pids := map[string]int{procServer: srvPID, procBenchNATS: os.Getpid()}
	names := []string{procServer, procBenchNATS}
	for _, r := range roles {
		names, pids[r.name] = append(names, r.name), r.c.cmd.Process.Pid
	}
	procs := procSet{names: names, pids: pids, uncounted: procBenchNATS}
	cpu0, err := procs.idle(&run)
	if err != nil {
		return run, err
	}

	// The readers: one organization's feed, followed, and its newest page.
	rctx, stopReaders := context.WithCancel(ctx)
	read := make(chan error, 2)
	feed := "/api/v1/orgs/" + orgs[0].String() + "/audit_logs/feed?limit=1000"
	go func() {
		cursor := ""
		for rctx.Err() == nil {
			page, err := readPage(rctx, reader, feed, cursor)
			if err != nil {
				read <- err
				return
			}
			cursor = page.Data.NextCursor
			if !page.Data.HasMore {
				sleepCtx(rctx, time.Second)
			}
		}
		read <- nil
	}()
	go func() {
		for rctx.Err() == nil {
			if _, err := readPage(rctx, reader, "/api/v1/orgs/"+orgs[0].String()+"/audit_logs?limit=50", ""); err != nil {
				read <- fmt.Errorf("newest page: %w", err)
				return
			}
			sleepCtx(rctx, time.Second)
		}
		read <- nil
	}()
	t0 := time.Now()
	counts, _, err := b.publishSteady(ctx, pub, orgs, false)
	if err == nil {
		for _, c := range counts {
			run.Events += int(c)
		}
		run.Rate = float64(run.Events) / time.Since(t0).Seconds()
		err = signed.wait(ctx, counts, 10*time.Minute, b.say)
	}
	run.Elapsed = time.Since(t0)
	stopReaders()
	for range 2 {
		if rerr := <-read; rerr != nil && rctx.Err() == nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return run, fmt.Errorf("%s: %w", run.Name, err)
	}
	err = procs.since(&run, cpu0)
	return run, err
}

// waitHealthy waits until the role at base answers /healthz with 200.
func waitHealthy(ctx context.Context, c *roleChild, base string) error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	for deadline := time.Now().Add(time.Minute); ; {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/healthz", nil)
		if err != nil {
			return err
		}
		if res, err := client.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if err := c.exitedEarly(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become healthy in a minute", c.name)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// sleepCtx sleeps for d or until ctx ends, and reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
