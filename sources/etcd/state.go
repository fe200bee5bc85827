package etcd

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/xdsbridge/xdsbridge/sources"
)

// record is what the source knows of one key under a watched prefix.
type record struct {
	service string
	ep      sources.Endpoint
	// err says why the key is not served (errNotInstance: on purpose);
	// nil for an instance.
	err error
	// modRev is the key's mod revision, what provenance shows and what
	// tells a key seen again in a re-read from a changed one.
	modRev int64
}

// state is the source's view of its prefixes: every key by name, the keys
// of each service, and the services changed since the last update. It is
// owned by the loop and does no I/O.
type state struct {
	entries []Entry
	keys    map[string]*record
	// services maps a service to its keys; a service the entries name
	// (Entry.Cluster) is there even with no key.
	services map[string]map[string]struct{}
	declared map[string]bool
	dirty    map[string]struct{}
	// bad holds the keys that do not parse (errNotInstance aside).
	bad map[string]struct{}
}

func newState(entries []Entry) *state {
	st := &state{entries: entries, keys: map[string]*record{}, services: map[string]map[string]struct{}{},
		declared: map[string]bool{}, dirty: map[string]struct{}{}, bad: map[string]struct{}{}}
	for _, e := range entries {
		if e.Cluster != "" {
			st.declared[e.Cluster] = true
			st.services[e.Cluster] = map[string]struct{}{}
			st.dirty[e.Cluster] = struct{}{}
		}
	}
	return st
}

// entry returns the entry whose prefix holds key (prefixes never
// overlap), or false.
func (st *state) entry(key string) (Entry, bool) {
	for _, e := range st.entries {
		if strings.HasPrefix(key, e.Prefix) {
			return e, true
		}
	}
	return Entry{}, false
}

// put records key's value at modRev. It returns true when the key is
// newly malformed (a new revision that does not parse), for the caller to
// count as dropped: a malformed key is counted once per revision, not
// once per read.
func (st *state) put(key string, value []byte, modRev int64) (dropped bool) {
	old := st.keys[key]
	if old != nil && old.modRev == modRev {
		return false
	}
	e, ok := st.entry(key)
	if !ok {
		return false
	}
	svc, ep, err := e.parse(key, value)
	if err == nil {
		if verr := ep.Validate(); verr != nil {
			err = verr
		}
	}
	ep.Origin = sources.Origin{Record: fmt.Sprintf("key %s (mod_revision %d)", key, modRev)}
	if old != nil {
		st.unlink(key, old)
	}
	r := &record{service: svc, ep: ep, err: err, modRev: modRev}
	st.keys[key] = r
	if svc != "" {
		keys := st.services[svc]
		if keys == nil {
			keys = map[string]struct{}{}
			st.services[svc] = keys
		}
		keys[key] = struct{}{}
		st.dirty[svc] = struct{}{}
	}
	if malformed(err) {
		st.bad[key] = struct{}{}
		return true
	}
	return false
}

// del forgets key: deleted, or expired with its lease.
func (st *state) del(key string) {
	if old := st.keys[key]; old != nil {
		st.unlink(key, old)
		delete(st.keys, key)
	}
}

func (st *state) unlink(key string, r *record) {
	delete(st.bad, key)
	if keys := st.services[r.service]; keys != nil {
		delete(keys, key)
		if len(keys) == 0 && !st.declared[r.service] {
			delete(st.services, r.service)
		}
		st.dirty[r.service] = struct{}{}
	}
}

func malformed(err error) bool { return err != nil && !errors.Is(err, errNotInstance) }

// replace makes the state that of a whole read: kvs are every key under
// the prefixes at one revision. Keys absent from kvs are deleted. It
// returns how many keys are newly malformed.
func (st *state) replace(kvs map[string]kv) (dropped int) {
	for key := range st.keys {
		if _, ok := kvs[key]; !ok {
			st.del(key)
		}
	}
	for key, v := range kvs {
		if st.put(key, v.value, v.modRev) {
			dropped++
		}
	}
	return dropped
}

// forget drops every key's mod revision, so that the next read parses
// every key again: after the store went back in time its revisions name
// other writes than before.
func (st *state) forget() {
	for _, r := range st.keys {
		r.modRev = 0
	}
}

// kv is a key's value and mod revision, as read.
type kv struct {
	value  []byte
	modRev int64
}

// service builds the current version of svc: its instances in canonical
// order. ok is false when no service of that name exists any more.
func (st *state) service(svc string) (s sources.Service, ok bool) {
	keys, ok := st.services[svc]
	if !ok {
		return sources.Service{}, false
	}
	s = sources.Service{Name: svc, Endpoints: []sources.Endpoint{}}
	for key := range keys {
		if r := st.keys[key]; r.err == nil {
			s.Endpoints = append(s.Endpoints, r.ep)
		}
	}
	s.Sort()
	return s, true
}

// full returns every service, sorted by name, and clears the changes.
func (st *state) full() sources.Update {
	clear(st.dirty)
	u := sources.Update{Full: true, Services: make([]sources.Service, 0, len(st.services))}
	for _, name := range slices.Sorted(maps.Keys(st.services)) {
		s, _ := st.service(name)
		u.Services = append(u.Services, s)
	}
	return u
}

// changes returns the services changed since the last update (nil when
// none) and clears them.
func (st *state) changes() *sources.Update {
	if len(st.dirty) == 0 {
		return nil
	}
	u := &sources.Update{}
	for _, name := range slices.Sorted(maps.Keys(st.dirty)) {
		if s, ok := st.service(name); ok {
			u.Services = append(u.Services, s)
		} else {
			u.Removed = append(u.Removed, name)
		}
	}
	clear(st.dirty)
	return u
}

// problems returns the first few keys that do not parse and why, for the
// status note; "" when every key parses.
func (st *state) problems() string {
	if len(st.bad) == 0 {
		return ""
	}
	const shown = 3
	keys := slices.Sorted(maps.Keys(st.bad))
	why := make([]string, 0, shown)
	for _, key := range keys[:min(len(keys), shown)] {
		why = append(why, fmt.Sprintf("%s: %v", key, st.keys[key].err))
	}
	more := ""
	if len(keys) > shown {
		more = fmt.Sprintf("; and %d more", len(keys)-shown)
	}
	return fmt.Sprintf("%d keys not served: %s%s", len(keys), strings.Join(why, "; "), more)
}
