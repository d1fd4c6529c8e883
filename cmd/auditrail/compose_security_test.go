package main

import (
	"encoding/xml"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/auditrail/auditrail/internal/httpx"
	"golang.org/x/mod/modfile"
)

// loopbackPublished reports whether a compose short-syntax port
// ("[HOST_IP:]HOST_PORT:CONTAINER_PORT[/PROTOCOL]") is bound to a loopback
// address of the host; a port without a host address is published on
// every interface.
func loopbackPublished(spec string) bool {
	spec, _, _ = strings.Cut(spec, "/")
	var host string
	if strings.HasPrefix(spec, "[") { // [::1]:8000:8000
		end := strings.Index(spec, "]")
		if end < 0 {
			return false
		}
		host = spec[1:end]
	} else if parts := strings.Split(spec, ":"); len(parts) == 3 {
		host = parts[0]
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// tlsTerminated reports whether a service serves its published ports over
// TLS: Grafana with protocol https (or h2) and a certificate. No auditrail
// listener serves TLS itself.
func tlsTerminated(s composeService) bool {
	p := s.Environment["GF_SERVER_PROTOCOL"]
	return (p == "https" || p == "h2") && s.Environment["GF_SERVER_CERT_FILE"] != "" && s.Environment["GF_SERVER_CERT_KEY"] != ""
}

func TestLoopbackPublished(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want bool
	}{
		{"127.0.0.1:8000:8000", true},
		{"127.0.0.1:8000:8000/tcp", true},
		{"[::1]:3000:3000", true},
		{"127.0.0.2:8000:8000", true},
		{"8000:8000", false},
		{"8000", false},
		{"0.0.0.0:8000:8000", false},
		{"192.0.2.1:8000:8000", false},
		{"[::]:8000:8000", false},
		{"localhost:8000:8000", false}, // compose wants an address
	} {
		if got := loopbackPublished(tt.spec); got != tt.want {
			t.Errorf("%q: loopback %v, want %v", tt.spec, got, tt.want)
		}
	}
}

// Every port docker-compose.yml publishes is bound to the host's loopback
// (the APIs and Grafana speak plain HTTP), unless the service terminates
// TLS itself.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	doc := readCompose(t)
	published := 0
	for name, s := range doc.Services {
		for _, p := range s.Ports {
			published++
			if !loopbackPublished(p) && !tlsTerminated(s) {
				t.Errorf("%s publishes %q on every interface over plain HTTP: bind it to 127.0.0.1 (\"127.0.0.1:%s\")", name, p, p[strings.LastIndex(p, ":")+1:])
			}
		}
	}
	if published == 0 {
		t.Fatal("nothing published: the gateway should be")
	}
}

// The roles believe X-Forwarded-For from the gateway alone: the gateway
// has a fixed address of the compose network, outside the range Docker
// gives other containers, and that address is every role's only trusted
// proxy. The attack: another container of the network (a compromised
// one, or the bridge's address through which the host reaches the
// containers) sends a forged X-Forwarded-For straight to a role; the
// client_ip must stay its own address. Through the gateway, the address
// the gateway forwards is believed.
func TestComposeTrustsOnlyTheGateway(t *testing.T) {
	doc := readCompose(t)
	nets := doc.Networks["default"].IPAM.Config
	if len(nets) != 1 {
		t.Fatalf("the default network has %d address pools, want 1", len(nets))
	}
	subnet, err := netip.ParsePrefix(nets[0].Subnet)
	if err != nil {
		t.Fatalf("subnet: %v", err)
	}
	dynamic, err := netip.ParsePrefix(nets[0].IPRange)
	if err != nil {
		t.Fatalf("ip_range (the addresses Docker gives containers): %v", err)
	}
	gwAddr, err := netip.ParseAddr(doc.Services["gateway"].Networks["default"].IPv4Address)
	if err != nil {
		t.Fatalf("the gateway has no fixed address: %v", err)
	}
	if !subnet.Contains(gwAddr) || dynamic.Contains(gwAddr) || gwAddr == subnet.Addr().Next() {
		t.Fatalf("the gateway's %s must be in %s, outside the dynamic range %s and not the bridge's address", gwAddr, subnet, dynamic)
	}
	// Attackers: the bridge (the host's way in), the first, a middle and
	// the last container address Docker may hand out.
	last := dynamic.Addr()
	for a := dynamic.Addr(); dynamic.Contains(a); a = a.Next() {
		last = a
	}
	attackers := []netip.Addr{subnet.Addr().Next(), dynamic.Addr().Next(), dynamic.Addr().Next().Next().Next(), last.Prev()}
	forged := [][]byte{[]byte("203.0.113.66")}
	roles := 0
	for name, s := range doc.Services {
		v, ok := s.Environment["AUDITRAIL_TRUSTED_PROXIES"]
		if !ok {
			continue
		}
		roles++
		tp, err := httpx.ParseTrustedProxies(v)
		if err != nil {
			t.Errorf("%s: AUDITRAIL_TRUSTED_PROXIES %q: %v", name, v, err)
			continue
		}
		for _, peer := range attackers {
			if got := tp.ClientIP(peer, forged); got != peer {
				t.Errorf("%s: a request from %s forging X-Forwarded-For 203.0.113.66 records client_ip %s (trusted proxies %q)", name, peer, got, v)
			}
		}
		if got := tp.ClientIP(gwAddr, forged); got.String() != "203.0.113.66" {
			t.Errorf("%s: the gateway's forwarded address is not believed (%s): trusted proxies %q", name, got, v)
		}
	}
	// The roles that record client addresses: controlplane, toolrunner,
	// query (rate limits), two of each.
	if roles != 6 {
		t.Errorf("%d services set AUDITRAIL_TRUSTED_PROXIES, want the 6 API role instances", roles)
	}
}

// usersXML is what the tests read of deploy/clickhouse/users.xml.
type usersXML struct {
	XMLName  xml.Name `xml:"yandex"`
	Profiles struct {
		Any []struct {
			XMLName  xml.Name
			Parent   string `xml:"profile"`
			Readonly string `xml:"readonly"`
			AllowDDL string `xml:"allow_ddl"`
		} `xml:",any"`
	} `xml:"profiles"`
	Users struct {
		Any []struct {
			XMLName  xml.Name
			Password struct {
				FromEnv string `xml:"from_env,attr"`
				Value   string `xml:",chardata"`
			} `xml:"password"`
			Networks  []string `xml:"networks>ip"`
			Profile   string   `xml:"profile"`
			Databases []string `xml:"allow_databases>database"`
		} `xml:",any"`
	} `xml:"users"`
}

const usersFile = "../../deploy/clickhouse/users.xml"

func readUsersXML(t *testing.T) usersXML {
	t.Helper()
	raw, err := os.ReadFile(usersFile)
	if err != nil {
		t.Fatal(err)
	}
	var u usersXML
	if err := xml.Unmarshal(raw, &u); err != nil {
		t.Fatalf("%s: %v (note: an XML comment may not hold \"--\")", usersFile, err)
	}
	return u
}

// composeSecret is the variable of a "${VAR:?message}" value.
var composeSecret = regexp.MustCompile(`^\$\{([A-Z0-9_]+):\?[^}]+\}$`)

// Each role reaches ClickHouse as a user of its own, with only what it
// needs (deploy/clickhouse/users.xml): query reads only (a readonly
// profile), ingest and tlog write without DDL (allow_ddl 0), each limited
// to the auditrail database, none runs the migrations
// (AUDITRAIL_CLICKHOUSE_MIGRATE false); the one-shot clickhouse-migrate
// service runs them as the servers' CLICKHOUSE_USER, before the roles
// start. Each password is a secret of its own, the same one on the role
// and on the servers (from_env). TestDeployClickHouseUsers runs the file
// on a real server.
func TestComposeClickHouseUsers(t *testing.T) {
	doc := readCompose(t)
	u := readUsersXML(t)
	profiles := map[string]struct{ readonly, allowDDL, parent string }{}
	for _, p := range u.Profiles.Any {
		profiles[p.XMLName.Local] = struct{ readonly, allowDDL, parent string }{p.Readonly, p.AllowDDL, p.Parent}
	}
	type user struct {
		pwEnv, profile string
		networks, dbs  []string
	}
	users := map[string]user{}
	for _, x := range u.Users.Any {
		users[x.XMLName.Local] = user{x.Password.FromEnv, x.Profile, x.Networks, x.Databases}
		if x.Password.FromEnv == "" || strings.TrimSpace(x.Password.Value) != "" {
			t.Errorf("user %s: the password must come from the environment (from_env), not the file", x.XMLName.Local)
		}
	}
	ch := doc.Services["clickhouse-1"]
	migrator := ch.Environment["CLICKHOUSE_USER"]
	subnet := doc.Networks["default"].IPAM.Config[0].Subnet
	for _, svc := range []string{"clickhouse-1", "clickhouse-2"} {
		if !slices.Contains(doc.Services[svc].Volumes, "./deploy/clickhouse/users.xml:/etc/clickhouse-server/users.d/auditrail-users.xml:ro") {
			t.Errorf("%s does not load the roles' users: %v", svc, doc.Services[svc].Volumes)
		}
		if doc.Services[svc].Environment["CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT"] != "0" {
			t.Errorf("%s: the migrator has access management (it creates no users)", svc)
		}
	}
	want := map[string]string{"ingest": "write", "tlog": "write", "query": "read"}
	seen := map[string]string{}
	for name, s := range doc.Services {
		role, _, _ := strings.Cut(name, "-")
		kind, ok := want[role]
		if !ok || s.Image != "auditrail:latest" || s.Environment["AUDITRAIL_CLICKHOUSE_DSN"] == "" {
			continue
		}
		login := s.Environment["AUDITRAIL_CLICKHOUSE_USER"]
		if other, dup := seen[login]; dup && other != role {
			t.Errorf("%s and %s share the ClickHouse user %s", role, other, login)
		}
		seen[login] = role
		usr, ok := users[login]
		switch {
		case login == migrator || login == "" || login == "default":
			t.Errorf("%s reaches ClickHouse as %q, the user with DDL rights", name, login)
			continue
		case !ok:
			t.Errorf("%s: user %q is not in %s", name, login, usersFile)
			continue
		}
		if s.Environment["AUDITRAIL_CLICKHOUSE_MIGRATE"] != "false" {
			t.Errorf("%s runs the migrations (AUDITRAIL_CLICKHOUSE_MIGRATE %q)", name, s.Environment["AUDITRAIL_CLICKHOUSE_MIGRATE"])
		}
		if c := s.DependsOn["clickhouse-migrate"].Condition; c != "service_completed_successfully" {
			t.Errorf("%s does not wait for the migrations (%q)", name, c)
		}
		p := profiles[usr.profile]
		ro, _ := strconv.Atoi(p.readonly)
		switch kind {
		case "read":
			if ro < 1 {
				t.Errorf("%s: user %s has profile %s, readonly %q: it could write", name, login, usr.profile, p.readonly)
			}
		case "write":
			if ro != 0 || p.allowDDL != "0" {
				t.Errorf("%s: user %s has profile %s (readonly %q, allow_ddl %q): want writes without DDL", name, login, usr.profile, p.readonly, p.allowDDL)
			}
		}
		if p.parent != "default" {
			t.Errorf("profile %s does not inherit the default profile (load_balancing in_order)", usr.profile)
		}
		if !slices.Equal(usr.dbs, []string{"auditrail"}) {
			t.Errorf("user %s reaches databases %v, want only auditrail", login, usr.dbs)
		}
		if !slices.Contains(usr.networks, subnet) {
			t.Errorf("user %s is admitted from %v, not from the compose network %s", login, usr.networks, subnet)
		}
		// The password: one secret per role, the same on the server.
		m := composeSecret.FindStringSubmatch(s.Environment["AUDITRAIL_CLICKHOUSE_PASSWORD"])
		if m == nil {
			t.Errorf("%s: AUDITRAIL_CLICKHOUSE_PASSWORD is not a required secret ${VAR:?…}", name)
			continue
		}
		for _, svc := range []string{"clickhouse-1", "clickhouse-2"} {
			sm := composeSecret.FindStringSubmatch(doc.Services[svc].Environment[usr.pwEnv])
			if sm == nil || sm[1] != m[1] {
				t.Errorf("%s gives %s (user %s's from_env) %q, the role uses ${%s}", svc, usr.pwEnv, login, doc.Services[svc].Environment[usr.pwEnv], m[1])
			}
		}
		if mm := composeSecret.FindStringSubmatch(ch.Environment["CLICKHOUSE_PASSWORD"]); mm != nil && mm[1] == m[1] {
			t.Errorf("%s shares the migrator's password", name)
		}
	}
	if len(seen) != 3 {
		t.Errorf("ClickHouse users of the roles: %v, want one each for ingest, tlog and query", seen)
	}
	mig := doc.Services["clickhouse-migrate"]
	if strings.Join(mig.Command, " ") != "migrate" || mig.Restart != "no" || mig.Environment["AUDITRAIL_CLICKHOUSE_USER"] != migrator ||
		mig.Environment["AUDITRAIL_CLICKHOUSE_PASSWORD"] != ch.Environment["CLICKHOUSE_PASSWORD"] {
		t.Errorf("clickhouse-migrate: command %v, restart %q, user %q: want a one-shot `auditrail migrate` as %s", mig.Command, mig.Restart, mig.Environment["AUDITRAIL_CLICKHOUSE_USER"], migrator)
	}
}

// The image runs as a numeric non-root user, and owns every directory
// the compose file mounts a writable volume on (a new named volume takes
// the owner of the image's directory) and its working directory.
func TestDockerfileNonRoot(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := strings.Split(string(raw), "\nFROM ")
	final := stages[len(stages)-1]
	var user, workdir string
	owned := map[string]string{} // directory → uid:gid
	for _, line := range strings.Split(final, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "USER":
			user = f[1]
		case "WORKDIR":
			workdir = f[1]
		case "COPY":
			var chown string
			var rest []string
			for _, a := range f[1:] {
				if v, ok := strings.CutPrefix(a, "--chown="); ok {
					chown = v
				} else if !strings.HasPrefix(a, "--") {
					rest = append(rest, a)
				}
			}
			if chown != "" && len(rest) == 2 {
				owned[strings.TrimSuffix(rest[1], "/")] = chown
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Fatalf("the image runs as USER %q: want a numeric uid other than 0", user)
	}
	doc := readCompose(t)
	dirs := map[string]string{workdir: "WORKDIR"}
	for name, s := range doc.Services {
		if s.Image != "auditrail:latest" {
			continue
		}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/") || (len(parts) == 3 && parts[2] == "ro") {
				continue // a file of the repository, a host path, or read-only
			}
			dirs[parts[1]] = name
		}
	}
	if len(dirs) < 3 {
		t.Fatalf("writable directories %v: the parse found too few", dirs)
	}
	for dir, who := range dirs {
		if owned[dir] != user {
			t.Errorf("%s (%s) is owned by %q in the image, not by the user %s it runs as", dir, who, owned[dir], user)
		}
	}
}

// The build stage downloads modules before it copies the sources (so that
// the download is cached across source changes); every directory go.mod
// replaces a module with must be copied before that download, or the
// build fails ("replacement directory does not exist").
func TestDockerfileCopiesReplacementsBeforeDownload(t *testing.T) {
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.Parse("go.mod", gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string]bool{}
	downloaded := false
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.EqualFold(f[0], "RUN") && strings.Contains(line, "go mod download") {
			downloaded = true
			break
		}
		if strings.EqualFold(f[0], "COPY") && len(f) >= 3 {
			for _, src := range f[1 : len(f)-1] {
				copied[strings.TrimSuffix(strings.TrimPrefix(src, "./"), "/")] = true
			}
		}
	}
	if !downloaded {
		t.Fatal("the Dockerfile runs no go mod download")
	}
	for _, r := range mf.Replace {
		dir := strings.TrimSuffix(strings.TrimPrefix(r.New.Path, "./"), "/")
		if r.New.Version != "" || !strings.HasPrefix(r.New.Path, ".") {
			continue // a module version, not a directory
		}
		covered := copied["."]
		for d := dir; d != "." && !covered; d = filepath.Dir(d) {
			covered = copied[d]
		}
		if !covered {
			t.Errorf("go.mod replaces %s with %s, which the Dockerfile copies only after go mod download", r.Old.Path, r.New.Path)
		}
	}
}
