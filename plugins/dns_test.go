//go:build !no_dns

package plugins

func init() { builtins = append(builtins, "dns") }
