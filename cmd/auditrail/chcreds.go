package main

import (
	"net/url"
	"os"
	"strings"

	"github.com/auditrail/auditrail/internal/auditstore/backend"
	"github.com/auditrail/auditrail/internal/cli"
)

// envClickHousePassword is the ClickHouse password from the environment;
// there is no flag for it, so that it never shows in a process list.
const envClickHousePassword = "AUDITRAIL_CLICKHOUSE_PASSWORD"

// chCredsFlags are the ClickHouse credentials given apart from the DSN: a
// user, and a password from a file or the environment.
type chCredsFlags struct{ user, passwordFile *string }

func addClickHouseCredsFlags(fs *cli.Flags) chCredsFlags {
	return chCredsFlags{
		user:         fs.String("clickhouse-user", "", "", "ClickHouse user (default: the DSN's, else default)"),
		passwordFile: fs.String("clickhouse-password-file", "", "", "file holding the ClickHouse password (one line); or the password itself in "+envClickHousePassword+"; never put it in the DSN on a command line"),
	}
}

// withCredentials returns dsn with the user and password of f. A password
// given twice (in the DSN and apart, or in a file and the environment) is
// an error rather than a guess. Errors never hold the password.
func (f chCredsFlags) withCredentials(dsn string) (string, error) {
	pw, havePW := os.LookupEnv(envClickHousePassword)
	if *f.passwordFile != "" {
		if havePW {
			return "", cli.UsageErrorf("the ClickHouse password is given twice: --clickhouse-password-file and %s", envClickHousePassword)
		}
		b, err := os.ReadFile(*f.passwordFile)
		if err != nil {
			return "", cli.UsageErrorf("--clickhouse-password-file: %v", err)
		}
		pw, havePW = strings.TrimRight(string(b), "\r\n"), true
	}
	if *f.user == "" && !havePW || dsn == "" {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "", cli.UsageErrorf("--clickhouse: not a URL (clickhouse://host:9000/db)")
	}
	user := "default"
	if u.User != nil {
		user = u.User.Username()
		if _, set := u.User.Password(); set && havePW {
			return "", cli.UsageErrorf("the ClickHouse password is given twice: in --clickhouse and apart")
		}
		if p, set := u.User.Password(); set {
			pw, havePW = p, true
		}
	}
	if *f.user != "" {
		user = *f.user
	}
	if havePW {
		u.User = url.UserPassword(user, pw)
	} else {
		u.User = url.User(user)
	}
	return u.String(), nil
}

// roleStoreFlags are the ClickHouse flags of a production role that needs
// the audit store: the DSN (required), the credentials given apart from it,
// the cluster, and whether the role runs the migrations.
type roleStoreFlags struct {
	dsn     *string
	creds   chCredsFlags
	cluster *string
	migrate *bool // nil: the command always migrates (auditrail migrate)
}

func addRoleStoreFlags(fs *cli.Flags) roleStoreFlags {
	f := addMigrateStoreFlags(fs)
	f.migrate = fs.Bool("clickhouse-migrate", "", true, "create the database and apply the migrations at start (needs a user with DDL rights); false: run no DDL, wait until auditrail migrate has applied them (for a read-only or insert-only user)")
	return f
}

// addOptionalStoreFlags are the ClickHouse flags of a role that may use
// the store (what says why).
func addOptionalStoreFlags(fs *cli.Flags, why string) roleStoreFlags {
	f := roleStoreFlags{
		dsn:     fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db: "+why),
		creds:   addClickHouseCredsFlags(fs),
		cluster: addClusterFlag(fs),
	}
	f.migrate = fs.Bool("clickhouse-migrate", "", false, "create the database and apply the migrations at start (needs a user with DDL rights); false: run no DDL, wait until auditrail migrate has applied them")
	return f
}

// addMigrateStoreFlags are the ClickHouse flags of auditrail migrate.
func addMigrateStoreFlags(fs *cli.Flags) roleStoreFlags {
	return roleStoreFlags{
		dsn:     fs.String("clickhouse", "AUDITRAIL_CLICKHOUSE_DSN", "", "clickhouse://host:9000/db (required)"),
		creds:   addClickHouseCredsFlags(fs),
		cluster: addClusterFlag(fs),
	}
}

// resolve returns the store with the credentials in its DSN; a missing
// --clickhouse is a usage error.
func (f roleStoreFlags) resolve() (backend.Target, error) {
	if *f.dsn == "" {
		return backend.Target{}, cli.UsageErrorf("--clickhouse is required")
	}
	dsn, err := f.creds.withCredentials(*f.dsn)
	if err != nil {
		return backend.Target{}, err
	}
	return backend.Target{DSN: dsn, Cluster: *f.cluster, NoMigrate: f.migrate != nil && !*f.migrate}, nil
}
