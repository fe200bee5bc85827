package xds

import "github.com/xdsbridge/xdsbridge/xds/wire"

// subscription is what a watch's client asked for. The stream's reader
// goroutine is its only writer: of wildcard, started, everNamed and named
// holding Server.mu and client.mu, so they may be read under either; of
// namesHash and lastNames holding client.mu only, as only the reader
// reads them. The names subscribed explicitly are the keys of the watch's
// sent set while wildcard is off, and named while it is on.
type subscription struct {
	wildcard bool
	// started: the watch's first request was handled.
	started bool
	// everNamed: a SotW request of this watch named something (or "*"), so
	// an empty list no longer means wildcard but "nothing".
	everNamed bool
	// namesHash is the digest of the latest SotW resource_names
	// (hashNames), and lastNames the list itself when it was a shared list
	// from Codec: the same list again is recognised by identity.
	namesHash uint64
	lastNames []string
	// named are the explicit names while wildcard is on.
	named map[*slot]struct{}
}

// sameList reports whether names is the very list of the latest SotW
// request (a list Codec shares): the subscription is unchanged.
func (s *subscription) sameList(names []string) bool {
	return s.started && len(names) > 0 && len(names) == len(s.lastNames) && &names[0] == &s.lastNames[0]
}

// remember records names, whose digest is h, as the latest SotW list.
func (s *subscription) remember(names []string, h uint64) {
	s.namesHash, s.lastNames = h, nil
	if wire.IsShared(names) {
		s.lastNames = names
	}
}

// isNamed reports whether sl is subscribed by name under the wildcard.
func (s *subscription) isNamed(sl *slot) bool {
	_, ok := s.named[sl]
	return ok
}
