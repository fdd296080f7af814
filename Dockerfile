# herd in a container: docker build -t herd . && docker run -p 8080:8080 -v herd-data:/data herd
# The binary is built by `make build`, that is scripts/build.sh, the same
# script and flags as a local build and the release (.goreleaser.yaml;
# TestBuildFlagsAgree checks the three agree).

# The builder: Debian's Go image has gcc, libc6-dev and make (cgo, SQLite).
FROM golang:1.26-trixie AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build

# The runtime: the same Debian release as the builder (the binary links
# glibc dynamically), bubblewrap for the sandbox, CA certificates for model
# APIs, tini to reap the commands' orphaned processes.
FROM debian:trixie-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin herd \
 && mkdir /data && chown herd:herd /data
COPY --from=build /src/herd /usr/local/bin/herd
USER herd
# Listen on every interface of the container (reach it through -p). bash
# runs only in bubblewrap: without it (bwrap needs user namespaces, which a
# default seccomp profile may refuse; docs/OPERATIONS.md "The sandbox") herd
# starts without bash rather than running commands unconfined.
ENV HERD_SERVER_ADDR=0.0.0.0:8080 \
    HERD_SANDBOX_ALLOW_HOST_BASH=false
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/herd", "--data-dir", "/data"]
