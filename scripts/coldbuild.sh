#!/usr/bin/env bash
# scripts/coldbuild.sh — times a cold build of herd the way a first
# `make run` meets it: an empty Go build cache, the module cache kept (the
# modules already downloaded), `make build`'s script. Prints the wall time,
# the load average before and after, and the compile CPU by dependency from
# go's action graph (docs/PERFORMANCE.md "First start (issue 26)").
# COLD_BUILD="go build -o OUT ." times the plain build instead.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOCACHE=$work/cache
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-debug-actiongraph=$work/actions.json"
cmd=${COLD_BUILD:-scripts/build.sh OUT}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
${cmd//OUT/$work/herd}
echo "wall: $(( $(date +%s) - start )) s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/actions.json" <<'PY'
import collections, json, sys
groups = [  # prefix -> name, first match wins
    ("github.com/openai/", "openai-go"), ("github.com/anthropics/", "anthropic-sdk-go"),
    ("github.com/mattn/go-sqlite3", "go-sqlite3 (C amalgamation + Go)"),
    ("github.com/jackc/", "pgx"), ("github.com/alecthomas/chroma", "chroma"),
    ("github.com/dlclark/", "chroma"), ("github.com/a-h/templ", "templ"),
    ("github.com/prometheus/", "prometheus + protobuf"),
    ("google.golang.org/protobuf", "prometheus + protobuf"),
    ("github.com/modelcontextprotocol/", "MCP go-sdk"), ("gorm.io/", "gorm"),
    ("herd", "herd's own packages"),
]
cpu, top = collections.Counter(), []
for a in json.load(open(sys.argv[1])):
    s = (a.get("CmdUser", 0) + a.get("CmdSys", 0)) / 1e9
    if not s:
        continue
    p = a.get("Package") or ""
    top.append((s, a["Mode"], p))
    if a["Mode"] == "link":
        name = "link"
    else:
        name = next((n for pre, n in groups if p.startswith(pre)), None)
        name = name or ("standard library" if "." not in p.split("/")[0] else "other modules")
    cpu[name] += s
print("compile CPU (user+sys of each command): %.0f s" % sum(cpu.values()))
for n, s in cpu.most_common():
    print("  %6.1f s  %s" % (s, n))
print("top actions:")
for s, mode, p in sorted(top, reverse=True)[:10]:
    print("  %6.1f s  %s %s" % (s, mode, p))
PY
