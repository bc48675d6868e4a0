# sepcsi as a Nomad CSI plugin: one monolith task (Controller and Node services
# together) on every client, as volumes live on the client that made them.
#
#   cd deploy/nomad && nomad job run sepcsi.nomad.hcl
# (file("policy.ini") below is read from the directory the job is submitted from.)
#
# The clients' docker plugin must allow privileged tasks (allow_privileged = true):
# only a privileged container can make mounts that reach the host. Inside, only
# sepcsi-mounthelper keeps any capability.
job "sepcsi" {
  type = "system"

  group "sepcsi" {
    task "plugin" {
      driver = "docker"

      config {
        # Pinned to the release (CMakeLists.txt's project VERSION), never latest.
        image      = "sepcsi:0.1.0"
        privileged = true
        # The driver talks to Nomad over a unix socket only.
        network_mode = "none"
        args = [
          "--endpoint=unix:///csi/csi.sock",
          "--node-id=${node.unique.name}",
          "--mode=all",
          "--state-dir=/var/lib/sepcsi/state",
          "--data-dir=/var/lib/sepcsi/data",
          "--policy=/local/policy.ini",
          "--log-format=json",
          "--metrics-file=/var/lib/sepcsi/metrics.prom",
        ]

        # The store and the images, kept on the host across restarts of the task.
        mount {
          type   = "bind"
          source = "/var/lib/sepcsi"
          target = "/var/lib/sepcsi"
        }
        # The host's /dev: loop devices made after the container started appear here.
        mount {
          type   = "bind"
          source = "/dev"
          target = "/dev"
        }
      }

      # The policy, rendered root-owned and writable by root only, as the supervisor
      # requires of --policy; it names the layout of stage_publish_base_dir below.
      template {
        data        = file("policy.ini")
        destination = "local/policy.ini"
        perms       = "644"
        change_mode = "restart"
      }

      csi_plugin {
        id                     = "sepcsi"
        type                   = "monolith"
        mount_dir              = "/csi"
        stage_publish_base_dir = "/local/csi"
        health_timeout         = "30s"
      }

      # Measured (deploy/kubernetes/daemonset.yaml has the figures): under 1 core in
      # bursts, nothing when idle; at most 63 MiB of resident memory for the whole
      # process tree while mkfs runs. memory is the hard limit unless the cluster
      # oversubscribes memory, so it is the limit, not the usual use (about 16 MiB).
      resources {
        cpu    = 100
        memory = 256
      }

      # A child the supervisor gives up on ends the task (exit 3), and Nomad restarts
      # it. Nomad cannot tell exit 2 (bad flag or policy) apart: it fails the same way
      # on every attempt, and the allocation's events show the supervisor's reason.
      restart {
        attempts = 5
        interval = "5m"
        delay    = "2s"
        mode     = "delay"
      }

      # SIGTERM to the supervisor, which stops rpcd and then the helper, 30 s at most
      # each. A client caps kill_timeout at its max_kill_timeout (30 s by default).
      kill_signal  = "SIGTERM"
      kill_timeout = "75s"
    }
  }
}
