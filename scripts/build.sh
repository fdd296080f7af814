#!/bin/sh
# scripts/build.sh OUT — builds the herd binary OUT. The one place its flags
# live: `make build` and `make run` call it, the Dockerfile calls it, and
# .goreleaser.yaml repeats its flags (TestBuildFlagsAgree checks they match).
# GOTAGS (set in the Makefile) are passed as -tags. docs/PERFORMANCE.md,
# "First start (issue 26)", has the measurements behind each flag.
set -eu

out=${1:?usage: scripts/build.sh OUT}
GO=${GO:-go}
GOTAGS=${GOTAGS:-}

# cgo is needed by the SQLite driver. Its 9.6 MB C amalgamation is the
# build's longest single step; Go's default CGO_CFLAGS (-O2 -g) spend part of
# it on C debug information nobody reads, so -O2 alone (same code).
export CGO_ENABLED=1
export CGO_CFLAGS="${CGO_CFLAGS:--O2}"

# -trimpath: no build machine paths in the binary. -s -w: no symbol table or
# DWARF (panics still print function names and lines), a smaller binary and
# a shorter link. -gcflags -l on the two provider SDKs: their generated
# packages are half the cold build's compile time, a third of theirs spent
# inlining code whose every call waits on a model server.
# At least 4 packages compiled at once, even on 2 cores: go's default of
# one per core leaves the serial chain through openai-go waiting (a cold
# build on 2 quiet cores: 192 s with -p 2, 127 s with -p 4). It changes
# when things compile, not the binary, so the release need not repeat it.
jobs=$(nproc 2>/dev/null || echo 1)
[ "$jobs" -ge 4 ] || jobs=4

# Said before the long part, so a first `make run` does not look hung.
echo "building herd — the first build takes a few minutes, later ones seconds…" >&2
exec "$GO" build -p "$jobs" -trimpath -tags "$GOTAGS" -ldflags "-s -w" \
	-gcflags "github.com/openai/openai-go/v3/...=-l" \
	-gcflags "github.com/anthropics/anthropic-sdk-go/v2/...=-l" \
	-o "$out" .
