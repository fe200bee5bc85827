package file

import "github.com/xdsbridge/xdsbridge/sources"

var _ sources.Checker = (*Source)(nil)

// Check reports, for `bridge validate`, a services file that cannot be
// read. It is a warning: a file written by another tool (consul-template,
// a deploy job) may legitimately appear after the bridge starts, which
// then waits for it (the source stays unsynced and says why in /sources).
func (s *Source) Check() []sources.Problem {
	if err := sources.Readable(s.path); err != nil {
		return []sources.Problem{{Key: "path", Err: err, Warning: true}}
	}
	return nil
}
