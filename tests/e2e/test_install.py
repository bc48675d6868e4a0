"""`cmake --install` into a temporary prefix, as an operator installs sepcsi: every
file where cmake/install.cmake says (and nothing the tests build), man pages that
groff reads without a warning, and the INSTALLED supervisor, which finds rpcd and
the helper in <prefix>/libexec/sepcsi, carrying one volume through its life under
the installed example policy, in kubelet's layout on a tmpfs at /var/lib/kubelet
(in this test's private mount namespace only).

The install runs with umask 002: the directories it makes must still be 0755, or
the supervisor refuses its children.
"""
import os
import re
import shutil
import stat
import subprocess
import tempfile

import pytest

import csi_client
from conftest import (BUILD, REPO, Driver, kubelet_paths, loops_backed_by, mounts_since,
                      mounts_under, running)
from csi_client import mount_cap

MiB = 1 << 20
KUBELET = "/var/lib/kubelet"  # allowed_roots of the example (built-in) policy
EXAMPLE = "share/doc/sepcsi/examples/policy.ini"

PROGRAMS = {
    "sbin": {"sepcsi-supervisor"},
    "bin": {"sepcsictl", "sepcsi-bench"},
    "libexec/sepcsi": {"sepcsi-rpcd", "sepcsi-mounthelper", "sepcsi-core", "sepcsi-reader",
                       "sepcsi-runner",
                       "sepcsi-tree-runner", "sepcsi-privileges",
                       "sepcsi-metrics-check"},
}
MAN_PAGES = {
    "share/man/man1": {"sepcsictl.1", "sepcsi-bench.1"},
    "share/man/man5": {"sepcsi-policy.5"},
    "share/man/man8": {"sepcsi-supervisor.8"},
}


def install(prefix):
    res = subprocess.run(["sh", "-c", 'umask 002 && exec "$@"', "sh", "cmake", "--install", BUILD,
                          "--prefix", prefix], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def installed():
    """Install into a new root-owned prefix, 0755 (rpcd is executed as the rpcd
    user, who must be able to reach <prefix>/libexec/sepcsi); yield it, then
    remove it."""
    d = tempfile.mkdtemp(prefix="sepcsi-install-")
    try:
        os.chmod(d, 0o755)
        install(d)
        yield d
    finally:
        shutil.rmtree(d)


@pytest.fixture(scope="module")
def prefix():
    yield from installed()


@pytest.fixture
def spare_prefix():
    """An install of its own, for a test that spoils it."""
    yield from installed()


def version():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        return re.search(r"project\(sepcsi VERSION (\S+)", f.read()).group(1)


def test_files_where_they_belong(prefix):
    for d, names in PROGRAMS.items():
        path = os.path.join(prefix, d)
        # Only the driver's programs and tools: no test program, fuzzer or sepcsi-privtables.
        assert set(os.listdir(path)) == names, d
        for n in names:
            st = os.lstat(os.path.join(path, n))
            assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, n
            # The metrics check is execute-only: not dumpable from its exec on.
            assert stat.S_IMODE(st.st_mode) == {"sepcsi-metrics-check": 0o711,
                                                "sepcsi-reader": 0o111}.get(n, 0o755), n
    for d, names in MAN_PAGES.items():
        assert set(os.listdir(os.path.join(prefix, d))) == names, d
    # The directories the supervisor checks (and those leading there) are root's only.
    for d in ("sbin", "libexec", "libexec/sepcsi"):
        st = os.stat(os.path.join(prefix, d))
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o755, d
    docs = sorted(n for n in os.listdir(os.path.join(REPO, "docs")) if n.endswith(".md"))
    docdir = os.path.join(prefix, "share/doc/sepcsi")
    assert docs and sorted(n for n in os.listdir(docdir) if n.endswith(".md")) == docs
    for n in docs:
        with open(os.path.join(REPO, "docs", n), "rb") as a, \
                open(os.path.join(docdir, n), "rb") as b:
            assert a.read() == b.read(), n
    assert os.path.isfile(os.path.join(prefix, EXAMPLE))
    for top, _, files in os.walk(prefix):
        assert not [f for f in files if f.startswith(("test_", "fuzz_", "helper_"))], top


@pytest.mark.skipif(not shutil.which("groff"), reason="groff not installed (groff-base)")
def test_man_pages_read_without_warnings(prefix):
    for d, names in MAN_PAGES.items():
        for n in names:
            page = os.path.join(prefix, d, n)
            res = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page],
                                 capture_output=True, text=True, check=False)
            assert res.returncode == 0 and res.stderr == "", "%s: %s" % (n, res.stderr)
            # The NAME line as man's index (mandb, apropos) reads it.
            with open(page) as f:
                assert "\n.SH NAME\n%s \\- " % n.rsplit(".", 1)[0] in f.read(), n


def policy_keys():
    """(section, key) of every key the policy loader knows (policy/policy_load.c)."""
    with open(os.path.join(REPO, "policy", "policy_load.c")) as f:
        keys = re.findall(r'\[K_\w+\] = \{"(\w+)", "(\w+)"', f.read())
    assert len(keys) >= 14
    return keys


def test_every_policy_key_documented(prefix):
    """sepcsi-policy(5) has a section for each of the loader's sections and an
    entry for each key; the example sets each key (base_dirs, which has no
    default value, commented out)."""
    with open(os.path.join(prefix, "share/man/man5/sepcsi-policy.5")) as f:
        page = f.read()
    with open(os.path.join(prefix, EXAMPLE)) as f:
        example = f.read()
    for section, key in policy_keys():
        assert ".SH SECTION [%s]" % section in page, section
        assert re.search(r"^\.B %s$" % key, page, re.M), key
        assert re.search(r"^\[%s\]$" % section, example, re.M), section
        assert re.search(r"^#?%s = \S" % key, example, re.M), key


def test_installed_tools_run(prefix):
    v = version()
    for prog, d in (("sepcsictl", "bin"), ("sepcsi-bench", "bin"),
                    ("sepcsi-supervisor", "sbin")):
        res = subprocess.run([os.path.join(prefix, d, prog), "--version"],
                             capture_output=True, text=True, check=False)
        assert res.returncode == 0 and res.stdout == "%s %s\n" % (prog, v), res
    res = subprocess.run([os.path.join(prefix, "sbin", "sepcsi-supervisor"), "--help"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "../libexec/sepcsi" in res.stdout


@pytest.fixture
def kubelet_dir():
    """A tmpfs at /var/lib/kubelet, in this namespace only, made shared as kubelet
    makes its directory; unmounted (with whatever a failed test left) after."""
    os.makedirs(KUBELET, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0750", "sepcsi-install", KUBELET],
                   check=True)
    try:
        subprocess.run(["mount", "--make-shared", KUBELET], check=True)
        yield KUBELET
    finally:
        for mp in reversed(mounts_under(KUBELET)):
            subprocess.run(["umount", "-l", mp], check=False)


@pytest.fixture
def installed_driver(prefix, kubelet_dir):
    """The installed supervisor with the installed example policy (the last
    --policy wins over the one Driver writes)."""
    yield from running(Driver(bin_dir=os.path.join(prefix, "sbin"), wait=False,
                              extra_args=["--policy", os.path.join(prefix, EXAMPLE)]))


def test_installed_driver_lifecycle(prefix, installed_driver):
    """The installed supervisor, finding its children in libexec/sepcsi, through
    CreateVolume, NodeStage, NodePublish, NodeUnpublish, NodeUnstage,
    DeleteVolume in kubelet's layout, and a clean stop."""
    d = installed_driver
    before = mounts_under(KUBELET)
    csi_client.wait_ready(d.endpoint, 20)
    d.client = csi_client.CsiClient(d.endpoint)
    libexec = os.path.join(prefix, "libexec", "sepcsi")
    assert "children_found dir=%s" % libexec in d.logs()
    kids = d.children()
    for comm, prog in (("sepcsi-rpcd", "sepcsi-rpcd"), ("sepcsi-mounthel", "sepcsi-mounthelper")):
        assert os.readlink("/proc/%d/exe" % kids[comm]) == os.path.join(libexec, prog)

    c, cap = d.client, mount_cap("ext4")
    vol = c.controller("CreateVolume", name="pvc-install", volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=64 * MiB))
    vid = vol.volume.volume_id
    staging, target = kubelet_paths(KUBELET, "pvc-install")
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
           volume_capability=cap)
    c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
           target_path=target, volume_capability=cap, readonly=False)
    assert target in mounts_under(KUBELET)
    with open(os.path.join(target, "hello.txt"), "w") as f:
        f.write("installed")
    with open(os.path.join(staging, "hello.txt")) as f:
        assert f.read() == "installed"
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=vid)
    assert mounts_since(KUBELET, before) == []
    assert loops_backed_by(d.data) == []
    assert os.listdir(os.path.join(d.data, "images")) == []
    assert d.stop() == 0
    assert "supervisor_exit" in d.logs()


def start_failing(prefix, tmp_path):
    """Run the installed supervisor until it exits (it must, before it
    prepares anything); return (status, output)."""
    res = subprocess.run([os.path.join(prefix, "sbin", "sepcsi-supervisor"),
                          "--endpoint", "unix://%s/sock/csi.sock" % tmp_path,
                          "--state-dir", str(tmp_path / "state"),
                          "--data-dir", str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=20, check=False)
    assert not os.path.exists(tmp_path / "state")
    return res.returncode, res.stdout + res.stderr


def test_installed_children_checked(spare_prefix, tmp_path):
    """libexec/sepcsi gets the checks the supervisor's own directory gets; a
    child beside the supervisor is never paired with one from libexec; with
    neither, the error names both places."""
    libexec = os.path.join(spare_prefix, "libexec", "sepcsi")
    sbin = os.path.join(spare_prefix, "sbin")
    os.chmod(libexec, 0o775)
    rc, out = start_failing(spare_prefix, tmp_path)
    assert rc == 1 and "program directory %s must be owned by root" % libexec in out, out
    os.chmod(libexec, 0o755)

    shutil.copy2(os.path.join(libexec, "sepcsi-rpcd"), os.path.join(sbin, "sepcsi-rpcd"))
    rc, out = start_failing(spare_prefix, tmp_path)
    assert rc == 1 and "program %s/sepcsi-mounthelper" % sbin in out, out
    os.unlink(os.path.join(sbin, "sepcsi-rpcd"))

    shutil.rmtree(libexec)
    rc, out = start_failing(spare_prefix, tmp_path)
    assert rc == 1 and "neither beside this program in %s nor in %s/../libexec/sepcsi" % (
        sbin, sbin) in out, out
