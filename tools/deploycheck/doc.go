// Package deploycheck checks the deployment manifests under deploy/ the way
// the platforms would read them, as far as that can be done without a
// cluster:
//
//   - Kubernetes manifests are decoded into the API types of k8s.io/api with
//     apimachinery's decoder in its strict mode, which reports what the API
//     server's strict field validation (kubectl apply --validate=strict)
//     reports: an unknown or duplicated field is an error, not a silently
//     dropped setting. A few rules the API
//     server enforces beyond the types (the divisors of a resourceFieldRef)
//     are checked here too.
//   - The Nomad job is decoded into the job types of
//     github.com/hashicorp/nomad/api, driven by the hcl tags those types
//     carry, which are what Nomad's own HCL2 job parser decodes with; an
//     argument or block that no field declares is an error. The api module
//     has no parser of its own (Jobs.ParseHCL asks a running Nomad agent),
//     and Nomad's parser lives in the main nomad module, whose licence is
//     not an open-source one since 1.7, so this package decodes the HCL
//     itself with the HCL library (github.com/hashicorp/hcl/v2). It accepts
//     the subset the job uses: literal values, heredocs, no HCL variables or
//     functions (Nomad's runtime interpolation belongs in templates, where
//     consul-template's {{ env }} reads it).
//   - The ServiceMonitor (deploy/kubernetes/monitoring) is decoded the same
//     way into the Prometheus Operator's types and checked against the
//     Service and the Secret the Deployment mounts as the admin token.
//   - The alert rules, their unit tests and the scrape configuration of
//     deploy/prometheus go through Prometheus' own promtool (check rules,
//     test rules, check config), which scripts/tools.sh builds from
//     tools/promtool; every alert must have a unit test where it fires and
//     one where it does not, and a runbook section in docs/operations.md.
//   - The bridge configuration each manifest carries is laid out as the
//     container would see it (the projected volume of the Deployment, the
//     rendered templates of the Nomad task) and checked with the real
//     `bridge validate`, run with the environment the platform would give
//     the process.
//
// It is a module of its own so that Kubernetes' and Nomad's dependency
// graphs never enter the product's go.mod; `make test` runs its tests.
package deploycheck
