//go:build !no_etcd

package plugins

func init() { builtins = append(builtins, "etcd") }
