"""The privilege split, read from /proc/<pid>/status of the running children."""
import json
import os
import re
import subprocess

from conftest import proc_status as status


def test_rpcd_unprivileged(driver):
    driver.client.identity("Probe")  # serving
    s = status(driver.children()["sepcsi-rpcd"])
    uids = [int(x) for x in s["Uid"].split()]
    gids = [int(x) for x in s["Gid"].split()]
    assert all(u != 0 for u in uids), s["Uid"]
    assert all(g != 0 for g in gids), s["Gid"]
    assert s["Groups"] == ""
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(s[k], 16) == 0, (k, s[k])
    assert s["NoNewPrivs"] == "1"
    assert s["Seccomp"] == "2"


def test_helper_confined(driver):
    """Without directory volumes the helper holds no capability at all (its core opens every
    loop device and lists every mount for it), and its child sepcsi-core holds what mounting
    needs: SYS_ADMIN (mounts, freeze, xfs/btrfs grow), CHOWN (volume mount group), MKNOD (its
    own loop nodes), and SYS_RESOURCE (ext4 online expand) only if the supervisor's bounding
    set passes it on (from its compiled policy, written from policy/caps.c's table)."""
    driver.client.identity("Probe")
    helper = driver.children()["sepcsi-mounthel"]
    core = [pid for pid in helper_children(helper) if comm(pid) == "sepcsi-core"]
    assert len(core) == 1, helper_children(helper)  # confined: the helper is ready after it
    CAP_CHOWN = 1 << 0
    CAP_SYS_ADMIN = 1 << 21
    CAP_SYS_RESOURCE = 1 << 24
    CAP_MKNOD = 1 << 27
    sup = status(driver.sup_pid())
    for pid, want in ((helper, 0),
                      (core[0], CAP_SYS_ADMIN | CAP_CHOWN | CAP_MKNOD |
                       (int(sup["CapBnd"], 16) & CAP_SYS_RESOURCE))):
        s = status(pid)
        assert int(s["CapEff"], 16) == want, s["CapEff"]
        assert int(s["CapPrm"], 16) == want, s["CapPrm"]
        assert int(s["CapBnd"], 16) == want, s["CapBnd"]
        assert int(s["CapInh"], 16) == 0
        assert int(s["CapAmb"], 16) == 0
        assert s["NoNewPrivs"] == "1"
        assert s["Seccomp"] == "2"


def comm(pid):
    with open("/proc/%d/comm" % pid) as f:
        return f.read().strip()


def test_rpcd_has_no_route_to_privilege(driver):
    """rpcd holds only its sockets, its store and ordinary files: no device nodes."""
    pid = driver.children()["sepcsi-rpcd"]
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except FileNotFoundError:
            continue  # closed since the listing (gRPC opens and closes sockets)
        assert not target.startswith("/dev/loop"), target


def printed_privileges(driver):
    """`sepcsi-supervisor --print-privileges` for this driver's options, as JSON."""
    res = subprocess.run(driver.args + ["--print-privileges", "--log-format", "json"],
                         capture_output=True, text=True, check=True, timeout=30)
    return {p["name"]: p for p in json.loads(res.stdout)["processes"]}


def helper_children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def test_running_processes_match_print_privileges(driver):
    """What --print-privileges says (from the tables the code installs) is what the
    kernel reports for the three running processes and the helper's tool runner:
    ids, capability sets, no_new_privs, seccomp mode, and the file-system view."""
    driver.client.identity("Probe")
    printed = printed_privileges(driver)
    helper = driver.children()["sepcsi-mounthel"]
    # Beside its core and runner, idle workers (rpcd's first LIST of mounts ran in one).
    kids = {comm(pid): pid for pid in helper_children(helper) if comm(pid) != "sepcsi-mounthel"}
    assert sorted(kids) == ["sepcsi-audit", "sepcsi-core", "sepcsi-runner"], kids
    # The core's reader and flusher are the core's children, started beside it.
    core_kids = {comm(pid): pid for pid in helper_children(kids["sepcsi-core"])}
    assert sorted(core_kids) == ["sepcsi-flusher", "sepcsi-reader"], core_kids
    pids = {"sepcsi-supervisor": driver.sup_pid(), "sepcsi-rpcd": driver.children()["sepcsi-rpcd"],
            "sepcsi-mounthelper": helper, **core_kids, **kids}
    # The metrics check lives for one report only: test_metrics.py looks at it as it runs.
    assert set(pids) == set(printed) - {"sepcsi-metrics-check"}
    host_root = os.stat("/")
    for name, pid in pids.items():
        p, s = printed[name], status(pid)
        assert [int(x) for x in s["Uid"].split()] == [p["uid"]] * 3 + [p["fsuid"]], (
            name, s["Uid"])
        assert [int(x) for x in s["Gid"].split()] == [p["gid"]] * 3 + [p["fsgid"]], (
            name, s["Gid"])
        # An optional capability (CAP_SYS_RESOURCE) is counted only where this machine has it.
        assert s["CapEff"] == p["cap_effective"], (name, s["CapEff"])
        assert s["CapPrm"] == p["cap_permitted"], (name, s["CapPrm"])
        assert s["CapBnd"] == p["cap_bounding"], (name, s["CapBnd"])
        assert s["CapInh"] == s["CapAmb"] == p["cap_ambient"], (name, s["CapAmb"])
        assert s["NoNewPrivs"] == str(p["no_new_privs"]), name
        assert s["Seccomp"] == str(p["seccomp"]), name
        root = "/proc/%d/root" % pid
        if p["view"] == "host":
            st = os.stat(root + "/")
            assert (st.st_dev, st.st_ino) == (host_root.st_dev, host_root.st_ino), name
            continue
        # Its own view: the printed paths (and the directories leading to them).
        view = p["view"]
        tops = {v.strip("/").split("/")[0] for v in view if v != "/"}
        # They see the data directory (the audit writer, the helper's view).
        mounters = ("sepcsi-mounthelper", "sepcsi-core", "sepcsi-reader", "sepcsi-flusher",
                    "sepcsi-audit")
        if name in mounters:  # (and the empty mount points of what the helper detached)
            seen = {d for d in os.listdir(root) if d in tops or os.listdir(root + "/" + d)}
            assert seen == tops, (name, sorted(os.listdir(root)), sorted(tops))
        etc = {v.split("/")[2] for v in view if v.startswith("/etc/")}
        assert set(os.listdir(root + "/etc")) == etc, name
        devs = {v.split("/")[2] for v in view if v.startswith("/dev/")}
        dev = set(os.listdir(root + "/dev"))
        assert devs <= dev and all(d in devs or (name in mounters and
                                                re.fullmatch(r"loop\d+", d)) for d in dev), dev
        for secret in ("/etc/shadow", "/etc/passwd", "/root", "/home", "/var/lib/sepcsi/state",
                       driver.state):
            assert not os.path.exists(root + secret), (name, secret)
        # The data directory: the helper's; the tool runner has its mount point only, empty,
        # and reaches an image only through the descriptor a job carries.
        assert bool(os.listdir(root + driver.data)) == (name in mounters), name
        roots = [v for v in view if v == driver.root]
        # kubelet's tree: the core's alone, and its reader's and flusher's, in its view
        assert bool(roots) == (name in ("sepcsi-core", "sepcsi-reader", "sepcsi-flusher"))
        # Its mounts: the view's, and (the core's) whatever lies beneath the allowed roots.
        with open("/proc/%d/mountinfo" % pid) as f:
            points = [ln.split()[4] for ln in f]
        for mp in points:  # the tool runner's /dev is a tmpfs of its own, with null only
            assert mp in view or any(mp.startswith(r + "/") for r in roots) or (
                mp == "/dev" and name == "sepcsi-runner"), (name, mp)
        if name in ("sepcsi-reader", "sepcsi-flusher"):  # the core's view: the core's mounts
            assert os.readlink("/proc/%d/ns/mnt" % pid) == os.readlink(
                "/proc/%d/ns/mnt" % kids["sepcsi-core"])
        assert set(view) - {"/dev/null", "/dev/loop-control"} - \
            {v for v in view if v.startswith("/etc/") or v in ("/bin", "/sbin", "/lib",
                                                             "/lib32", "/lib64", "/libx32")} \
            <= set(points), (name, sorted(points))


def printed_processes(policy_text):
    """--print-privileges --log-format json for a policy, as a list of processes."""
    import tempfile
    from conftest import BIN
    with tempfile.TemporaryDirectory() as d:
        pol = os.path.join(d, "policy.ini")
        with open(pol, "w") as f:
            f.write(policy_text % {"dir": d})
        out = subprocess.run([os.path.join(BIN, "sepcsi-supervisor"), "--policy", pol,
                              "--print-privileges", "--log-format", "json"],
                             capture_output=True, text=True, check=True).stdout
    return json.loads(out)["processes"]


def linked(binary):
    """The shared libraries binary needs, and every symbol it defines or uses."""
    dyn = subprocess.run(["readelf", "-d", "-W", binary], capture_output=True, text=True,
                         check=True).stdout
    syms = subprocess.run(["nm", "-a", binary], capture_output=True, text=True,
                          check=True).stdout
    syms += subprocess.run(["nm", "-D", binary], capture_output=True, text=True,
                           check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn), \
        {ln.split()[-1] for ln in syms.splitlines() if ln.split()}


def test_no_capable_process_parses_image_content():
    """Bytes a tenant wrote (superblocks, partition tables) are parsed only by the tools
    runner, which holds no capability: no binary of a process holding any capability (in
    its effective, permitted, bounding or ambient set; with directory volumes on, so that
    the tree runner is one) links libblkid or holds the ext4 superblock reader. The tools
    runner does, so the check reads the right things."""
    from conftest import BIN
    procs = printed_processes("[directories]\nbase_dirs = %(dir)s\n")
    names = {p["name"] for p in procs}
    assert {"sepcsi-mounthelper", "sepcsi-runner", "sepcsi-tree-runner"} <= names, names
    parsers = re.compile(r"^(blkid_|rn_ext4_sb|rn_signature)")
    for p in procs:
        libs, syms = linked(os.path.join(BIN, p["name"]))
        capable = any(int(p[k], 16) for k in ("cap_effective", "cap_permitted",
                                              "cap_bounding", "cap_ambient"))
        parses = [lib for lib in libs if lib.startswith("libblkid")] + \
            sorted(s for s in syms if parsers.match(s))
        if capable:
            assert not parses, (p["name"], parses)
        if p["name"] == "sepcsi-runner":
            assert not capable, p
            assert any(lib.startswith("libblkid") for lib in libs), libs
            assert "rn_ext4_sb_blocks" in syms and "rn_signature" in syms


def test_privsize_counts_each_binary_from_its_debug_information():
    """tools/privsize.py reads what is compiled into each binary: the helper's count has
    its own units and not the runners', the tools runner's has the signature probe, the
    tree runner's has neither the probe nor the tools' filter, and each capable process
    is counted against the budgets."""
    from conftest import BUILD
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(["/usr/bin/python3", os.path.join(root, "tools", "privsize.py"),
                          BUILD, "--files"], capture_output=True, text=True, check=True).stdout
    blocks, current = {}, None
    for line in out.splitlines():
        m = re.match(r"^(sepcsi-\S+)\s+(\d+)\s+(.*)$", line)
        if m:
            current = m.group(1)
            blocks[current] = (int(m.group(2)), m.group(3), set())
        elif current and re.match(r"^\s+\d+\s+\S+$", line):
            blocks[current][2].add(line.split()[-1])
    helper, runner, tree = (blocks[n][2] for n in ("sepcsi-mounthelper", "sepcsi-runner",
                                                   "sepcsi-tree-runner"))
    assert "mounthelper/mh_ops.c" in helper and "runner/signature.c" not in helper
    assert "runner/signature.c" in runner and "runner/tree.c" not in runner
    assert "runner/tree.c" in tree and "runner/signature.c" not in tree
    assert "policy/seccomp_tools.c" not in tree and "policy/seccomp_tree.c" in tree
    assert "sys_admin" in blocks["sepcsi-mounthelper"][1]
    for name, (lines, _, files) in blocks.items():
        assert lines > 0 and files, name
    assert re.search(r"^holding CAP_SYS_ADMIN: sepcsi-mounthelper, \d+ lines", out, re.M)
    assert re.search(r"^holding CAP_SYS_ADMIN: sepcsi-core, \d+ lines", out, re.M)
    assert re.search(r"^every capable process together: \d+ lines", out, re.M)


def test_supervisor_links_no_printer_nor_other_tables():
    """The supervisor holds capabilities, so it links only what it runs: --print-privileges
    is printed by sepcsi-privileges, which it execs with its own arguments; its binary has
    no printer, no process's seccomp table and no policy parser, and the flag still prints
    every process (and refuses a bad option as the supervisor does)."""
    from conftest import BIN
    _, syms = linked(os.path.join(BIN, "sepcsi-supervisor"))
    for name in ("sup_print_privileges", "pol_seccomp_print", "pol_sc_helper", "pol_sc_rpcd",
                 "pol_sc_tools", "pol_sc_tree", "pol_load", "pol_md_row"):
        assert name not in syms, name
    _, syms = linked(os.path.join(BIN, "sepcsi-privileges"))
    assert "sup_print_privileges" in syms and "pol_sc_helper" in syms
    names = [p["name"] for p in printed_processes("[directories]\nbase_dirs = %(dir)s\n")]
    assert names == ["sepcsi-supervisor", "sepcsi-rpcd", "sepcsi-metrics-check",
                     "sepcsi-mounthelper", "sepcsi-runner", "sepcsi-tree-runner"], names
    bad = subprocess.run([os.path.join(BIN, "sepcsi-supervisor"), "--print-privileges",
                          "--no-such-flag"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "sepcsi-supervisor: unknown option" in bad.stderr, bad


def test_the_core_links_no_parser_no_printer_no_other_filter():
    """sepcsi-core, the capable half of the split helper, parses no byte a tenant wrote
    (no libblkid, no superblock reader), no policy file (it reads the compiled form: no
    inih, no pol_load), prints no table and holds no worker, runner or image-copy code;
    its confinement comes compiled with its policy, so it links no capability table, no
    seccomp table (its own either) and calls nothing of libseccomp (which a sanitizer
    build still names as needed), and decodes no message type but its own; privsize
    counts it from its own units."""
    from conftest import BIN, BUILD
    libs, syms = linked(os.path.join(BIN, "sepcsi-core"))
    assert not [lib for lib in libs if lib.startswith(("libblkid", "libinih"))], libs
    banned = re.compile(r"^(blkid_|rn_ext4_sb|rn_signature|ini_parse|pol_load$|pol_md_|"
                        r"pol_seccomp_print|pol_seccomp_install|pol_sc_[a-z]+$|"
                        r"seccomp_(init|rule_add)$|"
                        r"pol_caps_helper_table|pol_caps_tree_table|mh_view_enter|"
                        r"mh_worker|mh_tools_|mh_mkfs|mh_space_|mh_image_create|mh_tree_)")
    assert not sorted(s for s in syms if banned.match(s))
    assert "pol_load_compiled" in syms and "pol_seccomp_load" in syms
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run(["/usr/bin/python3", os.path.join(root, "tools", "privsize.py"),
                          BUILD, "--files"], capture_output=True, text=True, check=True).stdout
    block = re.split(r"\n(?:sepcsi-|holding)", out.split("\nsepcsi-core ", 1)[1], 1)[0]
    assert "mounthelper/core/core_main.c" in block and "policy/compiled.c" in block
    for unit in ("policy/policy_load.c", "mounthelper/mh_worker.c", "mounthelper/mh_tools.c",
                 "common/units.c", "policy/seccomp_helper.c", "policy/md.c",
                 "policy/seccomp_core.c", "policy/seccomp.c", "policy/caps.c",
                 "mounthelper/mh_view.c", "mounthelper/mh_view.h", "policy/view.c",
                 "proto/mh_proto_all.h",
                 "proto/mh_msg_all.c", "common/supctl.h", "common/supctl.c"):
        assert unit not in block, unit
    # Its messages hold its own payloads alone: no other type's codec, and not even the
    # shape of another payload in its debug information.
    assert "mh_codecs_core" in syms
    assert not {"mh_codecs_all", "mh_codecs_reader", "mh_msg_decode", "mh_ops_refuse"} & set(syms)
    info = subprocess.run(["readelf", "--debug-dump=info", os.path.join(BIN, "sepcsi-core")],
                          capture_output=True, text=True, check=True).stdout
    types = set(re.findall(r"DW_AT_name\s*:\s*(?:\([^)]*\):\s*)?(mh_(?:req|ans)_\w+|mh_ranges)\b",
                           info))
    assert "mh_req_stage" in types and "mh_ans_error" in types, types
    for other in ("mh_req_create", "mh_req_dir", "mh_req_group", "mh_ans_blocks", "mh_ranges",
                  "mh_ans_stats", "mh_req_list", "mh_ans_capacity"):
        assert other not in types, other
