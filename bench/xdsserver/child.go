package xdsserver

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"
)

// ServeEnv is the variable that, set in a test binary's environment,
// lets the binary double as the server process: a test starts
// `<test binary> serve --impl X ...` where the load generator starts
// `xdsload serve`.
const ServeEnv = "XDSLOAD_TEST_SERVE"

// ServeIfChild serves and exits when this process is a test binary started
// as a server (ServeEnv set, first argument "serve"), and returns otherwise.
// A TestMain whose tests start servers calls it first.
func ServeIfChild() {
	if os.Getenv(ServeEnv) == "" || len(os.Args) < 2 || os.Args[1] != "serve" {
		return
	}
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	impl := fs.String("impl", "", "")
	holdoff := fs.Duration("holdoff", 0, "")
	maxHoldoff := fs.Duration("max-holdoff", 0, "")
	streams := fs.Int("streams", 0, "")
	buffers := fs.Int("grpc-buffers", 0, "")
	kaTimeout := fs.Duration("keepalive-timeout", 0, "")
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	err := Serve(ctx, Options{Impl: *impl, Holdoff: *holdoff, MaxHoldoff: *maxHoldoff, Streams: *streams,
		GRPCBuffers: *buffers, KeepaliveTimeout: *kaTimeout, XDS: "127.0.0.1:0", Control: "127.0.0.1:0", Ready: os.Stdout})
	stop()
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}
