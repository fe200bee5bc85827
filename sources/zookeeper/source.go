package zookeeper

import (
	"context"
	"log/slog"

	"github.com/go-zookeeper/zk"

	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Type is the value of the `type` key that selects this source.
const Type = "zookeeper"

func init() {
	sources.Register(sources.Type{Name: Type, New: func(cfg map[string]any, opts sources.Options) (sources.Source, error) {
		return New(cfg, opts)
	}})
}

var _ sources.Source = (*Source)(nil)

// Source watches services registered in ZooKeeper; see the package doc.
type Source struct {
	cfg    Config
	log    *slog.Logger
	status *sources.Status
}

// New decodes and validates a source's configuration. It does no I/O:
// the password and TLS files are read by Run.
func New(raw map[string]any, opts sources.Options) (*Source, error) {
	c := defaults()
	if err := settings.Decode(raw, &c); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.resolve(opts.BaseDir)
	opts = opts.WithDefaults()
	return &Source{cfg: c, log: opts.Logger, status: opts.Status}, nil
}

// Run watches the configured paths until ctx ends; see sources.Source.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	dial, err := s.cfg.dialer()
	if err != nil {
		s.status.Failed(err)
		s.log.Error("cannot start the zookeeper source", "err", err)
		return err
	}
	in := newInbox()
	p := &pacer{ctx: ctx, dial: dial, report: in.dialFailed, bo: sources.Backoff{Min: s.cfg.RetryMin, Max: s.cfg.RetryMax}}
	conn, _, err := zk.Connect(s.cfg.Servers, s.cfg.SessionTimeout,
		zk.WithDialer(p.Dial),
		zk.WithHostProvider(&hosts{servers: s.cfg.Servers}),
		zk.WithLogger(zkLog{s.log}),
		zk.WithLogInfo(false),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				p.established()
			}
			in.event(ev)
		}))
	if err != nil {
		s.status.Failed(err)
		return err
	}
	// Close ends the session (the bridge registers nothing, so nothing
	// vanishes) and unblocks any read waiting for a connection.
	stop := context.AfterFunc(ctx, conn.Close)
	defer func() {
		if stop() {
			conn.Close()
		}
	}()
	return newLoop(s, conn, in).run(ctx, up)
}
