#!/usr/bin/python3
"""The node plugin's pod under a real container runtime (podman), as a cluster runs it.

    unshare -m --propagation private /usr/bin/python3 tests/container/container_test.py
    (it re-runs itself that way when started without)

Every step uses real parts, in this process's private mount namespace (a stand-in for
the node: kubelet's directory is a shared tmpfs at /var/lib/kubelet there, the driver's
a tmpfs at /var/lib/sepcsi):

 1. images: a Debian 12 base made without a registry (debootstrap + podman import,
    kept in the work directory for the next run), the driver's image built from
    deploy/Containerfile unchanged, and an image holding the two sidecars from
    ../shared/peers (node-driver-registrar, livenessprobe);
 2. the pod: each container of deploy/kubernetes/daemonset.yaml that has a stand-in
    here (sepcsi, node-driver-registrar, liveness-probe) run with the manifest's
    image, args, env, privilege, volume mounts and their propagation, read from the
    YAML; the policy from the ConfigMap in policy.yaml;
 3. kubelet played: the registrar's registration socket answers GetInfo with the
    driver's name and kubelet's path of its socket, then NotifyRegistrationStatus;
    the registrar's and livenessprobe's /healthz answer 200;
 4. a workload: a second container binds a published target with a pod's propagation
    (rslave), writes, and the data is read from the host, and again after unpublish,
    unstage, stage, publish; a raw block volume the same through --device;
 5. restart as an operator would: the driver's container removed while volumes are
    published (livenessprobe then fails), made again: it reconciles ("everything
    settled"), the volumes stay usable and go through the rest of their life;
 6. what an auditor checks: every sepcsi process in the container, by /proc/PID/status
    and /proc/PID/mountinfo, against `sepcsi-supervisor --print-privileges` for the
    manifest's args.

With --core, the policy's [directories] section is left out of the ConfigMap as it is
written: the helper then starts its capable core (no directory volumes), holds no
capability itself, and the auditor's step checks the core too.

Containers, the images the test built, loop devices and mounts are removed whatever
fails. Prints each step's time. Exit status 0 when every check holds.
SEPCSI_CONTAINER_WORK: the work directory (default /var/tmp/sepcsi-container).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import grpc
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import csi_client  # noqa: E402

WORK = os.environ.get("SEPCSI_CONTAINER_WORK", "/var/tmp/sepcsi-container")
PEERS = os.environ.get("SEPCSI_PEERS", os.path.join(os.path.dirname(REPO), "shared", "peers"))
DEPLOY = os.path.join(REPO, "deploy", "kubernetes")
KUBELET, SEPCSI_DIR = "/var/lib/kubelet", "/var/lib/sepcsi"
DRIVER, NODE = "local.sepcsi.io", "container-node"
SIDECARS = "localhost/sepcsi-test-sidecars:latest"
BASE = "localhost/debian:12"
NAMES = {"sepcsi": "sepcsi-test-node", "node-driver-registrar": "sepcsi-test-registrar",
         "liveness-probe": "sepcsi-test-liveness"}
POD_UID = "5e9c0f00-0000-4000-8000-00000000c0de"
MiB = 1 << 20
CONF = """[containers]
# The bounding set of this project's machines lacks CAP_SYS_RESOURCE: podman's default
# rlimits cannot be raised there.
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
# crun refuses the hybrid cgroup layout of these machines.
runtime = "runc"
"""


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def run(cmd, **kw):
    kw.setdefault("check", True)
    return subprocess.run(cmd, **kw)


def podman(*args, **kw):
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(WORK, "containers.conf"))
    check_rc = kw.pop("check_rc", True)
    if "stdout" not in kw:
        kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    p = run(["podman", "--root", os.path.join(WORK, "storage"), "--runroot",
             os.path.join(WORK, "run")] + list(args), env=env, check=False, **kw)
    if check_rc and p.returncode != 0:
        raise Failed("podman %s: %s" % (" ".join(args[:3]), (p.stderr or "")[-2000:]))
    return p


class Steps:
    """Each step timed and printed."""

    def __init__(self):
        self.t0 = time.monotonic()

    def __call__(self, what):
        return _Step(what)

    def total(self):
        print("container test: all checks passed in %.1f s" % (time.monotonic() - self.t0))


class _Step:
    def __init__(self, what):
        self.what = what

    def __enter__(self):
        self.t = time.monotonic()
        print("== %s" % self.what, flush=True)

    def __exit__(self, *exc):
        print("   %.1f s" % (time.monotonic() - self.t), flush=True)


# ---- the node ------------------------------------------------------------------------


def make_node():
    """kubelet's directory a shared tmpfs, the driver's a tmpfs, in this namespace only."""
    run(["mount", "--make-rshared", "/"])
    for path, mode in ((KUBELET, "0750"), (SEPCSI_DIR, "0755")):
        os.makedirs(path, exist_ok=True)
        run(["mount", "-t", "tmpfs", "-o", "mode=" + mode, "sepcsi-container", path])
    run(["mount", "--make-shared", KUBELET])
    os.makedirs(os.path.join(KUBELET, "plugins_registry"), mode=0o750)  # kubelet's own


def mounts_beneath(prefix):
    with open("/proc/self/mountinfo") as f:
        return [ln.split()[4] for ln in f if ln.split()[4].startswith(prefix + "/")]


def loops_on(dev):
    """Loop devices whose backing file lies on the file system with device number dev."""
    out = run(["losetup", "-J", "-O", "NAME,BACK-MAJ:MIN"], capture_output=True,
              text=True).stdout
    want = "%d:%d" % (os.major(dev), os.minor(dev))
    return [d["name"] for d in (json.loads(out)["loopdevices"] if out.strip() else [])
            if (d.get("back-maj:min") or "").strip() == want]


# ---- images --------------------------------------------------------------------------


def base_image():
    if podman("image", "exists", BASE, check_rc=False).returncode == 0:
        print("   base image kept from an earlier run")
        return
    rootfs = os.path.join(WORK, "rootfs")
    shutil.rmtree(rootfs, ignore_errors=True)
    mirror = apt_mirror()
    run(["debootstrap", "--variant=minbase", "bookworm", rootfs, mirror],
        stdout=subprocess.DEVNULL)
    tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
    podman("import", "-", BASE, stdin=tar.stdout)
    tar.wait()
    shutil.rmtree(rootfs)


def apt_mirror():
    """The Debian mirror apt uses here (the only one reachable), else deb.debian.org."""
    for d in ("/etc/apt/sources.list.d", "/etc/apt"):
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if not name.endswith((".list", ".sources")):
                continue
            with open(os.path.join(d, name)) as f:
                for m in re.finditer(r"(https?://\S+/debian)/?(\s|$)", f.read()):
                    return m.group(1)
    return "http://deb.debian.org/debian"


def driver_image(image):
    """deploy/Containerfile, unchanged; its debian:12 is the local base."""
    with open(os.path.join(WORK, "build.log"), "w") as log:
        p = podman("build", "--network=host", "-f",
                   os.path.join(REPO, "deploy", "Containerfile"), "-t", image, REPO,
                   stdout=log, stderr=subprocess.STDOUT, check_rc=False)
    if p.returncode != 0:
        with open(os.path.join(WORK, "build.log")) as log:
            raise Failed("the image does not build: %s" % log.read()[-3000:])


def sidecar_image():
    ctx = os.path.join(WORK, "sidecars")
    shutil.rmtree(ctx, ignore_errors=True)
    os.makedirs(ctx)
    for b in ("node-driver-registrar", "livenessprobe"):
        shutil.copy(os.path.join(PEERS, b), ctx)
    with open(os.path.join(ctx, "Containerfile"), "w") as f:
        f.write("FROM %s\nCOPY node-driver-registrar livenessprobe /usr/local/bin/\n" % BASE)
    podman("build", "--network=host", "-t", SIDECARS, ctx)


# ---- the pod, from the manifest ------------------------------------------------------


def load(name, kind):
    with open(os.path.join(DEPLOY, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d and d.get("kind") == kind]


def pod_spec():
    (ds,) = load("daemonset.yaml", "DaemonSet")
    return ds["spec"]["template"]["spec"]


CORE = "--core" in sys.argv[1:]


def without_directories(policy):
    """The policy text less its [directories] section (--core)."""
    out, skip = [], False
    for line in policy.splitlines(keepends=True):
        if line.strip().startswith("["):
            skip = line.strip() == "[directories]"
        if not skip:
            out.append(line)
    return "".join(out)


def config_map_dir(name, mode):
    """The ConfigMap's files as kubelet writes them: one file per key."""
    (cm,) = [c for c in load("policy.yaml", "ConfigMap") if c["metadata"]["name"] == name]
    d = os.path.join(WORK, "configmap-" + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, mode=0o755)
    for k, v in cm["data"].items():
        if CORE and "[directories]" in v:
            v = without_directories(v)
            check("base_dirs" not in v, "the policy still names a base directory")
        with open(os.path.join(d, k), "w") as f:
            f.write(v)
        os.chmod(os.path.join(d, k), mode)
    return d


def env_of(ctr):
    fields = {"spec.nodeName": NODE, "metadata.namespace": "kube-system",
              "metadata.name": "sepcsi-test"}
    out = {}
    for e in ctr.get("env", []):
        out[e["name"]] = e["value"] if "value" in e else \
            fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
    return out


def run_args(spec, ctr, image, entrypoint=None):
    """podman run's arguments for container ctr of the pod spec, as kubelet would run it."""
    vols = {v["name"]: v for v in spec["volumes"]}
    env = env_of(ctr)
    a = ["run", "-d", "--name", NAMES[ctr["name"]], "--network=host"]
    if ctr.get("securityContext", {}).get("privileged"):
        a.append("--privileged")
    for k, v in env.items():
        a += ["-e", "%s=%s" % (k, v)]
    for m in ctr.get("volumeMounts", []):
        v = vols[m["name"]]
        if "hostPath" in v:
            src = v["hostPath"]["path"]
            if v["hostPath"].get("type") == "DirectoryOrCreate":
                os.makedirs(src, exist_ok=True)
            check(os.path.isdir(src), "hostPath %s is not a directory" % src)
        else:
            src = config_map_dir(v["configMap"]["name"], v["configMap"].get("defaultMode", 0o644))
        prop = {"Bidirectional": "rshared", "HostToContainer": "rslave"}.get(
            m.get("mountPropagation", "None"), "rprivate")
        a += ["-v", "%s:%s:%s" % (src, m["mountPath"],
                                  ",".join((["ro"] if m.get("readOnly") else []) + [prop]))]
    if entrypoint:
        a += ["--entrypoint", entrypoint]
    a.append(image)
    return a + [re.sub(r"\$\((\w+)\)", lambda x: env[x.group(1)], s) for s in ctr.get("args", [])]


def container(spec, name):
    (c,) = [c for c in spec["containers"] if c["name"] == name]
    return c


def qualified(image):
    return image if "/" in image.split(":")[0] else "localhost/" + image


def start_driver(spec):
    ctr = container(spec, "sepcsi")
    podman(*run_args(spec, ctr, qualified(ctr["image"])))
    sock = os.path.join(KUBELET, "plugins", DRIVER, "csi.sock")
    try:
        csi_client.wait_ready("unix://" + sock, 60)
    except Exception:
        raise Failed("the driver is not ready: %s" % logs("sepcsi")[-3000:])


def logs(name):
    p = podman("logs", NAMES[name], check_rc=False)
    return (p.stdout or "") + (p.stderr or "")


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def wait_status(url, want, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        got = http_status(url)
        if (got == want) if want else (got != 200):
            return got
        if time.monotonic() > deadline:
            raise Failed("%s answered %s, not %s" % (url, got, want or "an error"))
        time.sleep(0.5)


# ---- kubelet's plugin registration, played -------------------------------------------


def pb_fields(data):
    """A protobuf message's fields: {number: [values]} (varints and byte strings)."""
    out, i = {}, 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v

    while i < len(data):
        key = varint()
        if key & 7 == 0:
            val = varint()
        elif key & 7 == 2:
            n = varint()
            val, i = data[i:i + n].decode(), i + n
        else:
            raise Failed("unexpected wire type %d in a registration answer" % (key & 7))
        out.setdefault(key >> 3, []).append(val)
    return out


def register():
    """As kubelet's plugin watcher: GetInfo on the registration socket, then
    NotifyRegistrationStatus (pluginregistration.Registration, kubelet's API)."""
    reg = os.path.join(KUBELET, "plugins_registry", DRIVER + "-reg.sock")
    deadline = time.monotonic() + 30
    while not os.path.exists(reg):
        check(time.monotonic() < deadline, "no registration socket: %s" %
              logs("node-driver-registrar")[-2000:])
        time.sleep(0.2)
    with grpc.insecure_channel("unix://" + reg) as ch:
        raw = ch.unary_unary("/pluginregistration.Registration/GetInfo",
                             request_serializer=bytes, response_deserializer=bytes)
        info = pb_fields(raw(b"", timeout=10))
        # PluginInfo: 1 type, 2 name, 3 endpoint, 4 supported_versions
        check(info.get(1) == ["CSIPlugin"] and info.get(2) == [DRIVER] and
              info.get(3) == [os.path.join(KUBELET, "plugins", DRIVER, "csi.sock")] and
              info.get(4), "GetInfo answered %s" % info)
        notify = ch.unary_unary("/pluginregistration.Registration/NotifyRegistrationStatus",
                                request_serializer=bytes, response_deserializer=bytes)
        notify(b"\x08\x01", timeout=10)  # RegistrationStatus{plugin_registered: true}
    return info


# ---- volumes -------------------------------------------------------------------------


def fs_paths(pv):
    csi = os.path.join(KUBELET, "plugins", "kubernetes.io", "csi", DRIVER, pv)
    staging = os.path.join(csi, "globalmount")
    target = os.path.join(KUBELET, "pods", POD_UID, "volumes", "kubernetes.io~csi", pv, "mount")
    for d in (staging, os.path.dirname(target)):
        os.makedirs(d, mode=0o750, exist_ok=True)
    return staging, target


def block_paths(pv):
    devs = os.path.join(KUBELET, "plugins", "kubernetes.io", "csi", "volumeDevices")
    staging = os.path.join(devs, "staging", pv)
    target = os.path.join(devs, "publish", pv, POD_UID)
    for d in (staging, os.path.dirname(target)):
        os.makedirs(d, mode=0o750, exist_ok=True)
    return staging, target


def workload(*args):
    """A pod's container: the base image, its volume bound with HostToContainer."""
    p = podman("run", "--rm", "--network=host", *args)
    return p.stdout


class Volume:
    def __init__(self, c, pv, cap):
        self.c, self.cap = c, cap
        self.id = c.controller("CreateVolume", name=pv, volume_capabilities=[cap],
                               capacity_range=c.pb.CapacityRange(required_bytes=64 * MiB)
                               ).volume.volume_id
        self.staging, self.target = (block_paths if cap.HasField("block") else fs_paths)(pv)

    def stage(self):
        self.c.node("NodeStageVolume", volume_id=self.id, staging_target_path=self.staging,
                    volume_capability=self.cap)

    def publish(self):
        self.c.node("NodePublishVolume", volume_id=self.id, staging_target_path=self.staging,
                    target_path=self.target, volume_capability=self.cap)

    def unpublish(self):
        self.c.node("NodeUnpublishVolume", volume_id=self.id, target_path=self.target)

    def unstage(self):
        self.c.node("NodeUnstageVolume", volume_id=self.id, staging_target_path=self.staging)

    def delete(self):
        self.c.controller("DeleteVolume", volume_id=self.id)


def fs_round(v, text):
    workload("-v", "%s:/data:rslave" % v.target, BASE, "sh", "-c",
             "echo %s > /data/f && sync" % text)
    with open(os.path.join(v.target, "f")) as f:
        check(f.read() == text + "\n", "the workload's write is not on the host")


def read_fs(v):
    return workload("-v", "%s:/data:rslave" % v.target, BASE, "cat", "/data/f")


def block_round(v, text):
    workload("--device", "%s:/dev/xvda" % v.target, BASE, "sh", "-c",
             "printf %s | dd of=/dev/xvda conv=fsync status=none" % text)
    with open(v.target, "rb") as f:
        check(f.read(len(text)) == text.encode(), "the workload's block write is not there")


def read_block(v, n):
    return workload("--device", "%s:/dev/xvda" % v.target, BASE, "dd", "if=/dev/xvda",
                    "bs=%d" % n, "count=1", "status=none")


# ---- what an auditor checks ----------------------------------------------------------


def table(spec):
    """--print-privileges for the manifest's args, run in the driver's container."""
    ctr = container(spec, "sepcsi")
    args = [re.sub(r"\$\((\w+)\)", lambda x: env_of(ctr)[x.group(1)], s) for s in ctr["args"]]
    p = podman("exec", NAMES["sepcsi"], "/usr/libexec/sepcsi/sepcsi-supervisor",
               *[a for a in args if a.split("=")[0] != "--log-format"],
               "--log-format=json", "--print-privileges")
    return {r["name"]: r for r in json.loads(p.stdout)["processes"]}


def processes():
    """{pid: (comm, cmdline, {status key: value})} of the driver's container."""
    script = ('for d in /proc/[0-9]*; do p=${d#/proc/}; c=$(cat $d/comm 2>/dev/null) || '
              'continue; case "$c" in sepcsi*) ;; *) continue;; esac; echo "== $p $c"; '
              'tr "\\0" " " < $d/cmdline; echo; cat $d/status; done')
    out = podman("exec", NAMES["sepcsi"], "sh", "-c", script).stdout
    procs = {}
    for block in out.split("== ")[1:]:
        lines = block.splitlines()
        pid, comm = lines[0].split(" ", 1)
        status = dict(ln.split(":", 1) for ln in lines[2:] if ":" in ln)
        if "Uid" in status:  # else it ended while it was being read
            procs[int(pid)] = (comm, lines[1], {k: v.strip() for k, v in status.items()})
    return procs


def audit(spec):
    rows = table(spec)
    procs = processes()
    seen = set()
    for pid, (comm, cmdline, st) in sorted(procs.items()):
        name = {"sepcsi-supervis": "sepcsi-supervisor", "sepcsi-rpcd": "sepcsi-rpcd",
                "sepcsi-mounthel": "sepcsi-mounthelper", "sepcsi-runner": "sepcsi-runner",
                "sepcsi-tree-run": "sepcsi-tree-runner", "sepcsi-core": "sepcsi-core",
                "sepcsi-reader": "sepcsi-reader", "sepcsi-flusher": "sepcsi-flusher",
                "sepcsi-audit": "sepcsi-audit", "sepcsi-metrics-": "sepcsi-metrics-check"}.get(comm)
        parent = procs.get(int(st["PPid"]), ("",))[0]
        if comm == "sepcsi-supervis" and parent == "sepcsi-supervis":
            continue  # a child between the supervisor's fork and its exec: it has no row yet
        check(name in rows, "process %d (%s) is in no row of --print-privileges" % (pid, comm))
        r = rows[name]
        got = {"uid": int(st["Uid"].split()[1]), "gid": int(st["Gid"].split()[1]),
               "fsuid": int(st["Uid"].split()[3]), "fsgid": int(st["Gid"].split()[3]),
               "cap_effective": st["CapEff"], "cap_permitted": st["CapPrm"],
               "cap_bounding": st["CapBnd"], "cap_ambient": st["CapAmb"],
               "no_new_privs": int(st["NoNewPrivs"]), "seccomp": int(st["Seccomp"])}
        want = {k: r[k] for k in got}
        if name == "sepcsi-metrics-check" and got["seccomp"] == 0:
            got["seccomp"] = want["seccomp"]  # caught between its exec and its own filter
        check(got == want, "%s (pid %d) holds %s; --print-privileges says %s" %
              (name, pid, got, want))
        seen.add(name)
        if r["view"] == "host":  # the container's own mount namespace, as the supervisor's
            got = podman("exec", NAMES["sepcsi"], "readlink", "/proc/1/ns/mnt",
                         "/proc/%d/ns/mnt" % pid, check_rc=False)
            ns = got.stdout.split()
            check(len(ns) == 2 and ns[0] == ns[1] or "No such file" in got.stderr,
                  "%s (pid %d) is not in the container's mount namespace: %s" % (name, pid, ns))
        else:
            view_matches(pid, name, r["view"])
    for name in ("sepcsi-supervisor", "sepcsi-rpcd", "sepcsi-mounthelper", "sepcsi-runner") + \
            (("sepcsi-core", "sepcsi-reader", "sepcsi-flusher", "sepcsi-audit") if CORE else ()):
        check(name in seen, "no %s in the container" % name)
    return sorted(seen)


def view_matches(pid, name, view):
    """A process's mounts: its view's, plus (the helper's) what is mounted in kubelet's
    tree."""
    got = podman("exec", NAMES["sepcsi"], "cat", "/proc/%d/mountinfo" % pid, check_rc=False)
    if got.returncode != 0 and "No such file" in got.stderr:
        return  # a worker or runner that has just ended
    check(got.returncode == 0, "cannot read the mounts of %s (pid %d)" % (name, pid))
    out = got.stdout
    points = [ln.split()[4] for ln in out.splitlines()]
    # Beside the view's own: what is mounted in kubelet's tree (the helper's), and a /dev
    # of its own holding the view's nodes (the tool runner's: policy/view.c).
    extra = [p for p in points if p not in view and
             not (KUBELET in view and p.startswith(KUBELET + "/")) and
             not (p == "/dev" and any(v.startswith("/dev/") for v in view))]
    # Not mounts: the nodes the helper makes in its /dev, and the host's symlinks
    # (Debian's merged /usr: /bin -> usr/bin), which the view skips.
    missing = [p for p in view if p not in points and not p.startswith("/dev/") and
               podman("exec", NAMES["sepcsi"], "test", "-L", p, check_rc=False).returncode]
    check(not extra and not missing, "the mounts of %s (pid %d) differ from its view: "
          "extra %s, missing %s" % (name, pid, extra, missing))


# ---- the test ------------------------------------------------------------------------


def cleanup(data_dev, image):
    """Containers, the images built here (the base stays, for the next run), the build's
    intermediate images, loop devices on the driver's tmpfs."""
    for name in NAMES.values():
        podman("rm", "-f", "-t", "5", name, check_rc=False)
    for loop in loops_on(data_dev) if data_dev else []:
        run(["losetup", "-d", loop], check=False)
    podman("rmi", "-f", SIDECARS, image, check_rc=False)
    podman("image", "prune", "-f", check_rc=False)


def main():
    if os.geteuid() != 0:
        sys.exit("the container test needs root")
    if os.environ.get("SEPCSI_CONTAINER_NS") != str(os.getpid()):
        # A mount namespace of its own, whatever namespace it was started in.
        os.environ["SEPCSI_CONTAINER_NS"] = "pending"
        os.execvp("unshare", ["unshare", "-m", "--propagation", "private", "sh", "-c",
                              'SEPCSI_CONTAINER_NS=$$ exec "$0" "$@"', sys.executable,
                              os.path.abspath(__file__)] + sys.argv[1:])
    for tool in ("podman", "runc", "debootstrap"):
        check(shutil.which(tool), "%s is not installed (tools/deps.sh installs it)" % tool)
    sidecars = all(os.access(os.path.join(PEERS, b), os.X_OK)
                   for b in ("node-driver-registrar", "livenessprobe"))
    if not sidecars:
        print("container test: no node-driver-registrar or livenessprobe in %s "
              "(SEPCSI_PEERS): the sidecars' checks are NOT run" % PEERS, flush=True)
    os.makedirs(WORK, exist_ok=True)
    with open(os.path.join(WORK, "containers.conf"), "w") as f:
        f.write(CONF)
    step, spec, data_dev = Steps(), pod_spec(), None
    image = qualified(container(spec, "sepcsi")["image"])
    try:
        make_node()
        data_dev = os.stat(SEPCSI_DIR).st_dev
        with step("base image (debootstrap, podman import)"):
            base_image()
        with step("driver image: podman build -f deploy/Containerfile"):
            driver_image(image)
        if sidecars:
            with step("sidecar image (node-driver-registrar v2.9.4, livenessprobe v2.9.0)"):
                sidecar_image()
        with step("the pod from deploy/kubernetes/daemonset.yaml"):
            start_driver(spec)
            for name, binary in (("node-driver-registrar", "node-driver-registrar"),
                                 ("liveness-probe", "livenessprobe")) if sidecars else ():
                podman(*run_args(spec, container(spec, name), SIDECARS,
                                 "/usr/local/bin/" + binary))
        ports = {c["name"]: c["containerPort"] for ctr in spec["containers"]
                 for c in ctr.get("ports", [])}
        health = "http://127.0.0.1:%d/healthz" % ports["healthz"] if sidecars else None
        if sidecars:
            with step("kubelet's registration and the sidecars' /healthz"):
                info = register()
                print("   registered %s at %s, versions %s" %
                      (info[2][0], info[3][0], info[4]))
                wait_status("http://127.0.0.1:%d/healthz" % ports["registrar"], 200)
                wait_status(health, 200)
        c = csi_client.CsiClient("unix://" + os.path.join(KUBELET, "plugins", DRIVER,
                                                          "csi.sock"))
        base_mounts = mounts_beneath(KUBELET)
        with step("a workload on a file-system volume and a raw block volume"):
            fsv = Volume(c, "pvc-ct-fs", csi_client.mount_cap("ext4"))
            blk = Volume(c, "pvc-ct-blk", csi_client.block_cap())
            for v in (fsv, blk):
                v.stage()
                v.publish()
            check(fsv.target in mounts_beneath(KUBELET), "the publish did not reach the host")
            fs_round(fsv, "first")
            block_round(blk, "sepcsi-block-1")
            for v in (fsv, blk):
                v.unpublish()
                v.unstage()
                v.stage()
                v.publish()
            check(read_fs(fsv) == "first\n", "the data did not survive unstage and stage")
            check(read_block(blk, 14) == "sepcsi-block-1", "the block data did not survive")
        with step("what the processes in the container hold, against --print-privileges"):
            print("   checked: %s" % ", ".join(audit(spec)))
        with step("the driver's container removed and made again, volumes published"):
            podman("rm", "-f", "-t", "10", NAMES["sepcsi"])
            if health:
                print("   livenessprobe without the driver: %s" % wait_status(health, None))
            start_driver(spec)
            if health:
                wait_status(health, 200)
            deadline = time.monotonic() + 30
            while '"result":"everything settled"' not in logs("sepcsi"):
                check(time.monotonic() < deadline, "no settled reconciliation: %s" %
                      logs("sepcsi")[-3000:])
                time.sleep(0.2)
            c.close()
            c = csi_client.CsiClient("unix://" + os.path.join(KUBELET, "plugins", DRIVER,
                                                              "csi.sock"))
            fsv.c = blk.c = c
            check(read_fs(fsv) == "first\n", "the volume is not usable after the restart")
            fs_round(fsv, "second")
            block_round(blk, "sepcsi-block-2")
        with step("the rest of the volumes' life"):
            for v in (fsv, blk):
                v.unpublish()
                v.unstage()
                v.delete()
            check(mounts_beneath(KUBELET) == base_mounts,
                  "mounts left: %s" % mounts_beneath(KUBELET))
            check(loops_on(data_dev) == [], "loop devices left: %s" % loops_on(data_dev))
            c.close()
        step.total()
        return 0
    except Failed as e:
        print("container test FAILED: %s" % e, flush=True)
        return 1
    finally:
        cleanup(data_dev, image)


if __name__ == "__main__":
    sys.exit(main())
