// Package sources is what a registry adapter is written against: the
// normalized model every adapter emits (Service, Endpoint, Health,
// Locality, Origin), the contract it honours (Source, Update, Options), the
// registry of adapter types (Type, Register, Lookup, Types) and the Status
// through which it reports how its reads of the registry went.
//
// The contract in short: an adapter's constructor decodes its settings with
// package settings and does no I/O; Run reads the registry, sends one Full
// Update once it has read it whole and then only what changed, reports
// every read (Status.Succeeded, Status.Failed), drops and counts the
// endpoints it cannot serve (Endpoint.Validate, Status.Dropped), and on a
// failed read sends nothing, so that the last good state stays served.
//
// # Writing a source
//
// An adapter is a package that registers a Type from init(): its New
// decodes the entry's keys with settings.Decode and returns
// *settings.KeyError values naming the key (package settings holds the
// configuration decoding every layer shares), and returns a Source whose
// Run honours the contract of Source and Update below. The package example
// is a whole adapter. A file in plugins/ that imports the package for its
// side effect, under a `no_<name>` build tag, links it into the binary.
//
// The built-in adapters live in sub-packages, one per type (sources/file,
// sources/consul, ...), and register themselves from init(); the plugins
// package imports them. An adapter imports this package and settings,
// never the manager: what happens to its updates afterwards (merging by
// precedence, the removal guard, the readiness gate, warm starts) is the
// manager package's business, and an adapter neither sees nor depends on
// it.
package sources

import (
	"context"
	"log/slog"
)

// Update is what a source reports: the services it now owns that changed,
// and the names of services it no longer owns.
//
// When Full is true the update is the source's complete state: any service
// the source reported earlier and that is absent from Services is removed
// (Removed is then ignored). A source's first update must be Full. Later
// updates may be Full (the receiver computes the difference) or partial.
//
// Each Service in Services replaces the source's previous version of the
// service of that name wholesale. The receiver owns the Update once sent: the
// source must not modify it afterwards.
type Update struct {
	Full     bool
	Services []Service
	Removed  []string
	// Reset says the registry lost its state since the source last read
	// it and is filling up again: a Consul agent restarted without its
	// data (an index that went backwards, a new node ID), an agent back
	// after an outage whose catalog may still be partial. The removals
	// that this update and the following ones imply are provisional: the
	// source's removal guard holds them until the refill has settled,
	// while everything the source reports flows at once. A source sets it
	// on the first update after it noticed the reset, and only then.
	Reset bool
}

// Source watches one registry and reports the services it finds.
//
// Run blocks until ctx is done and then returns ctx.Err() (or nil). It sends
// a Full update as soon as it has read the registry once, then an update
// whenever something changed. A source that finds nothing changed sends
// nothing. Every send selects on ctx.Done(). Run never closes up.
//
// A failed read publishes nothing: the receiver keeps serving the last good
// state. The source reports the failure through Options.Status and retries
// with backoff. An authoritative answer of "no instances" is not a failure:
// it is sent as a service with no endpoints (or a removal, where the
// registry says the service itself is gone).
//
// Endpoints that cannot be served (see Endpoint.Validate) are dropped by the
// source, which counts them with Status.Dropped; the rest of the service is
// still reported. The manager applies the same check to every update (and
// caps a service at manager.MaxEndpointsPerService), so what a source lets
// through is dropped there, counted once per change of its service.
type Source interface {
	Run(ctx context.Context, up chan<- Update) error
}

// Options are what every source constructor receives besides its own
// configuration.
type Options struct {
	// Name is the unique name of this source in the configuration.
	Name string
	// BaseDir is the directory of the configuration file; relative paths in
	// a source's configuration are relative to it.
	BaseDir string
	// Logger is already scoped with the source's name.
	Logger *slog.Logger
	// Status receives the outcome of every registry read.
	Status *Status
}
