//go:build !no_http

package plugins

// The http source: services polled from a URL in the file source's format.
import _ "github.com/xdsbridge/xdsbridge/sources/http"
