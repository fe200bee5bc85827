// Package plugins fixes which source types (and transform types, see
// transforms.go) a bridge binary contains.
//
// Every source type registers itself with sources.Register from its
// package's init function, so a type is available exactly when its package
// is linked in. This package is the one place that links in the built-ins:
// one file per built-in, each a blank import guarded by a build tag. The
// command imports this package (for its side effects) and nothing else
// decides the set.
//
// A slim binary leaves a built-in out with the tag `no_<name>`, for example
//
//	go build -tags no_consul ./cmd/bridge
//
// drops the Consul source and its client library; a configuration that
// still uses `type: consul` is then rejected as an unknown source type. A
// new built-in is added the same way: its package registers from init, and a
// file here imports it under its own `no_<name>` tag.
package plugins
