//go:build !no_consul

package plugins

func init() { builtins = append(builtins, "consul") }
