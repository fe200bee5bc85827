package scalar

import (
	"errors"
	"net/url"
)

// URL parses s as a URL, its error the reason alone (`invalid port ":x"
// after host`), without the parser's `parse "...":` around it.
func URL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return nil, ue.Err
	}
	return u, err
}
