# xdsbridge on Nomad, beside Consul: three allocations on three nodes, each
# reading the node's Consul agent, registered in Consul as "xdsbridge" with
# a check on /readyz. Before the first run, store the admin token:
#   nomad var put nomad/jobs/xdsbridge admin_token="$(head -c 32 /dev/urandom | base64)"
# then: nomad job run deploy/nomad/xdsbridge.nomad.hcl
# Needs Nomad 1.5 or newer (the datacenters wildcard, nomadVar, template
# uid/gid). Sizing, upgrades and security: docs/deployment.md. The tests decode this
# file against the Nomad API's job types and run `bridge validate` on the
# configuration it renders (tools/deploycheck); it was never run on Nomad.
job "xdsbridge" {
  type        = "service"
  datacenters = ["*"]

  # Rolling upgrades: one allocation at a time, the next only once the new
  # one has passed its checks (readiness: every source synced) for 30 s,
  # by which time the clients of the stopped one have reconnected. A
  # version that never turns healthy is rolled back.
  update {
    max_parallel      = 1
    health_check      = "checks"
    min_healthy_time  = "30s"
    healthy_deadline  = "5m"
    progress_deadline = "10m"
    auto_revert       = true
  }

  group "bridge" {
    count = 3

    # The replicas share nothing but must not share a node: a node's loss
    # takes one third of the clients at most.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    # Static ports: Envoy bootstraps and gRPC clients name the bridge by a
    # DNS name (xdsbridge.service.consul) and a fixed port.
    network {
      port "xds" {
        static = 18000
      }
      port "admin" {
        static = 19000
      }
    }

    service {
      name     = "xdsbridge"
      provider = "consul"
      port     = "xds"
      tags     = ["grpc", "xds"]

      # Readiness: passing once every source has synced. Consul DNS and the
      # update stanza only count an allocation that passes it.
      check {
        name     = "ready"
        type     = "http"
        port     = "admin"
        path     = "/readyz"
        interval = "5s"
        timeout  = "2s"
      }

      # Liveness: a process that stops answering is restarted.
      check {
        name     = "alive"
        type     = "http"
        port     = "admin"
        path     = "/healthz"
        interval = "10s"
        timeout  = "3s"

        check_restart {
          limit = 3
          grace = "30s"
        }
      }
    }

    task "bridge" {
      driver = "docker"

      # Nomad deregisters the service first and waits this long before the
      # signal, so that clients resolving xdsbridge.service.consul stop
      # picking this allocation; then the bridge gives open streams 3 s.
      shutdown_delay = "5s"
      kill_timeout   = "15s"

      config {
        # Build it from the repository's Dockerfile and push it to your
        # registry; then name it here.
        image           = "xdsbridge:latest"
        # The image's entrypoint is the bridge; args replace its default
        # command, which reads /etc/xdsbridge/bridge.yaml.
        args            = ["run", "--config", "/local/bridge.yaml"]
        ports           = ["xds", "admin"]
        readonly_rootfs = true
        cap_drop        = ["all"]
        security_opt    = ["no-new-privileges"]
      }

      # Sized for 1,000 clients of 10,000 clusters per allocation; the
      # arithmetic is in docs/deployment.md. memory is the hard limit.
      resources {
        cpu    = 1000
        memory = 1536
      }

      # The task's environment. GOMEMLIMIT at 80 % of the memory limit: the
      # Go runtime collects harder as the heap nears it, and the rest is
      # headroom for what it does not count (consul-template's divide takes
      # the divisor first). The listeners are set here, next to the ports,
      # because the image's own BRIDGE_XDS_LISTEN and BRIDGE_ADMIN_LISTEN
      # would override the configuration file.
      template {
        destination = "local/bridge.env"
        env         = true
        data        = <<-EOT
          GOMEMLIMIT={{ env "NOMAD_MEMORY_LIMIT" | parseInt | multiply 4 | divide 5 }}MiB
          BRIDGE_XDS_LISTEN=0.0.0.0:{{ env "NOMAD_PORT_xds" }}
          BRIDGE_ADMIN_LISTEN=0.0.0.0:{{ env "NOMAD_PORT_admin" }}
        EOT
      }

      # The admin token, from the Nomad variable stored above. The task does
      # not start until it exists.
      template {
        destination = "secrets/admin-token"
        perms       = "0400"
        uid         = 65532
        gid         = 65532
        data        = <<-EOT
          {{ with nomadVar "nomad/jobs/xdsbridge" }}{{ .admin_token }}{{ end }}
        EOT
      }

      # The configuration. A change is applied with SIGHUP: sources whose
      # entry is unchanged keep running; listener settings need a restart
      # (nomad alloc restart).
      template {
        destination   = "local/bridge.yaml"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        data          = <<-EOT
          xds:
            keepalive:
              # Each client connection gets a GOAWAY after about this long
              # (±10 %) and reconnects to any healthy allocation, so the
              # fleet spreads evenly again after a rolling upgrade.
              max_connection_age: 15m
          admin:
            # Relative to this file (local/): the token the template above
            # writes. Every admin path but /healthz and /readyz needs it.
            token_file: ../secrets/admin-token
          log: {level: info, format: json}
          # Warm start across task restarts: the allocation's data directory
          # outlives its task.
          state_dir: /alloc/data/xdsbridge
          sources:
            - name: consul
              type: consul
              # The Consul agent of this node. Its client_addr must include
              # the node's address (the task has a network namespace of its
              # own); with Consul's TLS on, https://...:8501 and tls.ca_file.
              address: {{ env "attr.unique.network.ip-address" }}:8500
        EOT
      }
    }
  }
}
