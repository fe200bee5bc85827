package admin

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
)

// What the page shows is bounded whatever the number of services and
// clients, so that it stays quick to serve and to render at tens of
// thousands of services: a summary, the first few problems of each kind,
// every source (their number is the configuration's), and one page of each
// long table. The rest is a filter or a page away.
const (
	servicesPerPage = 100
	clientsPerPage  = 50
	problemsShown   = 10  // of each kind
	errorsPerSource = 3   // service errors in a source's row
	maxQuery        = 200 // bytes of a filter text kept (it is echoed in the page)
)

// filter is what the query asks of the long tables:
//
//	q=TEXT          services whose name, clients whose node id or cluster contains TEXT (any case)
//	only=problems   services with an error or without (healthy) endpoints; clients NACKing or behind
//	page=N          the page of the services table, from 1
//	cpage=N         the page of the clients table, from 1
//	refresh=off     no automatic refresh (to read or type without the page reloading)
type filter struct {
	Q           string
	Problems    bool
	Page, CPage int
	NoRefresh   bool
}

func parseFilter(q url.Values) filter {
	page := func(key string) int {
		n, err := strconv.Atoi(q.Get(key))
		if err != nil || n < 1 {
			return 1
		}
		return n
	}
	text := strings.TrimSpace(q.Get("q"))
	if len(text) > maxQuery {
		text = strings.ToValidUTF8(text[:maxQuery], "")
	}
	return filter{
		Q:         text,
		Problems:  q.Get("only") == "problems",
		Page:      page("page"),
		CPage:     page("cpage"),
		NoRefresh: q.Get("refresh") == "off",
	}
}

// Active reports whether the tables show less than everything.
func (f filter) Active() bool { return f.Q != "" || f.Problems }

// link is the page's URL for f with change applied; anchor, if not empty,
// is the part of the page to go to.
func (f filter) link(change func(*filter), anchor string) string {
	change(&f)
	v := url.Values{}
	if f.Q != "" {
		v.Set("q", f.Q)
	}
	if f.Problems {
		v.Set("only", "problems")
	}
	if f.Page > 1 {
		v.Set("page", strconv.Itoa(f.Page))
	}
	if f.CPage > 1 {
		v.Set("cpage", strconv.Itoa(f.CPage))
	}
	if f.NoRefresh {
		v.Set("refresh", "off")
	}
	u := "/"
	if len(v) > 0 {
		u += "?" + v.Encode()
	}
	if anchor != "" {
		u += "#" + anchor
	}
	return u
}

// matches reports whether any of the texts contains f.Q, ignoring case.
func (f filter) matches(texts ...string) bool {
	if f.Q == "" {
		return true
	}
	q := strings.ToLower(f.Q)
	return slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(strings.ToLower(s), q) })
}

// view is what the template renders.
type view struct {
	Now      time.Time
	About    About
	Pending  []string
	Filter   filter
	Summary  summary
	Problems problems
	Sources  []sourceRow
	Services listing[serviceItem]
	Clients  listing[ClientRow]
	// Links to this page with the refresh toggled, with problems only
	// (at the services or the clients) and without any filter.
	ToggleRefresh, ServiceProblems, ClientProblems, Unfiltered string
}

type summary struct {
	Sources, Synced, Stale, Syncing, Holding    int
	Services, Endpoints, Healthy                int
	NoEndpoints, NoneHealthy, ServicesWithError int
	Clients, Current, Behind, NACKing           int
}

type problems struct {
	Sources                  []sourceRow             // stale, syncing or holding removals
	State                    *manager.StateDirStatus // while its writes fail, or when its state could not be read
	Errors                   bounded[serviceError]
	NoEndpoints, NoneHealthy bounded[ServiceRow]
	NACKing, Behind          bounded[ClientRow]
	Any                      bool
}

// bounded is the first problemsShown items of a list, how many it has and
// how many are left out.
type bounded[T any] struct {
	Shown       []T
	Total, More int
}

func bound[T any](xs []T) bounded[T] {
	n := min(len(xs), problemsShown)
	return bounded[T]{Shown: xs[:n], Total: len(xs), More: len(xs) - n}
}

type sourceRow struct {
	manager.SourceStatus
	Errors     []serviceError // the first errorsPerSource
	MoreErrors int
	Notes      []string // "key: remark", sorted
}

// Problem reports whether the source needs a look: stale, not synced yet,
// or holding removals back.
func (s sourceRow) Problem() bool { return s.Stale || !s.Synced || s.Guard != nil }

type serviceError struct{ Service, Source, Error string }

type serviceItem struct {
	ServiceRow
	Errors []serviceError
}

// listing is one page of a long table.
type listing[T any] struct {
	Rows        []T
	All         int // rows without the filter
	Total       int // rows matching the filter
	First, Last int // the positions shown, from 1 (0, 0 when none)
	Page, Pages int
	Prev, Next  string // links to the neighbouring pages, empty at the ends
}

// paginate cuts the page asked for (the last one if past the end) out of
// rows, which all matched the filter.
func paginate[T any](rows []T, all, page, per int, link func(int) string) listing[T] {
	l := listing[T]{All: all, Total: len(rows), Pages: max(1, (len(rows)+per-1)/per)}
	l.Page = min(page, l.Pages)
	from, to := (l.Page-1)*per, min(l.Page*per, len(rows))
	l.Rows = rows[from:to]
	if len(l.Rows) > 0 {
		l.First, l.Last = from+1, to
	}
	if l.Page > 1 {
		l.Prev = link(l.Page - 1)
	}
	if l.Page < l.Pages {
		l.Next = link(l.Page + 1)
	}
	return l
}

func newView(p Page, f filter) view {
	v := view{Now: p.Now, About: p.About, Pending: p.Pending, Filter: f,
		ToggleRefresh:   f.link(func(f *filter) { f.NoRefresh = !f.NoRefresh }, ""),
		ServiceProblems: f.link(func(f *filter) { *f = filter{Problems: true, NoRefresh: f.NoRefresh} }, "services"),
		ClientProblems:  f.link(func(f *filter) { *f = filter{Problems: true, NoRefresh: f.NoRefresh} }, "clients"),
		Unfiltered:      f.link(func(f *filter) { *f = filter{NoRefresh: f.NoRefresh} }, "services"),
	}
	errs := v.addSources(p.Sources)
	if p.State.Failing || p.State.LoadError != "" {
		v.Problems.State = &p.State
	}
	v.addServices(p.Services, errs, f)
	v.addClients(p.Clients, f)
	pr := &v.Problems
	pr.Any = len(p.Pending) > 0 || len(pr.Sources) > 0 || pr.State != nil || len(pr.Errors.Shown) > 0 || len(pr.NoEndpoints.Shown) > 0 ||
		len(pr.NoneHealthy.Shown) > 0 || len(pr.NACKing.Shown) > 0 || len(pr.Behind.Shown) > 0
	return v
}

// addSources fills in the sources and returns the service errors by service.
func (v *view) addSources(snaps []manager.SourceStatus) map[string][]serviceError {
	byService := map[string][]serviceError{}
	var all []serviceError
	for _, s := range snaps {
		row := sourceRow{SourceStatus: s}
		var errs []serviceError
		for svc, msg := range s.ServiceErrors {
			errs = append(errs, serviceError{Service: svc, Source: s.Name, Error: msg})
		}
		slices.SortFunc(errs, func(a, b serviceError) int { return cmp.Compare(a.Service, b.Service) })
		for _, e := range errs {
			byService[e.Service] = append(byService[e.Service], e)
		}
		all = append(all, errs...)
		row.Errors, row.MoreErrors = errs[:min(len(errs), errorsPerSource)], max(0, len(errs)-errorsPerSource)
		for k, msg := range s.Notes {
			row.Notes = append(row.Notes, k+": "+msg)
		}
		slices.Sort(row.Notes)
		v.Sources = append(v.Sources, row)
		v.Summary.Sources++
		switch {
		case s.Stale:
			v.Summary.Stale++
		case s.Synced:
			v.Summary.Synced++
		default:
			v.Summary.Syncing++
		}
		if s.Guard != nil {
			v.Summary.Holding++
		}
		if row.Problem() {
			v.Problems.Sources = append(v.Problems.Sources, row)
		}
	}
	slices.SortStableFunc(all, func(a, b serviceError) int { return cmp.Compare(a.Service, b.Service) })
	v.Problems.Errors = bound(all)
	v.Summary.ServicesWithError = len(byService)
	return byService
}

func (v *view) addServices(rows []ServiceRow, errs map[string][]serviceError, f filter) {
	var empty, unhealthy []ServiceRow
	var shown []serviceItem
	for _, s := range rows {
		v.Summary.Services++
		v.Summary.Endpoints += s.Endpoints
		v.Summary.Healthy += s.Healthy
		switch {
		case s.Endpoints == 0:
			empty = append(empty, s)
		case s.Healthy == 0:
			unhealthy = append(unhealthy, s)
		}
		problem := s.Healthy == 0 || len(errs[s.Name]) > 0
		if f.matches(s.Name) && (!f.Problems || problem) {
			shown = append(shown, serviceItem{ServiceRow: s, Errors: errs[s.Name]})
		}
	}
	v.Summary.NoEndpoints, v.Summary.NoneHealthy = len(empty), len(unhealthy)
	v.Problems.NoEndpoints, v.Problems.NoneHealthy = bound(empty), bound(unhealthy)
	v.Services = paginate(shown, len(rows), f.Page, servicesPerPage,
		func(n int) string { return f.link(func(f *filter) { f.Page = n }, "services") })
}

func (v *view) addClients(rows []ClientRow, f filter) {
	var nacking, behind, shown []ClientRow
	for _, c := range rows {
		state := c.State()
		switch state {
		case StateNACKing:
			v.Summary.NACKing++
			nacking = append(nacking, c)
		case StateBehind:
			v.Summary.Behind++
			behind = append(behind, c)
		default:
			v.Summary.Current++
		}
		if f.matches(c.ID, c.Cluster) && (!f.Problems || state != StateCurrent) {
			shown = append(shown, c)
		}
	}
	v.Summary.Clients = len(rows)
	v.Problems.NACKing, v.Problems.Behind = bound(nacking), bound(behind)
	v.Clients = paginate(shown, len(rows), f.CPage, clientsPerPage,
		func(n int) string { return f.link(func(f *filter) { f.CPage = n }, "clients") })
}
