"""The deployment recipes in deploy/: every Kubernetes manifest parses and its
objects have the fields their kind needs and point at objects that exist; every
flag given to sepcsi-supervisor (DaemonSet, systemd unit, Nomad job) is one its
--help lists, and the whole command line is accepted (--print-privileges parses
and checks every flag and loads the policy, then exits); every image is pinned to
a version; the kustomization lists what is there; the policies load with the
supervisor's own loader; systemd-analyze verifies the unit; the Nomad job has its
csi_plugin block and a policy naming Nomad's directory layout; the container
recipe builds with tools/deps.sh and tools/build.sh. Needs no root and starts no
driver."""
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
SUPERVISOR = os.path.join(conftest.BIN, "sepcsi-supervisor")
DRIVER = "local.sepcsi.io"

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


def manifests(examples=True):
    """{path: [objects]} of every YAML file under deploy/kubernetes."""
    out = {}
    for p in sorted(glob.glob(os.path.join(K8S, "**", "*.yaml"), recursive=True)):
        if not examples and os.sep + "examples" + os.sep in p:
            continue
        out[p] = load_docs(p)
    return out


def objects(examples=True):
    return [(p, o) for p, docs in manifests(examples).items() for o in docs]


def by_kind(kind, examples=True):
    return [o for _, o in objects(examples) if o.get("kind") == kind]


def names(kind, examples=True):
    return {o["metadata"]["name"] for o in by_kind(kind, examples)}


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


def k8s_policy_text():
    cms = [o for o in by_kind("ConfigMap", False) if o["metadata"]["name"] == "sepcsi-policy"]
    assert len(cms) == 1
    return cms[0]["data"]["policy.ini"]


def sepcsi_container():
    (ds,) = by_kind("DaemonSet", False)
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "sepcsi"]
    return ds, c


# Kubernetes


def test_every_manifest_parses_with_required_fields():
    found = manifests()
    assert found, "no manifests under deploy/kubernetes"
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


def test_daemonset():
    (ds,) = by_kind("DaemonSet", False)
    spec = ds["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] in names("ServiceAccount", False)
    vols = check_pod_spec(pod, "DaemonSet")
    for v in vols.values():
        if "configMap" in v:
            assert v["configMap"]["name"] in names("ConfigMap", False), v
            # The supervisor takes a policy file only if nobody but root can write it.
            assert v["configMap"].get("defaultMode", 0o644) & 0o022 == 0, v
    # The registrar registers the socket the driver serves, at kubelet's path for it.
    _, sep = sepcsi_container()
    assert "--endpoint=unix:///csi/csi.sock" in sep["args"]
    (reg,) = [c for c in pod["containers"] if c["name"] == "node-driver-registrar"]
    assert "--kubelet-registration-path=/var/lib/kubelet/plugins/%s/csi.sock" % DRIVER \
        in reg["args"]
    plugin_dir = [v for v in vols.values() if v.get("hostPath", {}).get("path") ==
                  "/var/lib/kubelet/plugins/" + DRIVER]
    assert plugin_dir, "the socket's directory is not kubelet's plugin directory"
    # Mounts made inside the container reach kubelet only through Bidirectional.
    assert any(m["mountPath"] == "/var/lib/kubelet" and
               m.get("mountPropagation") == "Bidirectional" for m in sep["volumeMounts"])
    assert sep["securityContext"]["privileged"] is True
    res = sep["resources"]
    assert res["requests"]["memory"] and res["limits"]["memory"] and res["requests"]["cpu"]
    for c in pod["containers"]:
        side = c["image"].rsplit("/", 1)[-1].split(":")[0]
        for flag in REMOVED_SIDECAR_FLAGS.get(side, []):
            assert not any(flag_name(a) == flag for a in c.get("args", [])), (side, flag)
        if side in SIDECAR_FLAGS:
            unknown = {flag_name(a) for a in c.get("args", [])} - SIDECAR_FLAGS[side]
            assert not unknown, "%s takes no %s" % (side, sorted(unknown))
    # Every sidecar comes from the same registry, pinned to a release (vX.Y.Z), and
    # that release is the one the file's header lists its flags for.
    with open(os.path.join(K8S, "daemonset.yaml")) as f:
        header = "".join(ln for ln in f if ln.startswith("#"))
    for c in pod["containers"]:
        if c["name"] == "sepcsi":
            continue
        repo, _, tag = c["image"].rpartition(":")
        assert repo.startswith("registry.k8s.io/sig-storage/"), c["image"]
        assert re.fullmatch(r"v[0-9]+\.[0-9]+\.[0-9]+", tag), c["image"]
        assert re.search(r"\s%s\s" % re.escape(tag), header), \
            "%s: release %s is not in daemonset.yaml's header" % (c["name"], tag)


def test_sepcsi_flags_exist_and_the_command_line_loads():
    _, c = sepcsi_container()
    args = [a.replace("$(NODE_NAME)", "node-1") for a in c["args"]]
    policy_mount = [m for m in c["volumeMounts"] if m["name"] == "policy"]
    assert policy_mount, "the policy ConfigMap is not mounted"
    policy_args = [a for a in args if flag_name(a) == "--policy"]
    assert policy_args == ["--policy=%s/policy.ini" % policy_mount[0]["mountPath"]]
    check_command_line(args, k8s_policy_text())


def test_images_pinned_to_the_release():
    version = project_version()
    _, c = sepcsi_container()
    assert c["image"] == "sepcsi:%s" % version, (c["image"], version)
    (kust,) = load_docs(os.path.join(K8S, "kustomization.yaml"))
    for img in kust.get("images", []):
        assert img.get("newTag") not in (None, "", "latest"), img
        if img["name"] == "sepcsi":
            assert img["newTag"] == version, (img, version)
    for path, o in objects():
        for s in (o.get("spec", {}).get("template", {}).get("spec"), o.get("spec")):
            for c in (s or {}).get("containers", []) if isinstance(s, dict) else []:
                assert pinned(c["image"]), (path, c["image"])


def test_kustomization_lists_what_is_there():
    (kust,) = load_docs(os.path.join(K8S, "kustomization.yaml"))
    assert kust["kind"] == "Kustomization"
    listed = kust["resources"]
    assert len(set(listed)) == len(listed)
    for r in listed:
        assert os.path.isfile(os.path.join(K8S, r)), "kustomization lists missing %s" % r
        assert not r.startswith("examples"), "examples are not part of the set: %s" % r
    present = {os.path.relpath(p, K8S) for p in manifests(examples=False)} - \
        {"kustomization.yaml"}
    assert present == set(listed), "not listed: %s; listed, absent: %s" % (
        present - set(listed), set(listed) - present)


def test_k8s_policy_loads():
    text = k8s_policy_text()
    load_policy(text)
    pol = policy_values(text)
    _, c = sepcsi_container()
    data = [a.split("=", 1)[1] for a in c["args"] if flag_name(a) == "--data-dir"][0]
    for base in pol.get("directories", {}).get("base_dirs", []):
        assert not (base + "/").startswith(data + "/") and not (data + "/").startswith(
            base + "/"), "base dir %s overlaps the data directory %s" % (base, data)
        (sepdir,) = [m for m in c["volumeMounts"] if m["name"] == "sepcsi-dir"]
        assert base.startswith(sepdir["mountPath"] + "/"), "%s is not on a host path" % base


def test_storage_classes():
    policy = policy_values(k8s_policy_text())
    bases = policy.get("directories", {}).get("base_dirs", [])
    assert names("CSIDriver", False) == {DRIVER}
    classes = by_kind("StorageClass", False)
    kinds = set()
    for sc in classes:
        assert sc["provisioner"] == DRIVER, sc["metadata"]["name"]
        assert sc.get("volumeBindingMode") == "WaitForFirstConsumer", sc["metadata"]["name"]
        params = sc.get("parameters", {}) or {}
        for k, v in params.items():
            assert isinstance(v, str), (sc["metadata"]["name"], k)
            assert k in SC_PARAMS or k.startswith("csi.storage.k8s.io/"), \
                "%s: unknown parameter %s" % (sc["metadata"]["name"], k)
        fs = params.get("csi.storage.k8s.io/fstype", params.get("fsType", ""))
        if params.get("type") == "directory":
            assert params["baseDir"] in bases, "baseDir %s is not in the policy" % (
                params["baseDir"])
            assert not fs and "mkfsOptions" not in params, sc["metadata"]["name"]
            kinds.add("directory")
        else:
            assert not DIR_ONLY_PARAMS & set(params), sc["metadata"]["name"]
            assert fs in ("", "ext4", "xfs", "btrfs"), sc["metadata"]["name"]
            kinds.add(fs or "block")
    assert {"ext4", "xfs", "block", "directory"} <= kinds, kinds


def test_snapshot_and_attribute_classes():
    for kind in ("VolumeSnapshotClass", "VolumeGroupSnapshotClass"):
        (c,) = by_kind(kind, False)
        assert c["driver"] == DRIVER and c["deletionPolicy"] in ("Delete", "Retain"), c
    (g,) = by_kind("VolumeGroupSnapshotClass", False)
    assert g["apiVersion"].startswith("groupsnapshot.storage.k8s.io/"), g["apiVersion"]
    (vac,) = by_kind("VolumeAttributesClass")
    assert vac["driverName"] == DRIVER
    assert vac["apiVersion"] == "storage.k8s.io/v1"
    assert set(vac["parameters"]) <= MUTABLE_PARAMS and vac["parameters"], vac


def test_rbac_binds_what_exists():
    for b in by_kind("ClusterRoleBinding", False):
        assert b["roleRef"]["name"] in names("ClusterRole", False), b
        for s in b["subjects"]:
            if s["kind"] == "ServiceAccount":
                assert s["name"] in names("ServiceAccount", False), s
    rules = [r for role in by_kind("ClusterRole", False) for r in role["rules"]]
    granted = {(g, res) for r in rules for g in r["apiGroups"] for res in r["resources"]}
    # What the current sidecars read: group snapshots moved to their own API group,
    # VolumeAttributesClass is storage.k8s.io/v1.
    for need in [("groupsnapshot.storage.k8s.io", "volumegroupsnapshotcontents"),
                 ("groupsnapshot.storage.k8s.io", "volumegroupsnapshotclasses"),
                 ("storage.k8s.io", "volumeattributesclasses"),
                 ("storage.k8s.io", "csistoragecapacities"),
                 ("snapshot.storage.k8s.io", "volumesnapshotcontents"),
                 ("", "persistentvolumes"), ("", "persistentvolumeclaims")]:
        assert need in granted, need


def granted_verbs(service_account, namespace):
    """{(apiGroup, resource): verbs} the ClusterRoleBindings give a ServiceAccount."""
    roles = {r["metadata"]["name"]: r for r in by_kind("ClusterRole", False)}
    out = {}
    for b in by_kind("ClusterRoleBinding", False):
        if not any(s["kind"] == "ServiceAccount" and s["name"] == service_account and
                   s.get("namespace") == namespace for s in b["subjects"]):
            continue
        for r in roles[b["roleRef"]["name"]]["rules"]:
            for g in r["apiGroups"]:
                for res in r["resources"]:
                    out.setdefault((g, res), set()).update(r["verbs"])
    return out


def snapmeta_container():
    ds, _ = sepcsi_container()
    (c,) = [c for c in ds["spec"]["template"]["spec"]["containers"]
            if c["image"].rsplit(":", 1)[0] == SNAPMETA_IMAGE]
    return ds, c


def arg_value(c, flag):
    vals = [a.split("=", 1)[1] for a in c.get("args", []) if flag_name(a) == flag]
    assert len(vals) == 1, "%s: %s given %d times" % (c["name"], flag, len(vals))
    return vals[0]


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

    def volume_of(ctr, path):
        ms = [m for m in ctr["volumeMounts"] if (path + "/").startswith(m["mountPath"] + "/")]
        assert ms, "%s: nothing mounted at %s" % (ctr["name"], path)
        m = max(ms, key=lambda m: len(m["mountPath"]))
        return m["name"], os.path.relpath(path, m["mountPath"])
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


def test_examples_refer_to_what_exists():
    pvcs = {o["metadata"]["name"]: o for o in by_kind("PersistentVolumeClaim")}
    assert pvcs, "no example claim"
    for pvc in pvcs.values():
        assert pvc["spec"]["storageClassName"] in names("StorageClass"), pvc
        vac = pvc["spec"].get("volumeAttributesClassName")
        assert vac is None or vac in names("VolumeAttributesClass"), vac
        src = pvc["spec"].get("dataSource")
        if src:
            assert src["kind"] == "VolumeSnapshot" and src["name"] in names("VolumeSnapshot")
    for snap in by_kind("VolumeSnapshot"):
        assert snap["spec"]["volumeSnapshotClassName"] in names("VolumeSnapshotClass")
        assert snap["spec"]["source"]["persistentVolumeClaimName"] in pvcs
    pods = by_kind("Pod")
    assert pods
    for pod in pods:
        vols = check_pod_spec(pod["spec"], "Pod " + pod["metadata"]["name"])
        for v in vols.values():
            if "persistentVolumeClaim" in v:
                assert v["persistentVolumeClaim"]["claimName"] in pvcs, v


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
