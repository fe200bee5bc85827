package rest

import (
	"cmp"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/xdsbridge/xdsbridge/xds"
)

// maxIDLen bounds the node id kept per poller: client input.
const maxIDLen = 256

var decodeOptions = protojson.UnmarshalOptions{DiscardUnknown: true}

// ServeHTTP answers one poll; see the package comment.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	typ, ok := paths[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST with a JSON DiscoveryRequest", http.StatusMethodNotAllowed)
		return
	}
	if !h.opts.Server.Ready() {
		http.Error(w, "not ready: the sources have not all synced yet", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, "request body over "+strconv.FormatInt(h.opts.MaxRequestBytes, 10)+" bytes", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req discoveryv3.DiscoveryRequest
	if err := decodeOptions.Unmarshal(body, &req); err != nil {
		http.Error(w, "decoding DiscoveryRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.TypeUrl != "" && req.TypeUrl != typ {
		http.Error(w, "type_url "+req.TypeUrl+" is not served at "+r.URL.Path, http.StatusBadRequest)
		return
	}
	a, err := h.answer(typ, &req)
	if err != nil {
		h.log.Error("building a REST response", "type", typ, "err", err)
		http.Error(w, "building response", http.StatusInternalServerError)
		return
	}
	if !h.record(typ, &req, r.RemoteAddr, a.version) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(a.body)
}

// answer builds (or takes from the cache) the response to req.
func (h *Handler) answer(typ string, req *discoveryv3.DiscoveryRequest) (*answer, error) {
	view := xds.View{Rewrite: h.rewrite, GRPC: xds.IsGRPC(req.GetNode())}
	names := req.GetResourceNames()
	if slices.Contains(names, "*") {
		names = nil
	}
	var key cacheKey
	var gen uint64
	if len(names) == 0 {
		key = cacheKey{typ, view.GRPC}
		gen = h.opts.Server.Generation(typ) // before reading: a change meanwhile only costs a rebuild
		h.mu.Lock()
		a := h.cache[key]
		h.mu.Unlock()
		if a != nil && a.gen == gen {
			return a, nil
		}
	}
	items, _ := h.opts.Server.Select(typ, names, view)
	a := &answer{gen: gen, version: xds.VersionOf(items)}
	if req.GetVersionInfo() == a.version && len(names) > 0 {
		return a, nil // not modified: no body needed
	}
	var err error
	if a.body, err = xds.ResponseJSON(typ, a.version, items); err != nil {
		return nil, err
	}
	if len(names) == 0 {
		h.mu.Lock()
		h.cache[key] = a
		h.mu.Unlock()
	}
	return a, nil
}

// record remembers the poll of req, answered with version, and reports
// whether the answer must be sent (false: 304 Not Modified).
func (h *Handler) record(typ string, req *discoveryv3.DiscoveryRequest, peer, version string) bool {
	id := req.GetNode().GetId()
	if id == "" {
		id = peer
	}
	id = truncate(id)
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pollers[id]
	if p == nil {
		p = h.newPoller(id, req, peer, now)
	}
	p.seen = now
	pt := p.types[typ]
	if pt == nil {
		pt = &pollType{TypeStatus: xds.TypeStatus{TypeURL: typ}}
		p.types[typ] = pt
	}
	pt.Subscribed = len(req.GetResourceNames())
	pt.Wildcard = pt.Subscribed == 0 || slices.Contains(req.GetResourceNames(), "*")
	if d := req.GetErrorDetail(); d != nil {
		// A NACK rejects what was last sent to this node.
		n := 1
		if pt.NACK != nil {
			n = pt.NACK.Count + 1
		}
		pt.NACK = &xds.NACKStatus{Version: pt.LastVersion, Error: d.GetMessage(), At: now, Count: n}
		pt.rejected = pt.LastVersion
		h.opts.Server.RecordNACK(typ, id, pt.LastVersion, d.GetMessage())
	} else if v := req.GetVersionInfo(); v != "" {
		pt.AckedVersion = v
	}
	if version == req.GetVersionInfo() || version == pt.rejected {
		return false
	}
	pt.LastVersion = version
	pt.Pushes++
	return true
}

// newPoller adds a poller, evicting the least recently seen one when the
// table is full. h.mu held.
func (h *Handler) newPoller(id string, req *discoveryv3.DiscoveryRequest, peer string, now time.Time) *poller {
	if len(h.pollers) >= h.opts.MaxClients {
		var oldest string
		var at time.Time
		for k, p := range h.pollers {
			if oldest == "" || p.seen.Before(at) {
				oldest, at = k, p.seen
			}
		}
		delete(h.pollers, oldest)
	}
	n := req.GetNode()
	p := &poller{
		status: xds.ClientStatus{
			ID:        id,
			Cluster:   truncate(n.GetCluster()),
			UserAgent: truncate(n.GetUserAgentName()),
			GRPC:      xds.IsGRPC(n),
			Variant:   "rest",
			Peer:      peer,
			Connected: now,
		},
		types: make(map[string]*pollType),
	}
	h.pollers[id] = p
	return p
}

// Clients returns the pollers seen (at most Options.MaxClients), in the
// admin API's form: Connected is when the node first polled, Pushes counts
// answers with content, AckedVersion is the version_info of its latest
// poll.
func (h *Handler) Clients() []xds.ClientStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]xds.ClientStatus, 0, len(h.pollers))
	for _, p := range h.pollers {
		cs := p.status
		for _, pt := range p.types {
			ts := pt.TypeStatus
			if ts.NACK != nil {
				n := *ts.NACK
				ts.NACK = &n
			}
			cs.Types = append(cs.Types, ts)
		}
		slices.SortFunc(cs.Types, func(a, b xds.TypeStatus) int { return cmp.Compare(a.TypeURL, b.TypeURL) })
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b xds.ClientStatus) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// truncate bounds a string taken from a request, and copies it so that it
// does not pin the request's buffer.
func truncate(s string) string {
	return strings.Clone(s[:min(len(s), maxIDLen)])
}
