package config

import "github.com/xdsbridge/xdsbridge/settings"

// Limits bound what one xDS client can make the bridge hold (xds.limits.*);
// see xds.Limits for what each bounds and how a breach is answered. The
// fields match xds.Limits one for one, so that xds.Limits(l) converts; the
// defaults (in defaults) are xds.DefaultLimits.
type Limits struct {
	NamesPerRequest      int `mapstructure:"names_per_request"`
	NamesPerSubscription int `mapstructure:"names_per_subscription"`
	UnknownNames         int `mapstructure:"unknown_names"`
	Streams              int `mapstructure:"streams"`
	StreamsPerConnection int `mapstructure:"streams_per_connection"`
	RequestBytes         int `mapstructure:"request_bytes"`
}

// validate checks that every limit is positive, naming the first bad key.
func (l Limits) validate() error {
	for _, f := range []struct {
		key string
		val int
	}{
		{"xds.limits.names_per_request", l.NamesPerRequest},
		{"xds.limits.names_per_subscription", l.NamesPerSubscription},
		{"xds.limits.unknown_names", l.UnknownNames},
		{"xds.limits.streams", l.Streams},
		{"xds.limits.streams_per_connection", l.StreamsPerConnection},
		{"xds.limits.request_bytes", l.RequestBytes},
	} {
		if f.val <= 0 {
			return settings.Errorf(f.key, "must be a positive number, not %d", f.val)
		}
	}
	if l.StreamsPerConnection > l.Streams {
		return settings.Errorf("xds.limits.streams_per_connection", "%d is more than xds.limits.streams (%d)", l.StreamsPerConnection, l.Streams)
	}
	return nil
}
