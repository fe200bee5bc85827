//go:build !no_file

package plugins

func init() { builtins = append(builtins, "file") }
