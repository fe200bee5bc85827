# syntax=docker/dockerfile:1
# Build: docker build -t xdsbridge --build-arg VERSION=$(git describe --always) \
#          --build-arg REVISION=$(git rev-parse HEAD) .
#        (podman: podman build --format docker ..., or the HEALTHCHECK is dropped)
# Run:   docker run -v "$PWD/examples/quickstart:/etc/xdsbridge:ro" \
#          -p 18000:18000 -p 127.0.0.1:19000:19000 xdsbridge
#        The image holds no configuration: mount yours at
#        /etc/xdsbridge/bridge.yaml (the files it names beside it). Without
#        one the bridge exits 2 naming the path, rather than serve anything.
# Other commands: the entrypoint is the bridge itself, the default command
#   `run --config /etc/xdsbridge/bridge.yaml`:
#        docker run --rm xdsbridge version
#        docker run --rm -v "$PWD:/cfg:ro" xdsbridge validate /cfg/bridge.yaml
#        docker run --rm -v "$PWD:/cfg:ro" xdsbridge dump /cfg/bridge.yaml
# Health: the image's HEALTHCHECK runs `bridge healthcheck`, which asks the
#   admin listener's /readyz on 127.0.0.1:19000 (healthy once every source has
#   synced). With the admin listener on another port, or with admin TLS, give
#   the container a HEALTHCHECK of its own (--admin, --ca-file).
# What was verified: e2e/container builds this file's final stage with podman
# on a stand-in for the distroless base (no registry to pull it from on the
# development machine) and runs the image's own files as its user (version,
# validate, run with a configuration where a volume would put it, run
# without one); the distroless base itself and a real container runtime
# were not exercised.
# The defaults are plaintext, no admin token and no profiler. To turn on:
#   mutual TLS on xDS: mount the PEM files and set them in bridge.yaml, e.g.
#       xds: {tls: {cert_file: /run/secrets/xds.pem, key_file: /run/secrets/xds-key.pem,
#                   client_ca_file: /run/secrets/ca.pem, require_client_cert: true}}
#     (or -e BRIDGE_XDS_TLS_CERT_FILE=... and the other BRIDGE_XDS_TLS_* variables)
#   an admin bearer token: -v ./token:/run/secrets/admin-token:ro
#       -e BRIDGE_ADMIN_TOKEN_FILE=/run/secrets/admin-token
#   TLS on the admin listener: BRIDGE_ADMIN_TLS_CERT_FILE / BRIDGE_ADMIN_TLS_KEY_FILE
#   the profiler (GET /debug/pprof/): -e BRIDGE_ADMIN_PPROF=true; keep the admin
#     port published on loopback only, as above
# Reload the configuration with: docker kill --signal HUP <container>
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/bridge ./cmd/bridge

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="xdsbridge" \
      org.opencontainers.image.description="Serves the services of Consul, DNS and file or HTTP registries to Envoy and proxyless gRPC over xDS" \
      org.opencontainers.image.source="https://github.com/xdsbridge/xdsbridge" \
      org.opencontainers.image.documentation="https://github.com/xdsbridge/xdsbridge#readme" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot"
COPY --from=build /out/bridge /usr/local/bin/bridge
# Inside a container the listeners must not be bound to loopback only. The
# admin listener serves no profiler unless admin.pprof is true.
# With a memory limit on the container, give the Go runtime about 80% of
# it (docker run -e GOMEMLIMIT=800MiB for a 1 GiB limit; see "Memory" in
# the README).
ENV BRIDGE_XDS_LISTEN=0.0.0.0:18000 \
    BRIDGE_ADMIN_LISTEN=0.0.0.0:19000
USER nonroot:nonroot
EXPOSE 18000 19000
# Readiness, not mere liveness: compose's depends_on (condition:
# service_healthy) waits for a bridge that serves every source. The start
# period covers a source's startup timeout (30s by default).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/bridge", "healthcheck", "--admin", "http://127.0.0.1:19000"]
# The entrypoint is the program, the command its arguments, as in other CLI
# images: `docker run IMAGE validate FILE` replaces the command only.
ENTRYPOINT ["/usr/local/bin/bridge"]
CMD ["run", "--config", "/etc/xdsbridge/bridge.yaml"]
