// Package pgtest gives tests a real PostgreSQL: a fresh schema per test in
// the server HERD_TEST_POSTGRES_DSN names (.ci/run starts one), or else in
// a throwaway cluster this process starts in a temporary directory from
// the PostgreSQL binaries on the machine, and stops in Stop (TestMain).
// Without either a test skips with the reason, except in CI (CI=true),
// where a missing PostgreSQL is a failure.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the server tests use instead of starting their own.
const EnvDSN = "HERD_TEST_POSTGRES_DSN"

var (
	once     sync.Once
	base     string // the server's DSN
	cluster  *Cluster
	startErr error
)

// DSN returns the connection string of a new, empty schema (its
// search_path) for t alone; the schema is dropped when t ends.
func DSN(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if base = os.Getenv(EnvDSN); base != "" {
			return
		}
		cluster, startErr = Start(os.TempDir())
		if cluster != nil {
			base = cluster.DSN
		}
	})
	if base == "" {
		msg := fmt.Sprintf("no PostgreSQL: set %s or install PostgreSQL (apt-get install postgresql): %v", EnvDSN, startErr)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	name := "herd_test_" + randomHex(6)
	if err := exec1(base, "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		if err := exec1(base, "DROP SCHEMA "+name+" CASCADE"); err != nil {
			t.Errorf("pgtest: drop schema: %v", err)
		}
	})
	return WithSearchPath(base, name)
}

// Stop stops the cluster DSN started, if it did.
func Stop() {
	if cluster != nil {
		cluster.Stop()
	}
}

// WithSearchPath is dsn with its search_path set to schema.
func WithSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "search_path=" + schema
	}
	return dsn + " search_path=" + schema
}

// Stranger is the connection string of a new role that can log in to
// dsn's database and holds no grant but USAGE on dsn's schema (what
// PUBLIC has on the schema public): another login on herd's database, as
// every role is that CONNECT and PUBLIC let in. It is dropped when t
// ends, its sessions ended first.
func Stranger(t testing.TB, dsn string) string {
	t.Helper()
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := cc.RuntimeParams["search_path"]
	name, password := "herd_stranger_"+randomHex(6), randomHex(16)
	if err := exec1(dsn, "CREATE ROLE "+name+" LOGIN PASSWORD '"+password+"'; GRANT USAGE ON SCHEMA "+pgx.Identifier{schema}.Sanitize()+" TO "+name); err != nil {
		t.Fatalf("pgtest: create a role: %v", err)
	}
	t.Cleanup(func() {
		err := exec1(dsn, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+name+"'")
		if err == nil {
			err = exec1(dsn, "DROP OWNED BY "+name+"; DROP ROLE "+name)
		}
		if err != nil {
			t.Errorf("pgtest: drop role %s: %v", name, err)
		}
	})
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(name, password)
		return u.String()
	}
	return dsn + " user=" + name + " password=" + password
}

func exec1(dsn, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Cluster is a throwaway PostgreSQL cluster listening on a unix socket
// in its own directory.
type Cluster struct {
	DSN string
	dir string
	run func(args ...string) *exec.Cmd
	bin string
}

// Start initialises and starts a cluster in a new directory under tmp.
// PostgreSQL refuses to run as root, so as root it runs as nobody.
func Start(tmp string) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tmp, "herd-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin, run: func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }}
	if os.Geteuid() == 0 {
		if err := c.runAsNobody(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "herd", "-E", "UTF8", "--no-locale", "--no-sync").CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	if err := c.Resume(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%v %s", err, log)
	}
	c.DSN = "host=" + dir + " user=herd dbname=postgres sslmode=disable"
	return c, nil
}

// Private starts a cluster of t's own, stopped and removed when t ends:
// for a test that stops the server under herd (Halt, Resume), which a
// shared server cannot do to the tests beside it. Without the PostgreSQL
// binaries t skips, except in CI, where it fails.
func Private(t testing.TB) *Cluster {
	t.Helper()
	c, err := Start(os.TempDir())
	if err != nil {
		msg := fmt.Sprintf("no PostgreSQL of its own for this test (apt-get install postgresql): %v", err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(c.Stop)
	return c
}

// Halt stops the server as an operator would (pg_ctl stop -m fast: every
// connection ends at once), keeping its data for Resume. (An immediate
// stop would lose commits: the cluster runs with synchronous_commit off.)
func (c *Cluster) Halt() error {
	if out, err := c.run(filepath.Join(c.bin, "pg_ctl"), "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	return nil
}

// Resume starts the server Halt stopped, on the same data and socket,
// and returns once it accepts connections.
func (c *Cluster) Resume() error {
	// Durability is not what tests check: fsync off keeps them fast.
	opts := "-k " + c.dir + " -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
	if out, err := c.run(filepath.Join(c.bin, "pg_ctl"), "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "log"), "-o", opts, "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	return nil
}

// runAsNobody hands the directory to nobody and runs the binaries as it.
func (c *Cluster) runAsNobody() error {
	u, err := user.Lookup("nobody")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return err
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		return fmt.Errorf("running PostgreSQL as root needs runuser: %w", err)
	}
	c.run = func(args ...string) *exec.Cmd {
		cmd := exec.Command(runuser, append([]string{"-u", "nobody", "--"}, args...)...)
		cmd.Dir = c.dir
		return cmd
	}
	return nil
}

// Stop stops the cluster at once and removes its directory.
func (c *Cluster) Stop() {
	_ = c.run(filepath.Join(c.bin, "pg_ctl"), "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop").Run()
	_ = os.RemoveAll(c.dir)
}

// binDir finds the PostgreSQL server binaries: Debian keeps them under
// /usr/lib/postgresql/VERSION/bin (newest first), elsewhere they are on
// the PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (pg_ctl) found")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}
