package chserver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Cluster is a throwaway ClickHouse cluster: a ZooKeeper and shards ×
// replicas servers on free ports, each with the config a cluster node
// needs (DESIGN.md, "ClickHouse cluster on 18.16"): <zookeeper>,
// <distributed_ddl>, <macros> shard and replica, <remote_servers> naming
// every node (internal_replication: a Distributed table writes one replica
// of a shard and replication copies it) and the interserver HTTP port
// through which replicas fetch parts.
type Cluster struct {
	Name      string
	Dir       string
	ZooKeeper *ZooKeeper
	Shards    [][]*Server // [shard][replica]
}

// StartCluster starts a cluster named name under dir. Stop it with Stop;
// dir is the caller's to remove.
func StartCluster(dir, name string, shards, replicas int) (*Cluster, error) {
	if shards < 1 || replicas < 1 {
		return nil, errors.New("a cluster needs at least one shard and one replica")
	}
	if _, err := Binary(); err != nil {
		return nil, err
	}
	zk, err := StartZooKeeper(filepath.Join(dir, "zookeeper"))
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, Dir: dir, ZooKeeper: zk}
	ports, err := freePorts(3 * shards * replicas)
	if err != nil {
		c.Stop()
		return nil, err
	}
	interserver := map[*Server]int{}
	for i := 0; i < shards; i++ {
		var row []*Server
		for j := 0; j < replicas; j++ {
			p := ports[3*(i*replicas+j):]
			s, err := newServer(filepath.Join(dir, fmt.Sprintf("s%dr%d", i+1, j+1)), p[0], p[1])
			if err != nil {
				c.Stop()
				return nil, err
			}
			interserver[s] = p[2]
			row = append(row, s)
		}
		c.Shards = append(c.Shards, row)
	}
	var remote strings.Builder
	fmt.Fprintf(&remote, "  <remote_servers><%s>\n", name)
	for _, row := range c.Shards {
		remote.WriteString("    <shard><internal_replication>true</internal_replication>\n")
		for _, s := range row {
			fmt.Fprintf(&remote, "      <replica><host>127.0.0.1</host><port>%d</port></replica>\n", s.TCPPort)
		}
		remote.WriteString("    </shard>\n")
	}
	fmt.Fprintf(&remote, "  </%s></remote_servers>\n", name)
	for i, row := range c.Shards {
		for j, s := range row {
			extra := fmt.Sprintf(`  <zookeeper><node><host>127.0.0.1</host><port>%d</port></node><session_timeout_ms>10000</session_timeout_ms></zookeeper>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
  <macros><shard>%02d</shard><replica>s%dr%d</replica></macros>
  <interserver_http_port>%d</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
%s`, zk.Port, i+1, i+1, j+1, interserver[s], remote.String())
			s.usersXML = clusterUsers
			if err := s.writeConfig(extra); err != nil {
				c.Stop()
				return nil, err
			}
		}
	}
	// Start the servers at once: each takes seconds to come up.
	servers := c.Servers()
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Start()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Stop()
		return nil, err
	}
	for _, s := range servers {
		if err := s.waitZooKeeper(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// waitZooKeeper waits until the server reads ZooKeeper (its session is up).
func (s *Server) waitZooKeeper() error {
	q := url.Values{"query": {"SELECT count() FROM system.zookeeper WHERE path = '/'"}}
	deadline := time.Now().Add(60 * time.Second)
	c := http.Client{Timeout: 5 * time.Second}
	var last string
	for time.Now().Before(deadline) {
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/?%s", s.HTTPPort, q.Encode()))
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = string(b)
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("clickhouse on port %d does not reach zookeeper: %s", s.TCPPort, last)
}

// Servers returns every server, shard by shard.
func (c *Cluster) Servers() []*Server {
	var out []*Server
	for _, row := range c.Shards {
		out = append(out, row...)
	}
	return out
}

// DSN returns the DSN of database db through every server (the client
// takes the first that answers).
func (c *Cluster) DSN(db string) string {
	var hosts []string
	for _, s := range c.Servers() {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", s.TCPPort))
	}
	return fmt.Sprintf("clickhouse://%s/%s", strings.Join(hosts, ","), db)
}

// Stop stops every server, then ZooKeeper.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, s := range c.Servers() {
		wg.Add(1)
		go func() { defer wg.Done(); s.Stop() }()
	}
	wg.Wait()
	if c.ZooKeeper != nil {
		c.ZooKeeper.Stop()
	}
}

// RemoveAll stops the cluster and removes its directory.
func (c *Cluster) RemoveAll() error {
	c.Stop()
	return os.RemoveAll(c.Dir)
}

// clusterUsers is the users configuration of a cluster's servers: the
// default user, whose profile picks replicas in the order of
// <remote_servers> (load_balancing in_order). A Distributed insert
// (internal_replication) and the reads after it then go to the same
// replica of each shard while it is healthy, so a listing sees what ingest
// acknowledged; with the default (random), a read could reach the other
// replica before replication copied the part. Production servers need the
// same setting (docs/operations.md, "a ClickHouse cluster").
const clusterUsers = `<?xml version="1.0"?>
<yandex>
  <profiles><default>
    <max_memory_usage>10000000000</max_memory_usage>
    <load_balancing>in_order</load_balancing>
  </default></profiles>
  <users><default>
    <password></password>
    <networks><ip>::/0</ip></networks>
    <profile>default</profile>
    <quota>default</quota>
  </default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
`
