//go:build !no_file

package plugins

// The file source: services from a YAML or JSON file.
import _ "github.com/xdsbridge/xdsbridge/sources/file"
