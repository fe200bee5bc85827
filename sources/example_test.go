package sources_test

import (
	"context"
	"fmt"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// static is the example adapter of the package documentation: it serves
// one service with the endpoints its settings list.
type static struct {
	svc    sources.Service
	status *sources.Status
}

func (s static) Run(ctx context.Context, up chan<- sources.Update) error {
	s.status.Succeeded()
	select {
	case up <- sources.Update{Full: true, Services: []sources.Service{s.svc.Clone()}}:
	case <-ctx.Done():
	}
	<-ctx.Done()
	return ctx.Err()
}

func init() {
	sources.Register(sources.Type{
		Name: "example_static",
		New: func(cfg map[string]any, opts sources.Options) (sources.Source, error) {
			var c struct {
				Service string `mapstructure:"service"`
				Port    uint32 `mapstructure:"port"`
				Address string `mapstructure:"address"`
			}
			if err := settings.Decode(cfg, &c); err != nil {
				return nil, err
			}
			if c.Service == "" {
				return nil, settings.Errorf("service", "is required")
			}
			e := sources.Endpoint{Address: c.Address, Port: c.Port, Health: sources.HealthHealthy}
			if err := e.Validate(); err != nil {
				return nil, settings.Errorf("address", "%v", err)
			}
			opts = opts.WithDefaults()
			return static{svc: sources.Service{Name: c.Service, Endpoints: []sources.Endpoint{e}}, status: opts.Status}, nil
		},
	})
}

func Example() {
	t, _ := sources.Lookup("example_static")
	src, err := t.New(map[string]any{"service": "web", "address": "10.0.0.1", "port": 8080}, sources.Options{Name: "static"})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	up := make(chan sources.Update)
	done := make(chan error)
	go func() { done <- src.Run(ctx, up) }()
	u := <-up
	cancel()
	<-done
	fmt.Println(u.Full, u.Services[0].Name, u.Services[0].Endpoints[0].Address)
	_, err = t.New(map[string]any{"service": "web", "address": "0.0.0.0", "port": 8080}, sources.Options{})
	fmt.Println(err)
	// Output:
	// true web 10.0.0.1
	// address: address "0.0.0.0" cannot be an upstream: 0.0.0.0 is the unspecified address
}
