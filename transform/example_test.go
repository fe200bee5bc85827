package transform_test

import (
	"fmt"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
	"github.com/xdsbridge/xdsbridge/transform"
)

// dropPort is the example plugin of the package documentation.
type dropPort struct{ port uint32 }

func (d dropPort) Service(svc sources.Service) (sources.Service, bool) {
	keep := func(e sources.Endpoint) bool { return e.Port != d.port }
	return transform.Filter(svc, keep), true
}

func init() {
	transform.Register(transform.Type{
		Name: "drop_port",
		New: func(cfg map[string]any, _ transform.Options) (transform.Transform, error) {
			var c struct {
				Port uint32 `mapstructure:"port"`
			}
			if err := settings.Decode(cfg, &c); err != nil {
				return nil, err
			}
			if c.Port == 0 {
				return nil, settings.Errorf("port", "is required")
			}
			return dropPort{c.Port}, nil
		},
	})
}

func Example() {
	chain, err := transform.NewChain([]transform.Entry{{Type: "drop_port", Settings: map[string]any{"port": 9090}}})
	if err != nil {
		panic(err)
	}
	svc, _ := chain.Service(sources.Service{Name: "web", Endpoints: []sources.Endpoint{
		{Address: "10.0.0.1", Port: 8080}, {Address: "10.0.0.1", Port: 9090},
	}})
	for _, e := range svc.Endpoints {
		fmt.Printf("%s:%d\n", e.Address, e.Port)
	}
	_, err = transform.NewChain([]transform.Entry{{Index: 2, Type: "drop_port", Settings: map[string]any{}}})
	fmt.Println(err)
	// Output:
	// 10.0.0.1:8080
	// transforms[2].port: is required
}
