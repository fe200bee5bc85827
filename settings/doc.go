// Package settings decodes the bridge's configuration and words what is
// wrong with it. It is the one package that every layer which reads
// configuration shares: the bridge's own config loader, the source
// adapters, the transforms and the translation's shaping rules import it to
// report errors, and nothing else.
//
// The contract:
//   - A configuration error is a *KeyError naming the offending key
//     (`sources[1].servers[0]: "x" is not host:port`). Errorf makes one;
//     Prefix places a nested error under its parent's key, so that each
//     layer names only its own keys; Attribute records where a value came
//     from when that is not the file (an environment variable).
//   - Decode copies a raw mapping into a tagged struct, strictly: unknown
//     keys, values of the wrong kind and durations without a unit are
//     errors that show the value and say what is allowed. It never
//     converts silently (a bare number is not a duration in nanoseconds,
//     true is not 1).
//   - Registry[T] holds plugins of one kind by name (source types,
//     transform types); they register from init(), and a duplicate name
//     is a programming error that panics.
//
// The package does no I/O and holds no state besides the registries.
package settings
