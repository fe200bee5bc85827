// Package wire is the bottom layer of the xDS engine (package xds): how
// responses and requests look on the wire, and what bounds the memory they
// hold. It knows bytes, records and budgets, not resources, clients or the
// protocol's rules.
//
//   - encode.go: the records a response is assembled from, encoded once
//     per resource version (Record, EncodeRecord), their concatenation
//     (Records, Run), and what a response carries besides them (Envelope).
//   - budget.go: the budget that bounds the memory responses in flight keep
//     alive (Budget, Grant), and what a response presents to the codec and
//     the budget (Msg, Tracking).
//   - admit.go: large requests admitted within the request budget before
//     they are decoded (Inbound), and the leases with which new streams
//     take turns to read their first request (FirstReads).
//   - codec.go: the gRPC codec (Codec): responses sent from their shared
//     records, name lists decoded once per distinct list and shared
//     (IsShared), and a delta request's initial versions kept as the
//     records they came in (InitialVersions).
package wire
