//go:build deps

// Package deps pins the module's direct dependencies while the packages
// that use them are written. It is never built.
package deps

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-viper/mapstructure/v2"
	_ "github.com/hashicorp/consul/api"
	_ "github.com/miekg/dns"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "go.uber.org/goleak"
	_ "go.yaml.in/yaml/v3"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/xds"
	_ "google.golang.org/protobuf/proto"
)
