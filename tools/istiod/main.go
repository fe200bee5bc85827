// Command istiod runs istio's own discovery server for xdsbridge's
// end-to-end tests, reading its configuration from an MCP-over-xDS server
// the way istiod reads a `configSources: xds://` entry of its mesh config.
//
// istio's pilot-discovery binary does not start without a Kubernetes API
// server: its ServiceEntry registry asks the multicluster controller, which
// exists only with a Kubernetes client, for the config cluster, and the
// server keeps that client in an unexported field. This program therefore
// assembles the same parts from istio's exported packages, with only the
// Kubernetes API faked (istio's own fake client):
//
//   - the config source as istiod's initConfigSources builds it for an
//     xds:// address: istio's MCP client (pkg/adsc) with the initial
//     requests, node metadata (GENERATOR "api") and plain-text transport
//     istiod uses, writing into a validating in-memory store of the Pilot
//     collections whose sync is the client's;
//   - istio's ServiceEntry registry, push context and config generators
//     reading that store (pilot/pkg/networking/core's test assembly, which
//     adds the fake Kubernetes client and an empty memory registry);
//   - istio's xDS server (pilot/pkg/xds) with istiod's generators, its
//     config event handlers, and its debug handlers (/debug/configz,
//     /debug/registryz, /debug/endpointShardz, ...);
//   - istiod's start order: the xDS port is opened only once the config
//     source has synced and the push context holds it, so a client cannot
//     connect before istiod would let it.
//
// Flags name the MCP server and the loopback addresses to serve on. The
// program logs with istio's logger on stderr, and /ready on the debug
// address answers 200 once the xDS port is open.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/autoregistration"
	"istio.io/istio/pilot/pkg/bootstrap"
	"istio.io/istio/pilot/pkg/config/memory"
	istiogrpc "istio.io/istio/pilot/pkg/grpc"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core"
	"istio.io/istio/pilot/pkg/xds"
	"istio.io/istio/pkg/adsc"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/constants"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/config/schema/kind"
	"istio.io/istio/pkg/keepalive"
	kubelib "istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/krt"
	"istio.io/istio/pkg/log"
	"istio.io/istio/pkg/util/sets"
	istioxds "istio.io/istio/pkg/xds"
)

func main() {
	source := flag.String("config-source", "", "the MCP server, as in a mesh config's configSources: xds://HOST:PORT")
	grpcAddr := flag.String("grpc-addr", "127.0.0.1:15010", "address of the plain-text xDS server (istiod's --grpcAddr)")
	httpAddr := flag.String("http-addr", "127.0.0.1:8080", "address of the debug and readiness server (istiod's --httpAddr)")
	namespace := flag.String("namespace", "istio-system", "istiod's namespace (POD_NAMESPACE)")
	pod := flag.String("pod", "istiod-test", "istiod's pod name (POD_NAME)")
	flag.Parse()
	if err := run(*source, *grpcAddr, *httpAddr, *namespace, *pod); err != nil {
		log.Errorf("istiod: %v", err)
		os.Exit(1)
	}
}

func run(source, grpcAddr, httpAddr, namespace, pod string) error {
	if err := log.Configure(log.DefaultOptions()); err != nil {
		return err
	}
	host, ok := strings.CutPrefix(source, "xds://")
	if !ok || host == "" {
		return fmt.Errorf("-config-source %q: want xds://HOST:PORT", source)
	}
	life := newLifetime()
	defer life.end()
	stop := life.stop

	m := mesh.DefaultMeshConfig()
	m.ConfigSources = []*meshconfig.ConfigSource{{Address: source}}

	// The config source, as initConfigSources builds it for an xds://
	// address (no revision, plain text: istiod ignores the entry's TLS
	// settings for xds:// sources).
	mcp, err := adsc.New(host, &adsc.ADSConfig{
		InitialDiscoveryRequests: adsc.ConfigInitialRequests(),
		Config: adsc.Config{
			Namespace: namespace,
			Workload:  pod,
			Meta:      model.NodeMetadata{Generator: "api"}.ToStruct(),
			GrpcOpts: []grpc.DialOption{
				keepalive.DefaultOption().ConvertToClientOption(),
				grpc.WithTransportCredentials(insecure.NewCredentials()),
			},
		},
	})
	if err != nil {
		return fmt.Errorf("failed to dial XDS %s %v", source, err)
	}
	store := memory.NewController(memory.Make(collections.Pilot))
	store.RegisterHasSyncedHandler(mcp.HasSynced)
	mcp.Store = store
	if err := mcp.Run(); err != nil {
		return fmt.Errorf("MCP: failed running %v", err)
	}
	log.Infof("Started XDS configSource %s", source)

	ds := xds.NewDiscoveryServer(model.NewEnvironment(), nil, krt.GlobalDebugHandler)
	life.cleanup(ds.Shutdown)
	cg := core.NewConfigGenTest(life, core.TestOptions{
		ConfigController: store,
		MeshConfig:       m,
		XDSUpdater:       ds,
		SkipRun:          true,
		ClusterID:        constants.DefaultClusterName,
	})
	ds.Env = cg.Env()
	if err := ds.Env.InitNetworksManager(ds); err != nil {
		return err
	}
	bootstrap.InitGenerators(ds, core.NewConfigGenerator(ds.Cache), namespace, constants.DefaultClusterName, nil)
	ds.WorkloadEntryController = autoregistration.NewController(cg.Store(), pod, keepalive.Infinity)
	handleEvents(ds, cg)

	mux := http.NewServeMux()
	ds.InitDebug(mux, false, func() map[string]string { return nil })
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !ds.IsServerReady() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	})
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(hl) }()
	life.cleanup(func() { _ = hs.Close() })

	ds.Start(stop)
	// istiod waits for its config stores without a deadline before it
	// opens its xDS port (Server.waitForCacheSync); so does this.
	log.Infof("Waiting for the config source %s to sync", source)
	if !kubelib.WaitForCacheSync("config source", stop, store.HasSynced) {
		return errors.New("stopped before the config source synced")
	}
	cg.Run()
	cg.ServiceEntryRegistry.ResyncEDS()
	ds.ConfigUpdate(&model.PushRequest{Forced: true, Reason: model.NewReasonStats(model.GlobalUpdate)})
	expected := ds.InboundUpdates.Load()
	if !kubelib.WaitForCacheSync("push context", stop, func() bool { return ds.CommittedUpdates.Load() >= expected }) {
		return errors.New("stopped before the push context was ready")
	}
	ds.CachesSynced()

	km := keepalive.DefaultOption()
	gs := grpc.NewServer(istiogrpc.ServerOptions(km, istioxds.RecordRecvSize)...)
	ds.Register(gs)
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return err
	}
	go func() { _ = gs.Serve(gl) }()
	life.cleanup(gs.Stop)
	log.Infof("starting gRPC discovery service at %s", gl.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	log.Infof("received %v, stopping", <-sig)
	return nil
}

// handleEvents makes a change of any config kind other than those the
// ServiceEntry registry watches itself push, as istiod's
// initRegistryEventHandlers does.
func handleEvents(ds *xds.DiscoveryServer, cg *core.ConfigGenTest) {
	cg.Registry.AppendServiceHandler(func(_, curr *model.Service, _ model.Event) {
		ds.ConfigUpdate(&model.PushRequest{
			ConfigsUpdated: sets.New(model.ConfigKey{Kind: kind.ServiceEntry, Name: string(curr.Hostname), Namespace: curr.Attributes.Namespace}),
			Reason:         model.NewReasonStats(model.ServiceUpdate),
		})
	})
	for _, s := range collections.Pilot.All() {
		k := s.GroupVersionKind()
		switch k {
		case gvk.ServiceEntry, gvk.WorkloadEntry, gvk.WorkloadGroup, gvk.VirtualService, gvk.WasmPlugin:
			continue // watched by their own controllers
		}
		cg.Store().RegisterEventHandler(k, func(prev, curr config.Config, ev model.Event) {
			if ev == model.EventUpdate && !model.NeedsPush(prev, curr) {
				return
			}
			ds.ConfigUpdate(&model.PushRequest{
				ConfigsUpdated: sets.New(model.ConfigKey{Kind: gvk.MustToKind(curr.GroupVersionKind), Name: curr.Name, Namespace: curr.Namespace}),
				Reason:         model.NewReasonStats(model.ConfigUpdate),
			})
		})
	}
}

// lifetime stands in for the testing.T that istio's test assembly expects
// (its test.Failer): cleanups run when the program ends, and a fatal error
// ends the program.
type lifetime struct {
	stop chan struct{}

	mu       sync.Mutex
	cleanups []func()
}

func newLifetime() *lifetime { return &lifetime{stop: make(chan struct{})} }

func (l *lifetime) end() {
	close(l.stop)
	l.mu.Lock()
	cs := l.cleanups
	l.cleanups = nil
	l.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

func (l *lifetime) cleanup(f func()) { l.Cleanup(f) }

// fail ends the program: the caller expects not to return
// (testing.T.FailNow).
func (l *lifetime) fail(msg string) {
	log.Errorf("istiod: %s", msg)
	os.Exit(1)
}

func (l *lifetime) Fail()                        { l.fail("failed") }
func (l *lifetime) FailNow()                     { l.fail("failed") }
func (l *lifetime) Fatal(args ...any)            { l.fail(fmt.Sprint(args...)) }
func (l *lifetime) Fatalf(f string, args ...any) { l.fail(fmt.Sprintf(f, args...)) }
func (l *lifetime) Skip(args ...any)             { l.fail(fmt.Sprint(args...)) }
func (l *lifetime) Log(args ...any)              { log.Info(fmt.Sprint(args...)) }
func (l *lifetime) Logf(f string, args ...any)   { log.Infof(f, args...) }
func (l *lifetime) Helper()                      {}
func (l *lifetime) Cleanup(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cleanups = append(l.cleanups, f)
}

func (l *lifetime) TempDir() string {
	d, err := os.MkdirTemp("", "istiod")
	if err != nil {
		l.fail(err.Error())
	}
	l.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}
