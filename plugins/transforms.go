//go:build !no_transforms

package plugins

// The built-in transforms: include, exclude, rename, metadata, override,
// locality.
import _ "github.com/xdsbridge/xdsbridge/transform/builtin"
