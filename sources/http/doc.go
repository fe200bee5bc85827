// Package http is the `type: http` source: services polled from a URL that
// returns the file source's format (see sources/file), the pattern of
// Prometheus' http_sd. It is how a registry without an adapter of its own
// (Eureka, ZooKeeper behind a small service, a CMDB) feeds the bridge
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
//
// Relative file paths are relative to the configuration file. The token
// file is read before every request, so a rotated token is used from the
// next poll on; the client certificate is read at every TLS handshake, and
// the CA file when the source starts.
//
// The body is the file source's document, JSON unless the Content-Type
// says YAML:
//
//	{"services": [{"name": "web", "endpoints": [{"address": "10.0.0.1", "port": 8080}]}]}
//
// Every poll ends in one of three outcomes:
//
//   - a good answer (200 with a valid document) replaces the source's
//     state; `{"services": []}` is an authoritative "no services" and
//     removes them all. The answer's ETag is sent back as If-None-Match,
//     and a 304 Not Modified confirms the state without a transfer.
//   - anything else (a transport error, a timeout, another status, a body
//     over max_body_bytes, a document the file source would reject, an
//     unreadable token) is a failed read: the last good state stays served,
//     the source is marked stale in /sources and the metrics, the failure
//     is logged once, and the next poll comes after interval as usual.
//
// A document is all or nothing, as a file is: one bad endpoint rejects the
// whole answer with an error naming the field.
//
// The document is parsed by the file source's own parser (file.Parse), so
// the two formats cannot drift apart; linking this source in therefore
// links in sources/file too, whose type stays registered even in a binary
// built with no_file.
package http
