#!/usr/bin/env bash
# scripts/test.sh — what `make test` runs, the whole set-up on a fresh Debian
# machine: the system packages the tests need (installed as root, named
# otherwise), a throwaway PostgreSQL cluster unless HERD_TEST_POSTGRES_DSN
# names one, the npm packages, then `$GO test $TESTFLAGS $PKGS`.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
TESTFLAGS=${TESTFLAGS:--race -count=1 -timeout 14m -parallel 4}
PKGS=${PKGS:-./...}

need=()
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# The sandbox's rlimits (prlimit), its drop to sandbox.user as root
# (setpriv) and the full-disk test's tmpfs (mount).
command -v prlimit >/dev/null 2>&1 || need+=(util-linux)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
# The quota test writes through a shared mapping with the system's python3
# (the sandbox sees /usr only).
[ -x /usr/bin/python3 ] || need+=(python3)
command -v mount >/dev/null 2>&1 || need+=(mount)
# The store's tests run on PostgreSQL too (Debian's server binaries).
ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || need+=(postgresql)
# npm installs the MCP server the end-to-end test drives and axe-core, which
# the accessibility browser test injects (the Makefile's two targets).
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${need[@]}"
  else
    # Not root: the tests that need a missing part skip (fail under CI=true).
    echo "test: missing ${need[*]} — install with: sudo apt-get install ${need[*]}" >&2
  fi
fi

# One throwaway PostgreSQL cluster for every test package (each test takes
# a schema of its own), in a temporary directory, on a unix socket only,
# stopped on exit. PostgreSQL refuses to run as root, so as root it runs as
# nobody. Without PostgreSQL each package that needs it starts its own or
# skips (internal/pgtest).
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "${HERD_TEST_POSTGRES_DSN:-}" ] && [ -n "$pgbin" ]; then
  pgdir=$(mktemp -d /tmp/herd-test-pg.XXXXXX)
  as_pg=()
  if [ "$(id -u)" = 0 ]; then
    chown nobody "$pgdir"
    as_pg=(runuser -u nobody --)
  fi
  stop_pg() {
    "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$pgdir"
  }
  trap stop_pg EXIT
  "${as_pg[@]}" "$pgbin/initdb" -D "$pgdir/data" -A trust -U herd -E UTF8 --no-locale --no-sync >/dev/null
  "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdir/data" -l "$pgdir/log" -w -t 60 \
    -o "-k $pgdir -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" start >/dev/null
  export HERD_TEST_POSTGRES_DSN="host=$pgdir user=herd dbname=postgres sslmode=disable"
fi

# Installed before the tests (not from inside them), so a registry failure
# shows as such rather than as a failed test.
if command -v npm >/dev/null 2>&1; then
  "$MAKE" -s --no-print-directory mcp-test-server axe-core
elif [ -n "${CI:-}" ]; then
  echo "test: npm is missing; the MCP and accessibility tests need it" >&2
  exit 1
fi

# Not exec: the trap stops PostgreSQL when the tests end. TESTFLAGS and PKGS
# are word-split on purpose (several flags, several packages).
# shellcheck disable=SC2086
"$GO" test $TESTFLAGS $PKGS
