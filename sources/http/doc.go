// Package http is the `type: http` source: services polled from a URL that
// returns a document of the file source (see sources/file): its own
// format, or Prometheus target groups, so that an existing http_sd
// endpoint serves as it is. It is how a registry without an adapter of its
// own (Eureka, ZooKeeper behind a small service, a CMDB) feeds the bridge
// without Go code.
//
// Configuration keys (besides name and type):
//
//	url: https://cmdb.example.org/xds/services.json   # required; http or https
//	interval: 30s              # time between the end of one poll and the next
//	timeout: 10s               # bound on one request, body included
//	max_body_bytes: 10485760   # a larger answer is an error (default 10 MiB)
//	bearer_token_file: /run/secrets/cmdb   # optional; sent as "Authorization: Bearer"
//	tls:                       # optional; https only
//	  ca_file: ca.pem          # trust these CAs instead of the system's
//	  cert_file: client.pem    # client certificate and key, both or neither
//	  key_file: client-key.pem
//	  server_name: cmdb        # optional; the name to verify (default: the URL's host)
//	format: auto               # auto | xdsbridge | prometheus, as the file source's
//	service_label: job         # target groups: the label that names the service
//	default_service: ""        # target groups: the service of groups without that label
//
// Relative file paths are relative to the configuration file. The token
// file is read before every request, so a rotated token is used from the
// next poll on; the client certificate is read at every TLS handshake, and
// the CA file when the source starts.
//
// The body is a document of the file source, the xdsbridge format or a
// list of Prometheus target groups (told apart by the top-level value, a
// mapping or a list, unless format declares one):
//
//	{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 8080}]}]}
//	[{"targets": ["10.0.0.1:8080"], "labels": {"job": "web"}}]
//
// It is JSON or YAML as its Content-Type says (application/json or any
// +json type; application/yaml, application/x-yaml, text/yaml, text/x-yaml
// or any +yaml type). Under any other Content-Type, or none (a file server
// often says application/octet-stream or text/plain), a body whose first
// character other than white space is `{` or `[` is JSON, anything else
// YAML. A parse error says which was chosen and why: `parsing the body as
// YAML (Content-Type "application/octet-stream" is neither JSON nor YAML;
// sniffed YAML): ...`. Prometheus itself takes http_sd answers as JSON
// under application/json only; every answer it takes is taken here. Each
// request carries the X-Prometheus-Refresh-Interval-Seconds header that
// Prometheus sends, set to interval.
//
// Every poll ends in one of three outcomes:
//
//   - a good answer (200 with a valid document) replaces the source's
//     state; `{"services": []}` (or `[]`) is an authoritative "no
//     services" and removes them all. The answer's ETag is sent back as If-None-Match,
//     and a 304 Not Modified confirms the state without a transfer.
//   - anything else (a transport error, a timeout, another status, a body
//     over max_body_bytes, a document the file source would reject, an
//     unreadable token) is a failed read: the last good state stays served,
//     the source is marked stale in /sources and the metrics, the failure
//     is logged once (then at most once a minute, with a count, and once
//     when a poll succeeds again), and the poll is retried after a
//     backoff: a second (or interval, when shorter), doubling up to
//     interval, with jitter. A registry that stays down is asked about
//     once an interval, as it is when it is up.
//
// A document is read as a file is: in the xdsbridge format it is all or
// nothing, one bad endpoint rejecting the whole answer with an error naming
// the field; in target groups a bad shape rejects it so, but a target that
// is not IP:port or cannot be served is dropped, counted in
// dropped_endpoints once per changed answer, and named in the source's
// status notes, and the rest is served.
//
// The document is parsed by the file source's own parser (file.Schema), so
// the two formats cannot drift apart; linking this source in therefore
// links in sources/file too, whose type stays registered even in a binary
// built with no_file.
package http
