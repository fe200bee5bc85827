# syntax=docker/dockerfile:1
# Build: docker build -t xdsbridge --build-arg VERSION=$(git describe --always) .
# Run:   docker run -p 18000:18000 -p 19000:19000 xdsbridge
#        (serves examples/quickstart; mount your own /etc/xdsbridge/bridge.yaml)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/bridge ./cmd/bridge

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/bridge /usr/local/bin/bridge
COPY examples/quickstart/ /etc/xdsbridge/
# Inside a container the listeners must not be bound to loopback only.
ENV BRIDGE_XDS_LISTEN=0.0.0.0:18000 \
    BRIDGE_ADMIN_LISTEN=0.0.0.0:19000
USER nonroot:nonroot
EXPOSE 18000 19000
ENTRYPOINT ["/usr/local/bin/bridge", "run", "--config", "/etc/xdsbridge/bridge.yaml"]
