package zookeeper

import (
	"fmt"
	"maps"
	"slices"

	"github.com/xdsbridge/xdsbridge/sources"
)

// tree is the source's view of the znodes it watches: the entries' paths,
// the services found under them, and each service's instances. It does no
// I/O: the loop reads znodes and hands their contents to apply, which
// says which znodes to read next (dirty) and which clusters changed.
type tree struct {
	entries []*entry
	roots   map[string]*entry  // the paths of tree formats, by znode path
	dirs    map[string]*svc    // instance directories, by znode path
	members map[string]*member // instances whose data is read, by znode path
	byName  map[string][]*svc  // the services feeding each cluster

	dirty   map[string]bool // znodes to read (again)
	changed map[string]bool // clusters whose endpoints may have changed
	// bad holds why each instance znode not served was dropped.
	bad map[string]string
}

// entry is one `services` entry.
type entry struct {
	cfg      Service
	f        format
	path     string          // server-side path (chroot applied)
	services map[string]*svc // tree formats: by child name
}

// svc is one service: the instances under one directory znode.
type svc struct {
	e       *entry
	name    string // the cluster it feeds
	dir     string
	exists  bool // the directory exists
	members map[string]*member
}

// member is one instance znode.
type member struct {
	s       *svc
	name    string
	path    string
	version int32
	ep      *sources.Endpoint // nil until read, or when dropped
}

func newTree(cfg *Config) *tree {
	t := &tree{roots: map[string]*entry{}, dirs: map[string]*svc{}, members: map[string]*member{},
		byName: map[string][]*svc{}, dirty: map[string]bool{}, changed: map[string]bool{}, bad: map[string]string{}}
	for _, s := range cfg.Services {
		t.entries = append(t.entries, &entry{cfg: s, f: formats[s.Format], path: cfg.znode(s.Path)})
	}
	t.restart()
	return t
}

// restart forgets everything read and marks the entries' paths to be read
// from scratch: at start, and after the session (and its watches) expired.
func (t *tree) restart() {
	clear(t.roots)
	clear(t.dirs)
	clear(t.members)
	clear(t.byName)
	clear(t.dirty)
	clear(t.bad)
	for _, e := range t.entries {
		if e.f.tree {
			e.services = map[string]*svc{}
			t.roots[e.path] = e
			t.dirty[e.path] = true
		} else {
			t.addSvc(e, e.cfg.Cluster, e.path)
		}
	}
}

func (t *tree) addSvc(e *entry, name, dir string) *svc {
	s := &svc{e: e, name: name, dir: dir, members: map[string]*member{}}
	t.dirs[dir] = s
	t.byName[name] = append(t.byName[name], s)
	t.dirty[dir] = true
	return s
}

func (t *tree) dropSvc(s *svc) {
	for _, m := range s.members {
		t.dropMember(m)
	}
	delete(t.dirs, s.dir)
	delete(t.dirty, s.dir)
	t.byName[s.name] = slices.DeleteFunc(t.byName[s.name], func(o *svc) bool { return o == s })
	if len(t.byName[s.name]) == 0 {
		delete(t.byName, s.name)
	}
	t.changed[s.name] = true
}

func (t *tree) dropMember(m *member) {
	delete(m.s.members, m.name)
	delete(t.members, m.path)
	delete(t.dirty, m.path)
	delete(t.bad, m.path)
	t.changed[m.s.name] = true
}

// isMember reports whether path is an instance znode whose data is read.
func (t *tree) isMember(path string) bool { return t.members[path] != nil }

// known reports whether path is still a znode the tree watches.
func (t *tree) known(path string) bool {
	return t.roots[path] != nil || t.dirs[path] != nil || t.members[path] != nil
}

// read is what the loop read of one znode: its children or its data, or
// that it does not exist (missing).
type read struct {
	path     string
	children []string
	data     []byte
	version  int32
	missing  bool
}

// apply takes in one read; dropped reports how many instances it found
// that cannot be served.
func (t *tree) apply(r read) (dropped int) {
	delete(t.dirty, r.path)
	switch {
	case t.roots[r.path] != nil:
		t.applyRoot(t.roots[r.path], r)
	case t.dirs[r.path] != nil:
		return t.applyDir(t.dirs[r.path], r)
	case t.members[r.path] != nil:
		return t.applyMember(t.members[r.path], r)
	}
	return 0
}

func (t *tree) applyRoot(e *entry, r read) {
	seen := make(map[string]bool, len(r.children))
	for _, name := range r.children {
		seen[name] = true
		if e.services[name] == nil {
			e.services[name] = t.addSvc(e, name, e.f.dir(child(e.path, name)))
		}
	}
	for name, s := range e.services {
		if !seen[name] {
			t.dropSvc(s)
			delete(e.services, name)
		}
	}
}

func (t *tree) applyDir(s *svc, r read) (dropped int) {
	if s.exists != !r.missing {
		s.exists = !r.missing
		t.changed[s.name] = true
	}
	seen := make(map[string]bool, len(r.children))
	for _, name := range r.children {
		if !s.e.f.member(name) {
			continue
		}
		seen[name] = true
		if s.members[name] != nil {
			continue
		}
		m := &member{s: s, name: name, path: child(s.dir, name)}
		s.members[name] = m
		t.changed[s.name] = true
		if s.e.f.inName {
			dropped += t.parse(m, nil)
			continue
		}
		t.members[m.path] = m
		t.dirty[m.path] = true
	}
	for name, m := range s.members {
		if !seen[name] {
			t.dropMember(m)
		}
	}
	return dropped
}

func (t *tree) applyMember(m *member, r read) int {
	if r.missing {
		t.dropMember(m)
		return 0
	}
	m.version = r.version
	t.changed[m.s.name] = true
	return t.parse(m, r.data)
}

// parse decodes an instance; one that cannot be served is dropped,
// remembered in bad, and counted.
func (t *tree) parse(m *member, data []byte) int {
	ep, err := m.s.e.f.parse(&m.s.e.cfg, m.name, data)
	if err == nil {
		err = ep.Validate()
	}
	if err != nil {
		m.ep = nil
		t.bad[m.path] = err.Error()
		return 1
	}
	delete(t.bad, m.path)
	ep.Origin.Record = fmt.Sprintf("znode %s", m.path)
	if !m.s.e.f.inName {
		ep.Origin.Record += fmt.Sprintf(" version %d", m.version)
	}
	m.ep = &ep
	return 0
}

// build returns the cluster's service as the tree has it now; ok is false
// when no directory feeding it exists (the service is gone). Two
// instances at one address and port (a registrar that re-registered
// before its old session's znode vanished) are served once, as the one
// whose znode name sorts last: for sequential znodes, the newer.
func (t *tree) build(name string) (svc sources.Service, ok bool) {
	svc.Name = name
	at := map[[2]string]int{}
	for _, s := range t.byName[name] {
		if !s.exists {
			continue
		}
		ok = true
		for _, mn := range slices.Sorted(maps.Keys(s.members)) {
			m := s.members[mn]
			if m.ep == nil {
				continue
			}
			e := *m.ep
			e.Metadata = maps.Clone(e.Metadata)
			k := [2]string{e.Address, fmt.Sprint(e.Port)}
			if i, dup := at[k]; dup {
				svc.Endpoints[i] = e
				continue
			}
			at[k] = len(svc.Endpoints)
			svc.Endpoints = append(svc.Endpoints, e)
		}
	}
	svc.Sort()
	return svc, ok
}

// names returns every cluster the tree feeds, sorted.
func (t *tree) names() []string { return slices.Sorted(maps.Keys(t.byName)) }
