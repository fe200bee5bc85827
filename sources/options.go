package sources

import "log/slog"

// WithDefaults returns o with a logger that discards and a fresh Status for
// o.Name where o leaves them nil, so that a source built outside the
// manager (in a test, say) needs no nil checks of its own.
func (o Options) WithDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Status == nil {
		o.Status = NewStatus(o.Name)
	}
	return o
}
