// Package http is the `type: http` source: a document of the file source
// (its own format, or Prometheus target groups, so that an existing http_sd
// endpoint serves as it is) polled from a URL. It is how a registry without
// an adapter of its own feeds the bridge without Go code. Its keys and
// defaults are in docs/configuration.md; docs/http.md is its guide.
//
// One goroutine polls: a request, then a pause of interval. The last
// answer's ETag goes back as If-None-Match, so an unchanged registry costs
// a 304 and no parse. The body is read by the file source's own parser
// (file.Schema), so that the two sources cannot read one document
// differently: the xdsbridge format all or nothing, target groups with
// their bad targets dropped and counted. JSON or YAML is chosen by the
// Content-Type, and by the body's first character under any other type,
// because file servers label documents loosely; a parse error says which
// was chosen and why.
//
// Every poll ends in one of three outcomes:
//
//   - a 200 with a valid document replaces the source's state; an empty
//     one is an authoritative "no services";
//   - a 304 confirms the state;
//   - anything else (a transport error, a timeout, another status, a body
//     over max_body_bytes, a document the file source would reject, an
//     unreadable token) is a failed read: the last good state stays
//     served, the source is stale, the failure is logged once (then at
//     most once a minute with a count, and once when a poll succeeds
//     again), and the poll is retried with a jittered backoff capped at
//     interval, so a registry that stays down is asked no more often than
//     one that is up.
//
// The token file is read before every request and the client certificate
// at every handshake, so that rotated credentials need no restart.
// Linking this source in links in sources/file too, whose type stays
// registered even in a binary built with no_file.
package http
