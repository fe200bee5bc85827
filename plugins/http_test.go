//go:build !no_http

package plugins

func init() { builtins = append(builtins, "http") }
