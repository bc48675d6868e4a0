"""The deployment recipes in deploy/: in each Kubernetes layout (deploy/kubernetes,
node-local volumes; deploy/kubernetes/shared, directory volumes on shared bases) every
manifest parses and its objects have the fields their kind needs and point at objects
that exist; every flag given to sepcsi-supervisor (DaemonSet, Deployment, systemd
unit, Nomad job) is one its --help lists, and the whole command line is accepted
(--print-privileges parses and checks every flag and loads the policy, then exits);
every image is pinned to a version; each kustomization lists what is there; the
policies load with the supervisor's own loader; the two layouts can run side by side;
systemd-analyze verifies the unit; the Nomad job has its csi_plugin block and a policy
naming Nomad's directory layout; the container recipe builds with tools/deps.sh and
tools/build.sh. Needs no root and starts no driver."""
import base64
import configparser
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

import conftest

DEPLOY = os.path.join(conftest.REPO, "deploy")
K8S = os.path.join(DEPLOY, "kubernetes")
SHARED = os.path.join(K8S, "shared")
SUPERVISOR = os.path.join(conftest.BIN, "sepcsi-supervisor")
DRIVER = "local.sepcsi.io"
SHARED_DRIVER = "shared.sepcsi.io"
# The Kubernetes layouts, each a kustomization with a driver name of its own: node-local
# volumes (one DaemonSet, controller and node on every node), and directory volumes on
# shared bases (one controller Deployment for the cluster, node plugins in a DaemonSet).
LAYOUTS = {"local": (K8S, DRIVER), "shared": (SHARED, SHARED_DRIVER)}
WORKLOAD_KINDS = ("DaemonSet", "Deployment")
# Sidecars that take --leader-election (a central instance acts only while it holds
# its Lease).
LEADER_ELECTED = {"csi-provisioner", "csi-resizer", "csi-snapshotter", "csi-attacher"}

# Flags a sidecar release no longer takes: giving one stops the sidecar at start.
REMOVED_SIDECAR_FLAGS = {
    # v8.2.0: replaced by --feature-gates=CSIVolumeGroupSnapshot=true
    "csi-snapshotter": ["--enable-volume-group-snapshots"],
}
# The flags csi-snapshot-metadata takes (kubernetes-csi/external-snapshot-metadata,
# pkg/sidecar/sidecar.go; --audience since v0.2.0, klog's --v): an unknown flag stops it.
SIDECAR_FLAGS = {
    "csi-snapshot-metadata": {
        "--csi-address", "--port", "--tls-cert", "--tls-key", "--audience", "--timeout",
        "--http-endpoint", "--metrics-path", "--max-streaming-duration-min",
        "--kube-api-qps", "--kube-api-burst", "--kubeconfig", "--v"},
}
# Changed-block tracking (snapshotmetadataservice.yaml): the sidecar's image, the
# Secret it is given, and the API its SnapshotMetadataService is written in (v1alpha1
# is gone since external-snapshot-metadata v1.0.0).
SNAPMETA_IMAGE = "registry.k8s.io/sig-storage/csi-snapshot-metadata"
SNAPMETA_SECRET = "sepcsi-snapshot-metadata-tls"
SNAPMETA_API = "cbt.storage.k8s.io/v1beta1"
# docs/controller.md, Parameters and Directory volumes.
SC_PARAMS = {"fsType", "mkfsOptions", "expandLimitBytes", "type", "baseDir", "pathPattern",
             "onDelete", "archiveOnDelete"}
DIR_ONLY_PARAMS = {"baseDir", "pathPattern", "onDelete", "archiveOnDelete"}
MUTABLE_PARAMS = {"expandLimitBytes"}
# Linux capability numbers (linux/capability.h), for the supervisor's bounding set.
CAP_NAMES = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
             "CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
             "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
             "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
             "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
             "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
             "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD"]
# systemd directives that give a service a mount namespace of its own (or a device
# allowlist): the helper's mounts would then not be the host's.
NAMESPACING_DIRECTIVES = {
    "PrivateTmp", "PrivateMounts", "PrivateDevices", "ProtectSystem", "ProtectHome",
    "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
    "ProtectControlGroups", "ProtectClock", "ProtectProc", "ProcSubset", "ReadOnlyPaths",
    "ReadWritePaths", "InaccessiblePaths", "ExecPaths", "NoExecPaths",
    "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths", "MountFlags", "RootDirectory",
    "RootImage", "DevicePolicy", "DeviceAllow", "DynamicUser",
}


def project_version():
    with open(os.path.join(conftest.REPO, "CMakeLists.txt")) as f:
        m = re.search(r"project\(sepcsi\s+VERSION\s+([0-9.]+)", f.read())
    assert m, "no project VERSION in CMakeLists.txt"
    return m.group(1)


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def manifests(examples=True, root=K8S):
    """{path: [objects]} of every YAML file of the layout in root (examples/ too unless
    told); the files of another layout's directory beneath root are that layout's."""
    others = [r for r, _ in LAYOUTS.values() if r != root and r.startswith(root + os.sep)]
    out = {}
    for p in sorted(glob.glob(os.path.join(root, "**", "*.yaml"), recursive=True)):
        if any(p.startswith(o + os.sep) for o in others):
            continue
        if not examples and os.sep + "examples" + os.sep in p:
            continue
        out[p] = load_docs(p)
    return out


def objects(examples=True, root=K8S):
    return [(p, o) for p, docs in manifests(examples, root).items() for o in docs]


def by_kind(kind, examples=True, root=K8S):
    return [o for _, o in objects(examples, root) if o.get("kind") == kind]


def names(kind, examples=True, root=K8S):
    return {o["metadata"]["name"] for o in by_kind(kind, examples, root)}


class Layout:
    """One kustomization under deploy/kubernetes: its directory and its driver's name."""

    def __init__(self, name):
        self.name = name
        self.root, self.driver = LAYOUTS[name]

    def __repr__(self):
        return self.name


@pytest.fixture(params=sorted(LAYOUTS))
def layout(request):
    return Layout(request.param)


def help_flags():
    res = subprocess.run([SUPERVISOR, "--help"], capture_output=True, text=True, check=True)
    return set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", res.stdout, re.M)), res.stdout


def flag_name(arg):
    return arg.split("=", 1)[0]


def pinned(image):
    """A digest, or a tag that names a version (not latest)."""
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.rsplit(":", 1)[1]
    return tag != "latest" and re.fullmatch(r"v?[0-9]+(\.[0-9]+)*([.-][0-9A-Za-z.-]+)?", tag)


def check_command_line(args, policy_text=None, policy_flag="--policy"):
    """Every flag in --help; then the whole line through --print-privileges, with the
    policy (if any) from a root-owned temporary copy: exit 0 or the supervisor's
    complaint."""
    known, _ = help_flags()
    for a in args:
        assert a.startswith("--"), "not a flag: %r" % a
        assert flag_name(a) in known, "%s is not in sepcsi-supervisor --help" % flag_name(a)
    with tempfile.TemporaryDirectory() as tmp:
        line = []
        for a in args:
            if flag_name(a) == policy_flag:
                assert policy_text is not None, "the policy the command line names"
                p = os.path.join(tmp, "policy.ini")
                with open(p, "w") as f:
                    f.write(policy_text)
                a = "%s=%s" % (policy_flag, p)
            line.append(a)
        res = subprocess.run([SUPERVISOR] + line + ["--print-privileges"],
                             capture_output=True, text=True)
        assert res.returncode == 0, (line, res.stderr)
        return res


def load_policy(text):
    """The supervisor's loader (pol_load, as the helper's) through --print-privileges."""
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "policy.ini")
        with open(p, "w") as f:
            f.write(text)
        res = subprocess.run([SUPERVISOR, "--print-privileges", "--policy", p],
                             capture_output=True, text=True)
    assert res.returncode == 0, "policy does not load: %s" % res.stderr.strip()


def policy_values(text):
    cp = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None)
    cp.read_string(text)
    return {s: {k: v.split() for k, v in cp[s].items()} for s in cp.sections()}


def k8s_policy(root=K8S):
    """The layout's one policy ConfigMap (the one with a policy.ini)."""
    cms = [o for o in by_kind("ConfigMap", False, root) if "policy.ini" in o.get("data", {})]
    assert len(cms) == 1, "%s: one policy ConfigMap, not %d" % (root, len(cms))
    return cms[0]


def k8s_policy_text(root=K8S):
    return k8s_policy(root)["data"]["policy.ini"]


def bases_of(text):
    """(node-local bases, shared bases) a policy names."""
    d = policy_values(text).get("directories", {})
    return d.get("base_dirs", []), d.get("shared_base_dirs", [])


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def workloads(root=K8S):
    """[(path, object)] of the layout's DaemonSets and Deployments (not the examples')."""
    return [(p, o) for p, o in objects(False, root) if o.get("kind") in WORKLOAD_KINDS]


def sepcsi_containers(root=K8S):
    """[(path, workload, container)] of every sepcsi container of the layout."""
    return [(p, w, c) for p, w in workloads(root) for c in pod_spec(w)["containers"]
            if c["name"] == "sepcsi"]


def sepcsi_container(root=K8S):
    (ds,) = by_kind("DaemonSet", False, root)
    (c,) = [c for c in pod_spec(ds)["containers"] if c["name"] == "sepcsi"]
    return ds, c


def sidecar_name(c):
    return c["image"].rsplit("/", 1)[-1].split(":")[0]


def arg_value(c, flag):
    vals = [a.split("=", 1)[1] for a in c.get("args", []) if flag_name(a) == flag]
    assert len(vals) == 1, "%s: %s given %d times" % (c["name"], flag, len(vals))
    return vals[0]


def flag_on(c, flag):
    """A boolean flag given once, and true."""
    vals = [a for a in c.get("args", []) if flag_name(a) == flag]
    return len(vals) == 1 and vals[0] in (flag, flag + "=true")


def served_driver(c):
    """The driver name a sepcsi container serves: --driver-name, else its variable, else
    the default --help states."""
    given = [a.split("=", 1)[1] for a in c.get("args", []) if flag_name(a) == "--driver-name"]
    assert len(given) <= 1, given
    if given:
        return given[0]
    env = [e.get("value") for e in c.get("env", []) if e["name"] == "SEPCSI_DRIVER_NAME"]
    if env and env[0]:
        return env[0]
    _, text = help_flags()
    m = re.search(r"--driver-name NAME\n.*?default ([^\]\s]+)\]", text, re.S)
    assert m, "no default driver name in --help"
    return m.group(1)


def volume_of(ctr, path):
    """(volume name, path relative to its mount) of where path is in a container."""
    ms = [m for m in ctr["volumeMounts"] if (path + "/").startswith(m["mountPath"] + "/")]
    assert ms, "%s: nothing mounted at %s" % (ctr["name"], path)
    m = max(ms, key=lambda m: len(m["mountPath"]))
    return m["name"], os.path.relpath(path, m["mountPath"])


def host_path(workload, ctr, path):
    """Where path of a container is on the host (a hostPath volume), else None."""
    name, rel = volume_of(ctr, path)
    (v,) = [v for v in pod_spec(workload).get("volumes", []) if v["name"] == name]
    if "hostPath" not in v:
        return None
    return os.path.normpath(os.path.join(v["hostPath"]["path"], rel))


def nested(a, b):
    return (a + "/").startswith(b + "/") or (b + "/").startswith(a + "/")


# Kubernetes


def test_every_manifest_belongs_to_one_layout():
    every = set(glob.glob(os.path.join(K8S, "**", "*.yaml"), recursive=True))
    seen = [p for root, _ in LAYOUTS.values() for p in manifests(root=root)]
    assert len(seen) == len(set(seen)) and set(seen) == every, every ^ set(seen)
    for root, _ in LAYOUTS.values():
        assert os.path.isfile(os.path.join(root, "kustomization.yaml")), root


def test_every_manifest_parses_with_required_fields(layout):
    found = manifests(root=layout.root)
    assert found, "no manifests under %s" % layout.root
    for path, docs in found.items():
        assert docs, "%s holds no object" % path
        for o in docs:
            if os.path.basename(path) == "kustomization.yaml":
                continue
            assert isinstance(o, dict), path
            for field in ("apiVersion", "kind"):
                assert isinstance(o.get(field), str) and o[field], (path, field)
            assert isinstance(o.get("metadata", {}).get("name"), str), (path, o["kind"])
            assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", o["metadata"]["name"]), \
                (path, o["metadata"]["name"])


def check_pod_spec(spec, where, volumes_ok=True):
    containers = spec.get("containers") or []
    assert containers, where
    cnames = [c.get("name") for c in containers]
    assert all(cnames) and len(set(cnames)) == len(cnames), (where, cnames)
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    assert len(vols) == len(spec.get("volumes", [])), "%s: repeated volume names" % where
    for c in containers:
        assert c.get("image"), (where, c["name"])
        assert pinned(c["image"]), "%s: %s is not pinned to a version" % (where, c["image"])
        for m in c.get("volumeMounts", []):
            assert m["name"] in vols, "%s: %s mounts unknown volume %s" % (where, c["name"],
                                                                            m["name"])
            assert m["mountPath"].startswith("/"), (where, m)
        for e in c.get("env", []):
            assert e.get("name") and ("value" in e or "valueFrom" in e), (where, e)
        for a in c.get("args", []):
            for var in re.findall(r"\$\(([A-Z_]+)\)", a):
                assert var in {e["name"] for e in c.get("env", [])}, (where, c["name"], var)
    for v in vols.values():
        if "hostPath" in v:
            assert v["hostPath"]["path"].startswith("/"), (where, v)
    return vols


def test_workloads(layout):
    """Each DaemonSet and Deployment: selector, ServiceAccount, volumes, the sepcsi
    container's privilege and resources, sidecars' flags, and sidecars pinned to the
    releases their file's header lists."""
    found = workloads(layout.root)
    assert [w for _, w in found if w["kind"] == "DaemonSet"], "no node plugin"
    for path, w in found:
        where = "%s %s" % (w["kind"], w["metadata"]["name"])
        spec = w["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items(), where
        pod = pod_spec(w)
        assert pod["serviceAccountName"] in names("ServiceAccount", False, layout.root), where
        vols = check_pod_spec(pod, where)
        for v in vols.values():
            if "configMap" in v:
                assert v["configMap"]["name"] in names("ConfigMap", False, layout.root), v
                # The supervisor takes a policy file only if nobody but root can write it.
                assert v["configMap"].get("defaultMode", 0o644) & 0o022 == 0, v
        (sep,) = [c for c in pod["containers"] if c["name"] == "sepcsi"]
        assert sep["securityContext"]["privileged"] is True, where
        res = sep["resources"]
        assert res["requests"]["memory"] and res["limits"]["memory"] and \
            res["requests"]["cpu"], where
        # Every sidecar talks to the socket this pod's sepcsi serves.
        endpoint = arg_value(sep, "--endpoint")
        assert endpoint.startswith("unix://"), endpoint
        sock = endpoint[len("unix://"):]
        for c in pod["containers"]:
            if c is not sep and any(flag_name(a) == "--csi-address" for a in c["args"]):
                address = arg_value(c, "--csi-address")
                assert address in (sock, endpoint), (where, c["name"], address)
                assert volume_of(c, sock) == volume_of(sep, sock), (where, c["name"])
        for c in pod["containers"]:
            side = sidecar_name(c)
            for flag in REMOVED_SIDECAR_FLAGS.get(side, []):
                assert not any(flag_name(a) == flag for a in c.get("args", [])), (side, flag)
            if side in SIDECAR_FLAGS:
                unknown = {flag_name(a) for a in c.get("args", [])} - SIDECAR_FLAGS[side]
                assert not unknown, "%s takes no %s" % (side, sorted(unknown))
        # Every sidecar comes from the same registry, pinned to a release (vX.Y.Z), and
        # that release is the one the file's header lists its flags for.
        with open(path) as f:
            header = "".join(ln for ln in f if ln.startswith("#"))
        for c in pod["containers"]:
            if c is sep:
                continue
            repo, _, tag = c["image"].rpartition(":")
            assert repo.startswith("registry.k8s.io/sig-storage/"), c["image"]
            assert re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+", tag), c["image"]
            assert re.search(r"\s%s\s" % re.escape(tag), header), \
                "%s: release %s is not in %s's header" % (c["name"], tag,
                                                          os.path.basename(path))


def test_daemonset(layout):
    """The node plugin: the registrar registers the socket the driver serves, at
    kubelet's path for this driver, and the driver's mounts reach kubelet."""
    ds, sep = sepcsi_container(layout.root)
    pod = pod_spec(ds)
    vols = {v["name"]: v for v in pod["volumes"]}
    assert "--endpoint=unix:///csi/csi.sock" in sep["args"]
    (reg,) = [c for c in pod["containers"] if c["name"] == "node-driver-registrar"]
    assert "--kubelet-registration-path=/var/lib/kubelet/plugins/%s/csi.sock" % \
        layout.driver in reg["args"]
    plugin_dir = [v for v in vols.values() if v.get("hostPath", {}).get("path") ==
                  "/var/lib/kubelet/plugins/" + layout.driver]
    assert plugin_dir, "the socket's directory is not kubelet's plugin directory"
    assert volume_of(sep, "/csi/csi.sock")[0] == plugin_dir[0]["name"]
    # Mounts made inside the container reach kubelet only through Bidirectional.
    assert any(m["mountPath"] == "/var/lib/kubelet" and
               m.get("mountPropagation") == "Bidirectional" for m in sep["volumeMounts"])


def test_sepcsi_flags_exist_and_the_command_line_loads(layout):
    found = sepcsi_containers(layout.root)
    assert found
    for _, w, c in found:
        args = [a.replace("$(NODE_NAME)", "node-1") for a in c["args"]]
        policy_mount = [m for m in c["volumeMounts"] if m["name"] == "policy"]
        assert policy_mount, "%s: the policy ConfigMap is not mounted" % w["metadata"]["name"]
        (v,) = [v for v in pod_spec(w)["volumes"] if v["name"] == "policy"]
        assert v["configMap"]["name"] == k8s_policy(layout.root)["metadata"]["name"], v
        policy_args = [a for a in args if flag_name(a) == "--policy"]
        assert policy_args == ["--policy=%s/policy.ini" % policy_mount[0]["mountPath"]]
        check_command_line(args, k8s_policy_text(layout.root))


def test_images_pinned_to_the_release(layout):
    version = project_version()
    for _, _, c in sepcsi_containers(layout.root):
        assert c["image"] == "sepcsi:%s" % version, (c["image"], version)
    (kust,) = load_docs(os.path.join(layout.root, "kustomization.yaml"))
    for img in kust.get("images", []):
        assert img.get("newTag") not in (None, "", "latest"), img
        if img["name"] == "sepcsi":
            assert img["newTag"] == version, (img, version)
    for path, o in objects(root=layout.root):
        for s in (o.get("spec", {}).get("template", {}).get("spec"), o.get("spec")):
            for c in (s or {}).get("containers", []) if isinstance(s, dict) else []:
                assert pinned(c["image"]), (path, c["image"])


def test_kustomization_lists_what_is_there(layout):
    (kust,) = load_docs(os.path.join(layout.root, "kustomization.yaml"))
    assert kust["kind"] == "Kustomization"
    listed = kust["resources"]
    assert len(set(listed)) == len(listed)
    for r in listed:
        assert os.path.isfile(os.path.join(layout.root, r)), \
            "kustomization lists missing %s" % r
        assert not r.startswith("examples"), "examples are not part of the set: %s" % r
    present = {os.path.relpath(p, layout.root)
               for p in manifests(examples=False, root=layout.root)} - {"kustomization.yaml"}
    assert present == set(listed), "not listed: %s; listed, absent: %s" % (
        present - set(listed), set(listed) - present)


def test_k8s_policy_loads(layout):
    text = k8s_policy_text(layout.root)
    load_policy(text)
    bases, shared = bases_of(text)
    if layout.name == "shared":
        assert shared, "the shared layout's policy names no shared base"
    for _, w, c in sepcsi_containers(layout.root):
        data = arg_value(c, "--data-dir")
        vols = {v["name"]: v for v in pod_spec(w)["volumes"]}
        for base in bases + shared:
            assert not nested(base, data), \
                "base dir %s overlaps the data directory %s" % (base, data)
        for base in bases:
            (sepdir,) = [m for m in c["volumeMounts"] if m["name"] == "sepcsi-dir"]
            assert base.startswith(sepdir["mountPath"] + "/"), \
                "%s is not on a host path" % base
        # A shared base is the operator's mount, at the same path on the host and in
        # the pod; the pod sees a mount made after it started (HostToContainer), and
        # does not start where the path is missing (type Directory: a base made empty
        # on the node's own disk would take volumes no other node sees).
        for base in shared:
            ms = [m for m in c["volumeMounts"] if m["mountPath"] == base]
            assert len(ms) == 1, "%s: shared base %s is not mounted at its own path" % (
                w["metadata"]["name"], base)
            assert ms[0].get("mountPropagation") in ("HostToContainer", "Bidirectional"), \
                ms[0]
            assert not ms[0].get("readOnly"), ms[0]
            hp = vols[ms[0]["name"]].get("hostPath", {})
            assert hp.get("path") == base and hp.get("type") == "Directory", hp


def test_storage_classes(layout):
    bases, shared = bases_of(k8s_policy_text(layout.root))
    assert names("CSIDriver", False, layout.root) == {layout.driver}
    classes = by_kind("StorageClass", False, layout.root)
    kinds = set()
    for sc in classes:
        name = sc["metadata"]["name"]
        assert sc["provisioner"] == layout.driver, name
        params = sc.get("parameters", {}) or {}
        for k, v in params.items():
            assert isinstance(v, str), (name, k)
            assert k in SC_PARAMS or k.startswith("csi.storage.k8s.io/"), \
                "%s: unknown parameter %s" % (name, k)
        fs = params.get("csi.storage.k8s.io/fstype", params.get("fsType", ""))
        binding = "WaitForFirstConsumer"
        if params.get("type") == "directory":
            assert params["baseDir"] in bases + shared, "baseDir %s is not in the policy" % (
                params["baseDir"])
            assert not fs and "mkfsOptions" not in params, name
            if params["baseDir"] in shared:
                # No node is pinned: the claim binds at once.
                binding = "Immediate"
                kinds.add("shared directory")
            else:
                kinds.add("directory")
        else:
            assert not DIR_ONLY_PARAMS & set(params), name
            assert fs in ("", "ext4", "xfs", "btrfs"), name
            kinds.add(fs or "block")
        assert sc.get("volumeBindingMode") == binding, (name, sc.get("volumeBindingMode"))
    if layout.name == "local":
        assert {"ext4", "xfs", "block", "directory"} <= kinds, kinds
        # A shared base wants one controller for the cluster, not one per node.
        assert "shared directory" not in kinds, kinds
    else:
        # Only directory volumes on a shared base: an image made by the one controller
        # would live on its node alone.
        assert kinds == {"shared directory"}, kinds


def test_snapshot_and_attribute_classes(layout):
    (c,) = by_kind("VolumeSnapshotClass", False, layout.root)
    assert c["driver"] == layout.driver and c["deletionPolicy"] in ("Delete", "Retain"), c
    if layout.name == "shared":
        # Directory volumes are not grouped (docs/controller.md).
        assert not by_kind("VolumeGroupSnapshotClass", True, layout.root)
        return
    (g,) = by_kind("VolumeGroupSnapshotClass", False)
    assert g["driver"] == DRIVER and g["deletionPolicy"] in ("Delete", "Retain"), g
    assert g["apiVersion"].startswith("groupsnapshot.storage.k8s.io/"), g["apiVersion"]
    (vac,) = by_kind("VolumeAttributesClass")
    assert vac["driverName"] == DRIVER
    assert vac["apiVersion"] == "storage.k8s.io/v1"
    assert set(vac["parameters"]) <= MUTABLE_PARAMS and vac["parameters"], vac


# What each layout's sidecars must be granted: the current sidecars read group snapshots
# in their own API group and VolumeAttributesClass in storage.k8s.io/v1; the node-local
# provisioners publish CSIStorageCapacity; the shared layout's sidecars take leases.
RBAC_NEEDS = {
    "local": [("groupsnapshot.storage.k8s.io", "volumegroupsnapshotcontents"),
              ("groupsnapshot.storage.k8s.io", "volumegroupsnapshotclasses"),
              ("storage.k8s.io", "volumeattributesclasses"),
              ("storage.k8s.io", "csistoragecapacities"),
              ("snapshot.storage.k8s.io", "volumesnapshotcontents"),
              ("", "persistentvolumes"), ("", "persistentvolumeclaims")],
    "shared": [("storage.k8s.io", "volumeattributesclasses"),
               ("snapshot.storage.k8s.io", "volumesnapshotcontents"),
               ("", "persistentvolumes"), ("", "persistentvolumeclaims"),
               ("", "persistentvolumeclaims/status"), ("", "events"),
               ("coordination.k8s.io", "leases")],
}


def test_rbac_binds_what_exists(layout):
    root = layout.root
    roles = {("ClusterRole", n) for n in names("ClusterRole", False, root)}
    for r in by_kind("Role", False, root):
        roles.add(("Role", r["metadata"]["name"], r["metadata"]["namespace"]))
    for b in by_kind("ClusterRoleBinding", False, root) + by_kind("RoleBinding", False, root):
        ref = b["roleRef"]
        if ref["kind"] == "Role":
            assert ("Role", ref["name"], b["metadata"]["namespace"]) in roles, b
        else:
            assert ("ClusterRole", ref["name"]) in roles, b
        for s in b["subjects"]:
            if s["kind"] == "ServiceAccount":
                assert s["name"] in names("ServiceAccount", False, root), s
    # What the pods that call the API server are granted.
    granted = set()
    for _, w in workloads(root):
        granted |= set(granted_verbs(pod_spec(w)["serviceAccountName"],
                                     w["metadata"]["namespace"], root))
    for need in RBAC_NEEDS[layout.name]:
        assert need in granted, need


def granted_verbs(service_account, namespace, root=K8S):
    """{(apiGroup, resource): verbs} the ClusterRoleBindings, and the RoleBindings of
    namespace, give a ServiceAccount."""
    croles = {r["metadata"]["name"]: r for r in by_kind("ClusterRole", False, root)}
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r
             for r in by_kind("Role", False, root)}
    bindings = by_kind("ClusterRoleBinding", False, root) + [
        b for b in by_kind("RoleBinding", False, root)
        if b["metadata"]["namespace"] == namespace]
    out = {}
    for b in bindings:
        if not any(s["kind"] == "ServiceAccount" and s["name"] == service_account and
                   s.get("namespace") == namespace for s in b["subjects"]):
            continue
        ref = b["roleRef"]
        role = roles[(namespace, ref["name"])] if ref["kind"] == "Role" else croles[ref["name"]]
        for r in role["rules"]:
            for g in r["apiGroups"]:
                for res in r["resources"]:
                    out.setdefault((g, res), set()).update(r["verbs"])
    return out


def snapmeta_container():
    ds, _ = sepcsi_container()
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"]
            if c["image"].rsplit(":", 1)[0] == SNAPMETA_IMAGE]
    return ds, c


def test_snapshot_metadata_sidecar_talks_to_the_drivers_socket():
    ds, c = snapmeta_container()
    _, sep = sepcsi_container()
    assert pinned(c["image"]), c["image"]
    # The socket sepcsi serves, through the same volume: the driver serves the CSI
    # SnapshotMetadata service wherever it serves the Controller service (not --mode
    # node), and says so in GetPluginCapabilities (SNAPSHOT_METADATA_SERVICE).
    assert not any(a in ("--mode=node", "--mode") for a in sep["args"]), sep["args"]
    endpoint = arg_value(sep, "--endpoint")
    assert endpoint.startswith("unix://")
    sock = endpoint[len("unix://"):]
    address = arg_value(c, "--csi-address")
    assert address in (sock, endpoint), (address, endpoint)
    assert volume_of(c, sock) == volume_of(sep, sock), "not the driver's socket"
    # Its serving certificate and key from the kubernetes.io/tls Secret's two keys.
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    for flag, key in (("--tls-cert", "tls.crt"), ("--tls-key", "tls.key")):
        name, rel = volume_of(c, arg_value(c, flag))
        assert vols[name].get("secret", {}).get("secretName") == SNAPMETA_SECRET, vols[name]
        assert rel == key, (flag, rel)
        (m,) = [m for m in c["volumeMounts"] if m["name"] == name]
        assert m.get("readOnly") is True, m
    # gRPC and HTTP ports are the container's, and readiness asks the HTTP one.
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert int(arg_value(c, "--port")) in ports.values(), (c["args"], ports)
    http = int(arg_value(c, "--http-endpoint").rsplit(":", 1)[1])
    probe = c["readinessProbe"]["httpGet"]
    assert probe["path"] == "/health"
    assert ports.get(probe["port"], probe["port"]) == http, (probe, ports)
    # No port of the pod is taken twice (one network namespace).
    all_ports = [p["containerPort"] for ctr in ds["spec"]["template"]["spec"]["containers"]
                 for p in ctr.get("ports", [])]
    assert len(all_ports) == len(set(all_ports)), all_ports


def test_snapshot_metadata_service_secret_and_object_agree():
    ds, c = snapmeta_container()
    ns = ds["metadata"]["namespace"]
    labels = ds["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    grpc = int(arg_value(c, "--port"))
    # The Service picks this pod and sends its port to the sidecar's gRPC port, on the
    # client's own node only (a node's sidecar answers for that node's snapshots).
    svcs = [s for s in by_kind("Service", False)
            if any(ports.get(p["targetPort"], p["targetPort"]) == grpc
                   for p in s["spec"]["ports"])]
    assert len(svcs) == 1, "one Service for the sidecar's gRPC port %d" % grpc
    (svc,) = svcs
    assert svc["metadata"]["namespace"] == ns
    assert svc["spec"]["selector"].items() <= labels.items(), svc["spec"]["selector"]
    assert svc["spec"].get("internalTrafficPolicy") == "Local", svc["spec"]
    (sport,) = [p for p in svc["spec"]["ports"]
                if ports.get(p["targetPort"], p["targetPort"]) == grpc]
    # The SnapshotMetadataService: the driver's name, the Service's address, the
    # sidecar's audience, a CA bundle that is base64.
    (sms,) = by_kind("SnapshotMetadataService", False)
    assert sms["apiVersion"] == SNAPMETA_API, sms["apiVersion"]
    assert sms["metadata"]["name"] == DRIVER
    assert "namespace" not in sms["metadata"], "SnapshotMetadataService is cluster-scoped"
    spec = sms["spec"]
    assert spec["address"] == "%s.%s.svc:%d" % (svc["metadata"]["name"], ns, sport["port"]), \
        spec["address"]
    assert spec["audience"] and spec["audience"] == arg_value(c, "--audience"), spec
    assert base64.b64decode(spec["caCert"], validate=True), "caCert is not base64"
    # No key material is shipped: no Secret of that name here, and the file tells how
    # to make it, with that name, in the pod's namespace.
    assert SNAPMETA_SECRET not in names("Secret"), "the TLS Secret is the operator's"
    with open(os.path.join(K8S, "snapshotmetadataservice.yaml")) as f:
        text = f.read()
    m = re.search(r"kubectl -n (\S+) create secret tls (\S+)", text)
    assert m and m.groups() == (ns, SNAPMETA_SECRET), m and m.groups()
    assert "%s.%s.svc" % (svc["metadata"]["name"], ns) in text


def test_snapshot_metadata_rbac():
    """The sidecar's ServiceAccount may review tokens and access (it authenticates
    and authorizes each client), read snapshots, their contents and classes (to find
    the driver's snapshot ids), and read the SnapshotMetadataService."""
    ds, _ = snapmeta_container()
    sa = ds["spec"]["template"]["spec"]["serviceAccountName"]
    verbs = granted_verbs(sa, ds["metadata"]["namespace"])
    for group, res, need in [
            ("authentication.k8s.io", "tokenreviews", {"create"}),
            ("authorization.k8s.io", "subjectaccessreviews", {"create"}),
            ("snapshot.storage.k8s.io", "volumesnapshots", {"get", "list"}),
            ("snapshot.storage.k8s.io", "volumesnapshotcontents", {"get", "list"}),
            ("snapshot.storage.k8s.io", "volumesnapshotclasses", {"get", "list"}),
            ("cbt.storage.k8s.io", "snapshotmetadataservices", {"get", "list"})]:
        assert need <= verbs.get((group, res), set()), (group, res, verbs.get((group, res)))


def test_examples_refer_to_what_exists(layout):
    root = layout.root
    pvcs = {o["metadata"]["name"]: o for o in by_kind("PersistentVolumeClaim", True, root)}
    assert pvcs, "no example claim"
    for pvc in pvcs.values():
        assert pvc["spec"]["storageClassName"] in names("StorageClass", True, root), pvc
        vac = pvc["spec"].get("volumeAttributesClassName")
        assert vac is None or vac in names("VolumeAttributesClass", True, root), vac
        src = pvc["spec"].get("dataSource")
        if src:
            assert src["kind"] == "VolumeSnapshot" and \
                src["name"] in names("VolumeSnapshot", True, root)
    for snap in by_kind("VolumeSnapshot", True, root):
        assert snap["spec"]["volumeSnapshotClassName"] in names("VolumeSnapshotClass", True,
                                                                root)
        assert snap["spec"]["source"]["persistentVolumeClaimName"] in pvcs
    # The examples' pods: Pods, and the pod templates of their workloads.
    pods = [("Pod " + o["metadata"]["name"], o["spec"]) for o in by_kind("Pod", True, root)]
    pods += [("%s %s" % (o["kind"], o["metadata"]["name"]), pod_spec(o))
             for p, o in objects(True, root)
             if os.sep + "examples" + os.sep in p and "template" in o.get("spec", {})]
    assert pods
    for where, spec in pods:
        vols = check_pod_spec(spec, where)
        for v in vols.values():
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in pvcs, v


def test_driver_names_agree(layout):
    """One name per layout: the CSIDriver, what every sepcsi container serves, the
    classes' provisioner and driver, and kubelet's plugin directory."""
    root, driver = layout.root, layout.driver
    assert names("CSIDriver", False, root) == {driver}
    for _, w, c in sepcsi_containers(root):
        assert served_driver(c) == driver, (w["metadata"]["name"], served_driver(c))
    for sc in by_kind("StorageClass", True, root):
        assert sc["provisioner"] == driver, sc["metadata"]["name"]
    for kind in ("VolumeSnapshotClass", "VolumeGroupSnapshotClass"):
        for c in by_kind(kind, True, root):
            assert c["driver"] == driver, c["metadata"]["name"]
    for vac in by_kind("VolumeAttributesClass", True, root):
        assert vac["driverName"] == driver, vac["metadata"]["name"]
    for _, w in workloads(root):
        for v in pod_spec(w).get("volumes", []):
            p = v.get("hostPath", {}).get("path", "")
            if p.startswith("/var/lib/kubelet/plugins/"):
                assert p == "/var/lib/kubelet/plugins/" + driver, (w["metadata"]["name"], p)


def test_layouts_live_side_by_side():
    """Both layouts may run in one cluster, on the same nodes: no object of one replaces
    one of the other, no selector picks the other's pods, and no two sepcsi containers
    keep their store or data directory in the same place on a host."""
    seen = {}
    for name, (root, _) in LAYOUTS.items():
        for path, o in objects(True, root):
            if os.path.basename(path) == "kustomization.yaml":
                continue
            key = (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
            assert key not in seen, "%s in %s and %s" % (key, seen[key], name)
            seen[key] = name
    pods = [(name, w) for name, (root, _) in LAYOUTS.items() for _, w in workloads(root)]
    selectors = [(name, o["spec"]["selector"]) for name, (root, _) in LAYOUTS.items()
                 for o in by_kind("Service", False, root)]
    selectors += [(name, w["spec"]["selector"]["matchLabels"]) for name, w in pods]
    for name, sel in selectors:
        for other, w in pods:
            labels = w["spec"]["template"]["metadata"]["labels"]
            if other != name:
                assert not sel.items() <= labels.items(), (name, sel, w["metadata"]["name"])
    places = []
    for name, (root, _) in LAYOUTS.items():
        for _, w, c in sepcsi_containers(root):
            for flag in ("--state-dir", "--data-dir"):
                where = host_path(w, c, arg_value(c, flag))
                assert where, "%s: %s is not kept on the host" % (w["metadata"]["name"], flag)
                places.append(("%s %s" % (w["metadata"]["name"], flag), where))
    for i, (a, pa) in enumerate(places):
        for b, pb in places[i + 1:]:
            assert not nested(pa, pb), "%s (%s) and %s (%s)" % (a, pa, b, pb)


def shared_workloads():
    (dep,) = by_kind("Deployment", False, SHARED)
    (ds,) = by_kind("DaemonSet", False, SHARED)
    return dep, ds


def test_shared_controller_and_node_modes():
    """Shared bases: one controller (Identity and Controller), node plugins (Identity and
    Node) everywhere; the controller's store is one, so one replica, and the old pod
    stops before the new one starts."""
    dep, ds = shared_workloads()
    for w, mode in ((dep, "controller"), (ds, "node")):
        (c,) = [c for c in pod_spec(w)["containers"] if c["name"] == "sepcsi"]
        assert arg_value(c, "--mode") == mode, (w["metadata"]["name"], c["args"])
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"]["type"] == "Recreate"
    pod = pod_spec(dep)
    (sep,) = [c for c in pod["containers"] if c["name"] == "sepcsi"]
    # kubelet never calls the controller: its socket is the pod's own, and nothing it
    # does has to reach the host's mounts.
    (v,) = [v for v in pod["volumes"] if v["name"] == volume_of(sep, "/csi/csi.sock")[0]]
    assert "emptyDir" in v, v
    assert not any(m.get("mountPropagation") == "Bidirectional"
                   for c in pod["containers"] for m in c.get("volumeMounts", [])), pod
    # The node plugins create nothing: no provisioning sidecar runs beside them.
    assert {sidecar_name(c) for c in pod_spec(ds)["containers"]} <= {
        "sepcsi", "csi-node-driver-registrar", "livenessprobe"}
    assert "csi-provisioner" in {sidecar_name(c) for c in pod["containers"]}


def test_shared_sidecars_are_leader_elected():
    """Every sidecar of the controller that takes --leader-election has it (none runs
    per node), the provisioner hands CreateVolume the claim's metadata (pathPattern),
    and the sidecars' ServiceAccount may hold a Lease in the pod's namespace."""
    dep, ds = shared_workloads()
    pod = pod_spec(dep)
    elected = [c for c in pod["containers"] if sidecar_name(c) in LEADER_ELECTED]
    assert {sidecar_name(c) for c in elected} >= {"csi-provisioner", "csi-resizer",
                                                  "csi-snapshotter"}
    for c in elected:
        assert flag_on(c, "--leader-election"), (c["name"], c["args"])
        assert not any(flag_name(a) == "--node-deployment" for a in c["args"]), c["args"]
    (prov,) = [c for c in elected if sidecar_name(c) == "csi-provisioner"]
    assert flag_on(prov, "--extra-create-metadata"), prov["args"]
    assert not any(flag_name(a) == "--enable-capacity" for a in prov["args"]), prov["args"]
    assert not [c for c in pod_spec(ds)["containers"] if sidecar_name(c) in LEADER_ELECTED]
    verbs = granted_verbs(pod["serviceAccountName"], dep["metadata"]["namespace"], SHARED)
    assert {"get", "create", "update"} <= verbs.get(("coordination.k8s.io", "leases"), set())
    # The node plugins' pods talk to no API server.
    sa = pod_spec(ds)["serviceAccountName"]
    assert not granted_verbs(sa, ds["metadata"]["namespace"], SHARED), sa


def test_shared_storage_class_and_claim():
    """The class binds at once, on a base the policy lists as shared; the CSIDriver asks
    for no attach and publishes no capacity; the example claim is ReadWriteMany."""
    _, shared = bases_of(k8s_policy_text(SHARED))
    classes = by_kind("StorageClass", False, SHARED)
    assert classes
    for sc in classes:
        assert sc["volumeBindingMode"] == "Immediate", sc["metadata"]["name"]
        assert sc["parameters"]["type"] == "directory", sc["metadata"]["name"]
        assert sc["parameters"]["baseDir"] in shared, sc["parameters"]["baseDir"]
    (drv,) = by_kind("CSIDriver", False, SHARED)
    assert drv["spec"]["attachRequired"] is False
    assert drv["spec"]["storageCapacity"] is False
    rwx = [p for p in by_kind("PersistentVolumeClaim", True, SHARED)
           if "ReadWriteMany" in p["spec"]["accessModes"]]
    assert rwx and all(p["spec"]["storageClassName"] in names("StorageClass", False, SHARED)
                       for p in rwx), rwx


# systemd

UNIT = os.path.join(DEPLOY, "systemd", "sepcsi.service")


def unit_directives():
    out = {}
    with open(UNIT) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";", "[")):
                continue
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def test_systemd_unit_verifies():
    exe = shutil.which("systemd-analyze")
    if not exe:
        pytest.skip("systemd-analyze is not installed (package systemd): unit not verified")
    with tempfile.TemporaryDirectory() as tmp:
        with open(UNIT) as f:
            text = f.read()
        # verify checks that ExecStart's program exists: point it at the build's.
        text, n = re.subn(r"^ExecStart=\S+", "ExecStart=" + SUPERVISOR, text, flags=re.M)
        assert n == 1
        copy = os.path.join(tmp, "sepcsi.service")
        with open(copy, "w") as f:
            f.write(text)
        # --man=no: the man page is installed with the program, not here.
        res = subprocess.run([exe, "verify", "--man=no", copy], capture_output=True,
                             text=True)
    # verify only warns about a directive it cannot parse: any output is a failure.
    assert res.returncode == 0 and not res.stdout.strip() and not res.stderr.strip(), \
        res.stdout + res.stderr


def test_systemd_unit_command_line_and_policy():
    d = unit_directives()
    (start,) = d["ExecStart"]
    argv = start.split()
    assert argv[0] in ("/usr/local/sbin/sepcsi-supervisor", "/usr/sbin/sepcsi-supervisor")
    check_command_line(argv[1:])
    assert d["Restart"] == ["on-failure"]
    assert "2" in " ".join(d["RestartPreventExitStatus"]).split()
    assert d["KillMode"] == ["mixed"]
    bad = NAMESPACING_DIRECTIVES & set(d)
    assert not bad, "directives that take the service out of the host's mounts: %s" % bad
    # The bounding set keeps every capability the supervisor keeps for itself and the
    # helper (from its own --print-privileges).
    res = subprocess.run([SUPERVISOR, "--print-privileges", "--log-format", "json"],
                         capture_output=True, text=True, check=True)
    (sup,) = [p for p in json.loads(res.stdout)["processes"]
              if p["name"] == "sepcsi-supervisor"]
    mask = int(sup["cap_bounding"], 16)
    need = {CAP_NAMES[i] for i in range(len(CAP_NAMES)) if mask >> i & 1}
    have = set(" ".join(d["CapabilityBoundingSet"]).split())
    assert need <= have, "missing from CapabilityBoundingSet: %s" % (need - have)


def test_systemd_env_file_names_known_variables():
    _, text = help_flags()
    known = set(re.findall(r"\[\$([A-Z_]+)", text))
    with open(os.path.join(DEPLOY, "systemd", "sepcsi.env")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                var = line.split("=", 1)[0]
                assert var in known, "%s is not a variable sepcsi-supervisor reads" % var


# Nomad (no Nomad in Debian: the job's fields are checked, not run)

NOMAD = os.path.join(DEPLOY, "nomad")


def hcl_block(text, name):
    """The body of the first `name {` block, braces balanced (no HCL parser here)."""
    m = re.search(r"(^|\s)%s\s*(\"[^\"]*\"\s*)?\{" % re.escape(name), text)
    assert m, "no %s block" % name
    depth, i = 1, m.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[m.end():i - 1]


def hcl_attrs(body):
    """Top-level `key = value` lines of a block body (nested blocks skipped)."""
    out, depth = {}, 0
    for line in body.splitlines():
        s = line.split("#", 1)[0].strip()
        if depth == 0:
            m = re.fullmatch(r"([a-z_]+)\s*=\s*(.+)", s)
            if m:
                out[m.group(1)] = m.group(2).strip()
        depth += s.count("{") - s.count("}") + s.count("[") - s.count("]")
    return out


def hcl_string(v):
    assert v.startswith('"') and v.endswith('"'), v
    return v[1:-1]


def nomad_job():
    with open(os.path.join(NOMAD, "sepcsi.nomad.hcl")) as f:
        return f.read()


def test_nomad_job_fields():
    text = nomad_job()
    job = hcl_attrs(hcl_block(text, 'job'))
    assert hcl_string(job["type"]) == "system"
    task = hcl_block(text, "task")
    assert hcl_string(hcl_attrs(task)["driver"]) == "docker"
    plugin = hcl_attrs(hcl_block(text, "csi_plugin"))
    assert hcl_string(plugin["type"]) == "monolith"
    assert hcl_string(plugin["id"])
    mount_dir = hcl_string(plugin["mount_dir"])
    base = hcl_string(plugin["stage_publish_base_dir"])
    assert re.fullmatch(r"[0-9]+[smh]", hcl_string(plugin["health_timeout"]))
    # Nomad refuses the one inside the other (its issue 19440).
    assert not (base + "/").startswith(mount_dir + "/")
    assert not (mount_dir + "/").startswith(base + "/")
    config = hcl_attrs(hcl_block(text, "config"))
    assert config["privileged"] == "true"
    image = hcl_string(config["image"])
    assert pinned(image) and image == "sepcsi:%s" % project_version(), image


def test_nomad_command_line_and_policy():
    text = nomad_job()
    plugin = hcl_attrs(hcl_block(text, "csi_plugin"))
    config = hcl_block(text, "config")
    m = re.search(r"args\s*=\s*\[(.*?)\]", config, re.S)
    args = re.findall(r'"([^"]*)"', m.group(1))
    assert "--endpoint=unix://%s/csi.sock" % hcl_string(plugin["mount_dir"]) in args
    with open(os.path.join(NOMAD, "policy.ini")) as f:
        policy = f.read()
    template = hcl_attrs(hcl_block(text, "template"))
    assert template["data"] == 'file("policy.ini")'
    dest = "/" + hcl_string(template["destination"])
    assert "--policy=%s" % dest in args
    assert int(hcl_string(template["perms"]), 8) & 0o022 == 0
    args = [a.replace("${node.unique.name}", "nomad-client-1") for a in args]
    check_command_line(args, policy)
    load_policy(policy)
    paths = policy_values(policy)["paths"]
    assert paths["allowed_roots"] == [hcl_string(plugin["stage_publish_base_dir"])]
    # Nomad's layout: staging/<namespace>/<volume>/<mode>, per-alloc/<alloc>/<volume>/<mode>.
    assert paths["staging_paths"] == ["staging/*/*/*"]
    assert paths["target_paths"] == ["per-alloc/*/*/*"]


# The container recipe


def test_containerfile_builds_as_the_readme_does():
    with open(os.path.join(DEPLOY, "Containerfile")) as f:
        text = f.read()
    runs = re.findall(r"^RUN (.+)$", text, re.M)
    assert any("tools/deps.sh build" in r and "tools/build.sh build" in r for r in runs), runs
    assert any("deps.sh run" in r for r in runs), runs
    assert not re.search(r"apt-get install", text), "packages are tools/deps.sh's to list"
    copied = re.findall(r"/src/build/bin/(\S+)", text)
    for prog in copied:
        assert os.path.exists(os.path.join(conftest.BIN, prog)), prog
    assert {"sepcsi-supervisor", "sepcsi-rpcd", "sepcsi-mounthelper",
            "sepcsi-runner", "sepcsi-tree-runner", "sepcsi-privileges",
            "sepcsi-metrics-check"} <= set(copied)
    for line in re.findall(r"^FROM (\S+)", text, re.M):
        assert pinned(line.split(" ")[0]) or re.fullmatch(r"debian:[0-9]+", line), line


@pytest.mark.parametrize("kubelet", ["shared", "not-shared", "after-an-earlier-run"])
def test_systemd_unit_command_line_serves(kubelet):
    """The unit's ExecStart, run for real as systemd would start it: the environment
    file's settings (all empty: the built-in defaults), no_new_privs and the unit's
    bounding set (setpriv), the build's supervisor in place of the installed one. The
    default directories are tmpfs mounts in this test's namespace only; one volume goes
    through its life in kubelet's layout, SIGTERM stops it with status 0, and the
    metrics file is where the defaults put it. kubelet's directory is shared (as kubelet
    makes it), or not (the helper binds it onto itself and makes that shared, and the bind
    stays after the driver stops), or carries such a bind from an earlier run already
    (tools/run.sh then tools/test.sh): the same in each."""
    from conftest import kubelet_paths, loops_backed_by, mounts_since, mounts_under
    import csi_client
    import signal
    import time

    d = unit_directives()
    (start,) = d["ExecStart"]
    argv = [SUPERVISOR] + start.split()[1:]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEPCSI_")}
    env.pop("CSI_ENDPOINT", None)
    env.pop("NODE_ID", None)
    with open(os.path.join(DEPLOY, "systemd", "sepcsi.env")) as f:
        for line in f:
            k, eq, v = line.strip().partition("=")
            if eq and not k.startswith("#") and v:
                env[k] = v
    caps = " ".join(d["CapabilityBoundingSet"]).split()
    bounding = "-all," + ",".join("+" + c[len("CAP_"):].lower() for c in caps)
    assert d["NoNewPrivileges"] == ["yes"]
    prefix = ["setpriv", "--no-new-privs", "--bounding-set", bounding]

    mounted, kub = [], "/var/lib/kubelet"
    try:
        if kubelet == "after-an-earlier-run":  # the host's: what an earlier helper left
            os.makedirs(kub, exist_ok=True)
            subprocess.run(["mount", "--bind", kub, kub], check=True)
            subprocess.run(["mount", "--make-shared", kub], check=True)
            mounted.append(kub)
        if kubelet == "not-shared":  # a plain directory on a private mount, as on a host
            subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "sepcsi-unit",
                            "/var/lib"], check=True)
            mounted.append("/var/lib")
            subprocess.run(["mount", "--make-private", "/var/lib"], check=True)
        for path, opts in (("/var/lib/sepcsi", "mode=0755"), ("/run/sepcsi", "mode=0755"),
                           ("/var/lib/kubelet", "mode=0750")):
            os.makedirs(path, exist_ok=True)
            if path == kub and kubelet == "not-shared":
                continue
            subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "sepcsi-unit", path],
                           check=True)
            mounted.append(path)
        if kubelet != "not-shared":
            subprocess.run(["mount", "--make-shared", kub], check=True)
        before = mounts_under(kub)
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen(prefix + argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            endpoint = "unix:///run/sepcsi/csi.sock"
            csi_client.wait_ready(endpoint, 20)
            with csi_client.CsiClient(endpoint) as c:
                assert c.identity("Probe").ready.value
                cap = csi_client.mount_cap("xfs")
                vol = c.controller("CreateVolume", name="pvc-unit", volume_capabilities=[cap],
                                   capacity_range=c.pb.CapacityRange(required_bytes=300 << 20))
                vid = vol.volume.volume_id
                staging, target = kubelet_paths(kub, "pvc-unit", DRIVER)
                c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
                       volume_capability=cap)
                c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
                       target_path=target, volume_capability=cap, readonly=False)
                assert target in mounts_under(kub)
                c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
                c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
                c.controller("DeleteVolume", volume_id=vid)
                helper_bind = [kub] if kubelet == "not-shared" else []
                assert mounts_since(kub, before) == helper_bind
                assert loops_backed_by("/var/lib/sepcsi/data") == []
            deadline = time.monotonic() + 10
            while not os.path.exists("/var/lib/sepcsi/metrics.prom"):
                assert time.monotonic() < deadline, "no metrics file at the default path"
                time.sleep(0.1)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                status = proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                status = proc.wait()
            log.seek(0)
            out = log.read().decode(errors="replace")
        assert status == 0, out
        assert "SIGSYS" not in out, out
        if kubelet == "not-shared":  # the helper's bind stays, shared (docs/operations.md)
            assert mounts_since(kub, before) == [kub]
            with open("/proc/self/mountinfo") as f:
                last = [ln.split() for ln in f if ln.split()[4] == kub][-1]
            assert any(o.startswith("shared:") for o in last[6:last.index("-")]), last
        if os.environ.get("SEPCSI_E2E_SHOW_LOGS"):
            print(out)
    finally:
        for path in reversed(mounted):
            for mp in reversed(mounts_under(path)):
                subprocess.run(["umount", "-l", mp], check=False)
