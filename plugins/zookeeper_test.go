//go:build !no_zookeeper

package plugins

func init() { builtins = append(builtins, "zookeeper") }
