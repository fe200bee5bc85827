package manager

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/xdsbridge/xdsbridge/settings"
)

// The merge modes: how the manager combines the versions of one service
// reported by several sources.
const (
	// MergeFirst serves the version of the first source, in precedence
	// order, that reports the service with at least one endpoint; when every
	// version is empty the service is served empty. The other sources'
	// versions are shadowed (logged, and listed in their Status).
	MergeFirst = "first"
	// MergeUnion serves the endpoints of every source in one cluster; an
	// address:port reported by several sources is served once, as the
	// source of highest precedence reports it.
	MergeUnion = "union"
	// MergeWeighted serves each listed source's endpoints as localities of
	// their own, weighted so that the sources receive traffic in the
	// proportions of their weights (see MergeRule.Weights).
	MergeWeighted = "weighted"
)

// MaxMergeWeight bounds a source's weight in a weighted merge, so that the
// locality weights derived from it stay far below uint32 (see merger.weighted).
const MaxMergeWeight = 10000

// MergeConfig is the `merge` section of the configuration: a default mode
// for every service and rules for named services.
//
// Service and source names are values in lists rather than keys of
// mappings because the configuration loader lower-cases mapping keys and
// splits them at dots, and both kinds of names may contain either.
type MergeConfig struct {
	// Default is the mode of services without a rule: first or union.
	// Weighted needs weights, which only a rule has. Empty means first.
	Default  string      `mapstructure:"default"`
	Services []MergeRule `mapstructure:"services"`
}

// MergeRule sets the merge mode of one service.
type MergeRule struct {
	// Service is the service's name as the sources report it (the cluster
	// name), matched exactly.
	Service string `mapstructure:"service"`
	Mode    string `mapstructure:"mode"`
	// Weights are required for mode weighted and allowed for no other. Each
	// listed source with a positive weight receives weight/sum of the
	// traffic of each priority among the listed sources that report
	// endpoints there; a source with weight 0 is drained (its endpoints are
	// not served) and a source not listed does not take part.
	Weights []SourceWeight `mapstructure:"weights"`
}

// SourceWeight is one source's share in a weighted merge.
type SourceWeight struct {
	Source string `mapstructure:"source"`
	// Weight is 0..MaxMergeWeight; it is a pointer so that a missing weight
	// is an error rather than a silent 0.
	Weight *int64 `mapstructure:"weight"`
}

// Validate checks c against the configured source names. Errors are
// *settings.KeyError values with keys relative to the section, such as
// `services[0].weights[1].source: unknown source "consull"`.
func (c MergeConfig) Validate(sourceNames []string) error {
	switch c.Default {
	case "", MergeFirst, MergeUnion:
	case MergeWeighted:
		return settings.Errorf("default", "mode weighted needs weights; give it per service under services")
	default:
		return settings.Errorf("default", "unknown mode %q (want first or union)", c.Default)
	}
	seen := map[string]int{}
	for i, r := range c.Services {
		key := fmt.Sprintf("services[%d]", i)
		if strings.TrimSpace(r.Service) == "" {
			return settings.Errorf(key+".service", "is required")
		}
		if j, dup := seen[r.Service]; dup {
			return settings.Errorf(key+".service", "duplicate service %q (also services[%d])", r.Service, j)
		}
		seen[r.Service] = i
		if err := r.validate(sourceNames); err != nil {
			return settings.Prefix(key, err)
		}
	}
	return nil
}

func (r MergeRule) validate(sourceNames []string) error {
	switch r.Mode {
	case MergeFirst, MergeUnion:
		if len(r.Weights) > 0 {
			return settings.Errorf("weights", "only mode weighted takes weights (mode is %s)", r.Mode)
		}
		return nil
	case MergeWeighted:
	case "":
		return settings.Errorf("mode", "is required (first, union or weighted)")
	default:
		return settings.Errorf("mode", "unknown mode %q (want first, union or weighted)", r.Mode)
	}
	if len(r.Weights) == 0 {
		return settings.Errorf("weights", "mode weighted needs at least one source weight")
	}
	seen := map[string]int{}
	positive := false
	for i, w := range r.Weights {
		key := fmt.Sprintf("weights[%d]", i)
		switch j, dup := seen[w.Source]; {
		case w.Source == "":
			return settings.Errorf(key+".source", "is required")
		case dup:
			return settings.Errorf(key+".source", "duplicate source %q (also weights[%d])", w.Source, j)
		case !slices.Contains(sourceNames, w.Source):
			return settings.Errorf(key+".source", "unknown source %q (configured: %s)", w.Source, strings.Join(sourceNames, ", "))
		case w.Weight == nil:
			return settings.Errorf(key+".weight", "is required")
		case *w.Weight < 0 || *w.Weight > MaxMergeWeight:
			return settings.Errorf(key+".weight", "%d is outside 0..%d", *w.Weight, MaxMergeWeight)
		}
		seen[w.Source] = i
		positive = positive || *w.Weight > 0
	}
	if !positive {
		return &settings.KeyError{Key: "weights", Err: errors.New("at least one weight must be positive")}
	}
	return nil
}

// mergeMode is a compiled merge mode.
type mergeMode uint8

const (
	modeFirst mergeMode = iota
	modeUnion
	modeWeighted
)

// mergeRule is a compiled MergeRule: weights by source index, 0 for a
// source not listed.
type mergeRule struct {
	mode    mergeMode
	weights []uint32
}

// mergeModes is a compiled MergeConfig, read by the merger.
type mergeModes struct {
	def   mergeRule
	rules map[string]mergeRule
}

// compile turns a validated c into the merger's form; names are the
// sources in precedence order. Weights of unknown sources are ignored.
func (c MergeConfig) compile(names []string) mergeModes {
	p := mergeModes{rules: make(map[string]mergeRule, len(c.Services))}
	p.def.mode = parseMode(c.Default)
	for _, r := range c.Services {
		mr := mergeRule{mode: parseMode(r.Mode)}
		if mr.mode == modeWeighted {
			mr.weights = make([]uint32, len(names))
			for _, w := range r.Weights {
				if i := slices.Index(names, w.Source); i >= 0 && w.Weight != nil {
					mr.weights[i] = uint32(max(0, min(*w.Weight, MaxMergeWeight)))
				}
			}
		}
		p.rules[r.Service] = mr
	}
	return p
}

func parseMode(s string) mergeMode {
	switch s {
	case MergeUnion:
		return modeUnion
	case MergeWeighted:
		return modeWeighted
	}
	return modeFirst
}

// rule returns the rule of service name.
func (p mergeModes) rule(name string) mergeRule {
	if r, ok := p.rules[name]; ok {
		return r
	}
	return p.def
}
