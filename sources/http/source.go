package http

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	nethttp "net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/internal/filestamp"
	"github.com/xdsbridge/xdsbridge/settings"
	"github.com/xdsbridge/xdsbridge/sources"
)

// Type is the value of the `type` key that selects this source.
const Type = "http"

func init() {
	sources.Register(sources.Type{Name: Type, New: New})
}

// Source polls one URL. Create it with New.
type Source struct {
	cfg    Config
	url    *url.URL
	log    *slog.Logger
	status *sources.Status
}

var _ sources.Source = (*Source)(nil)

// New decodes and validates cfg. It does no I/O: files are read by Run.
func New(cfg map[string]any, opts sources.Options) (sources.Source, error) {
	c := defaults()
	if err := settings.Decode(cfg, &c); err != nil {
		return nil, err
	}
	u, err := c.validate()
	if err != nil {
		return nil, err
	}
	c.resolve(opts.BaseDir)
	opts = opts.WithDefaults()
	return &Source{cfg: c, url: u, log: opts.Logger, status: opts.Status}, nil
}

// poller is the state of one Run: the client, and what the last good
// answer was, so that an unchanged answer sends nothing.
type poller struct {
	*Source
	client *nethttp.Client
	etag   string
	digest [sha256.Size]byte
	synced bool
}

// Run polls every interval until ctx is done (see sources.Source). A
// failed poll is retried after the source's backoff: from a second (or
// the interval, when shorter), doubling up to the interval, so that a
// blip is over within a second and an outage costs the registry one
// request an interval, as polling does.
func (s *Source) Run(ctx context.Context, up chan<- sources.Update) error {
	p := &poller{Source: s}
	defer func() {
		if p.client != nil {
			p.client.CloseIdleConnections()
		}
	}()
	bo := sources.Backoff{Min: min(s.cfg.Interval, time.Second), Max: s.cfg.Interval}
	fails := sources.FailureLog{Log: s.log, FailingMsg: "registry read failed; keeping the last good state",
		RecoveredMsg: "registry read succeeded again"}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		u, err := p.poll(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			err = fmt.Errorf("polling %s: %w", s.url.Redacted(), err)
			s.status.Failed(err)
			fails.Failed(err)
			timer.Reset(bo.Next())
			continue
		}
		bo.Reset()
		fails.Recovered()
		s.status.Succeeded()
		if u != nil {
			select {
			case up <- *u:
			case <-ctx.Done():
				return nil
			}
		}
		timer.Reset(s.cfg.Interval)
	}
}

// errNotModified is the outcome of a 304.
var errNotModified = errors.New("not modified")

// poll makes one request. It returns the update to send (nil when the
// answer did not change) or why the read failed.
func (p *poller) poll(ctx context.Context) (*sources.Update, error) {
	if p.client == nil {
		c, err := p.newClient()
		if err != nil {
			return nil, err
		}
		p.client = c
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	body, contentType, etag, err := p.fetch(ctx)
	if errors.Is(err, errNotModified) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	isJSON, why := bodyFormat(contentType, body)
	digest := sha256.Sum256(append(body, boolByte(isJSON)))
	if p.synced && digest == p.digest {
		p.etag = etag
		return nil, nil
	}
	doc, err := p.cfg.Schema.Parse(body, isJSON)
	if err != nil {
		as := "YAML"
		if isJSON {
			as = "JSON"
		}
		return nil, fmt.Errorf("parsing the body as %s (%s): %w", as, why, err)
	}
	doc.Dropped.Record(p.status, p.log, p.url.Redacted())
	p.etag, p.digest, p.synced = etag, digest, true
	return &sources.Update{Full: true, Services: doc.Services}, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// bodyFormat decides whether a body is JSON or YAML, and says why: by its
// Content-Type where that names either (application/json and */*+json;
// application/yaml, application/x-yaml, text/yaml, text/x-yaml and
// */*+yaml), else by its first byte other than white space (`{` or `[`
// is JSON, anything else YAML), since a server may well label a file it
// serves application/octet-stream or text/plain.
func bodyFormat(contentType string, body []byte) (isJSON bool, why string) {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		switch {
		case mt == "application/json" || strings.HasSuffix(mt, "+json"):
			return true, "Content-Type " + mt
		case mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" ||
			mt == "text/x-yaml" || strings.HasSuffix(mt, "+yaml"):
			return false, "Content-Type " + mt
		}
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	isJSON = len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
	sniffed := "sniffed YAML"
	if isJSON {
		sniffed = "sniffed JSON"
	}
	if strings.TrimSpace(contentType) == "" {
		return isJSON, "no Content-Type; " + sniffed
	}
	return isJSON, fmt.Sprintf("Content-Type %q is neither JSON nor YAML; %s", contentType, sniffed)
}

// fetch GETs the URL and returns the body, its Content-Type, and the
// answer's ETag; errNotModified for a 304.
func (p *poller) fetch(ctx context.Context) (body []byte, contentType, etag string, err error) {
	req, err := nethttp.NewRequestWithContext(ctx, nethttp.MethodGet, p.url.String(), nil)
	if err != nil {
		return nil, "", "", err
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9")
	req.Header.Set("User-Agent", "xdsbridge")
	// What Prometheus sends to an http_sd endpoint, which may use it to
	// pace its caches.
	req.Header.Set("X-Prometheus-Refresh-Interval-Seconds", strconv.FormatFloat(p.cfg.Interval.Seconds(), 'f', -1, 64))
	if p.synced && p.etag != "" {
		req.Header.Set("If-None-Match", p.etag)
	}
	if p.cfg.BearerTokenFile != "" {
		t, err := filestamp.ReadToken(p.cfg.BearerTokenFile)
		if err != nil {
			return nil, "", "", fmt.Errorf("reading bearer_token_file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+t)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, "", "", err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == nethttp.StatusNotModified && req.Header.Get("If-None-Match") != "":
		return nil, "", "", errNotModified
	case resp.StatusCode != nethttp.StatusOK:
		// A little of the body says why, for the log; the rest is dropped.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return nil, "", "", fmt.Errorf("status %s: %q", resp.Status, strings.TrimSpace(string(msg)))
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, p.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, "", "", fmt.Errorf("reading the body: %w", err)
	}
	if int64(len(body)) > p.cfg.MaxBodyBytes {
		return nil, "", "", fmt.Errorf("body exceeds max_body_bytes (%d)", p.cfg.MaxBodyBytes)
	}
	return body, resp.Header.Get("Content-Type"), resp.Header.Get("ETag"), nil
}

// newClient builds the HTTP client of the source's TLS settings (see
// tlsclient.Files.Config).
func (p *poller) newClient() (*nethttp.Client, error) {
	tr := nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	if p.cfg.TLS.Set() {
		tc, err := p.cfg.TLS.Config()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	return &nethttp.Client{Transport: tr}, nil
}
