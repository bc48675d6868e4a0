#!/usr/bin/env python3
"""What runs with privilege, and how much code it is: for each process of the driver,
its capabilities and the lines of C compiled into its binary.

The processes and their capabilities come from `sepcsi-supervisor --print-privileges
--log-format json` (the tables the code installs; the container test checks them against
the running processes), asked twice: for the default policy (no directory volumes: the helper
starts sepcsi-core, which mounts) and with a directory base (the helper mounts itself, and
its tree runner starts too). The code of a binary is read from the build's debug information, never from
folder names: every compile unit linked into it (its own, and each object a static library
gave it) and every project header those units include (the line tables' file lists, and the
headers' own includes), counted once. A line counts when it is neither blank nor comment.

Budgets, in each configuration: the process holding CAP_SYS_ADMIN in its effective set, and
all processes with any effective capability together (the sum of their counts: a file two of
them hold counts in each). With
--check, exits 1 when one is exceeded; without it, says so and exits 0.

A shipped build (tools/build.sh, without -DSEPCSI_TESTS=ON) is what it is meant for: a test
build also holds the test pause points, and says so.

Usage: tools/privsize.py [BUILD_DIR] [--check] [--files]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE_BUDGET = 4500     # the process holding CAP_SYS_ADMIN
CAPABLE_BUDGET = 9000  # every process holding any capability, together
CAP_NAMES = ["chown", "dac_override", "dac_read_search", "fowner", "fsetid", "kill", "setgid",
             "setuid", "setpcap", "linux_immutable", "net_bind_service", "net_broadcast",
             "net_admin", "net_raw", "ipc_lock", "ipc_owner", "sys_module", "sys_rawio",
             "sys_chroot", "sys_ptrace", "sys_pacct", "sys_admin", "sys_boot", "sys_nice",
             "sys_resource", "sys_time", "sys_tty_config", "mknod", "lease", "audit_write",
             "audit_control", "setfcap", "mac_override", "mac_admin", "syslog", "wake_alarm",
             "block_suspend", "audit_read", "perfmon", "bpf", "checkpoint_restore"]
SYS_ADMIN = 21


def caps(mask):
    m = int(mask, 16)
    return [n for i, n in enumerate(CAP_NAMES) if m >> i & 1]


def code_lines(path):
    """Lines neither blank nor comment (no string in this tree holds a comment marker)."""
    with open(path, errors="replace") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return sum(1 for line in text.splitlines() if line.strip())


def dwarf_string(value):
    """The string of a readelf attribute value: '(indirect ...): name' or plain 'name'."""
    value = value.strip()
    m = re.match(r"\((?:indirect|indexed)[^)]*\):\s*(.*)$", value)
    return m.group(1) if m else value


# Processes run from another's binary, under a name of their own.
FORKED_FROM = {"sepcsi-audit": "sepcsi-mounthelper", "sepcsi-flusher": "sepcsi-reader"}


def units(binary):
    """Absolute paths of the compile units linked into binary."""
    out = subprocess.run(["readelf", "--debug-dump=info", "--dwarf-depth=1", binary],
                         capture_output=True, text=True, check=True).stdout
    found, name, comp_dir, in_cu = [], None, None, False

    def flush():
        if in_cu and name:
            found.append(os.path.normpath(os.path.join(comp_dir or "", name)))

    for line in out.splitlines():
        if "DW_TAG_compile_unit" in line:
            flush()
            in_cu, name, comp_dir = True, None, None
        elif "DW_TAG_" in line:
            flush()
            in_cu, name = False, None
        elif in_cu:
            m = re.search(r"DW_AT_(name|comp_dir)\s*:\s*(.*)$", line)
            if m and m.group(1) == "name":
                name = dwarf_string(m.group(2))
            elif m:
                comp_dir = dwarf_string(m.group(2))
    flush()
    return found


def line_table_files(binary):
    """Absolute paths of every file named in binary's line tables."""
    out = subprocess.run(["readelf", "--debug-dump=line", binary],
                         capture_output=True, text=True, check=True).stdout
    files, dirs, section = set(), {}, None
    for line in out.splitlines():
        if "The Directory Table" in line:
            section, dirs = "dirs", {}
            continue
        if "The File Name Table" in line:
            section = "files"
            continue
        if not line.strip() or line.startswith(" Line Number Statements"):
            section = None if not line.strip() and section == "files" else section
            continue
        if section == "dirs":
            m = re.match(r"\s*(\d+)\s+(.*)$", line)
            if m:
                dirs[int(m.group(1))] = dwarf_string(m.group(2))
        elif section == "files":
            m = re.match(r"\s*(\d+)\s+(\d+)\s+(.*)$", line)
            if m:
                name = dwarf_string(m.group(3))
                files.add(os.path.normpath(os.path.join(dirs.get(int(m.group(2)), ""), name)))
    return files


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def project_closure(paths, build):
    """paths under the tree (sources and build's generated files), with every project
    header they include, transitively."""
    inside = lambda p: p.startswith(ROOT + os.sep) and os.path.isfile(p)
    search = sorted({os.path.dirname(p) for p in paths if inside(p)} |
                    {os.path.join(ROOT, d) for d in ("common", "proto", "policy")} |
                    {os.path.join(build, "generated"), os.path.join(build, "common")})
    todo, seen = [p for p in paths if inside(p)], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        with open(p, errors="replace") as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            for d in [os.path.dirname(p)] + search:
                q = os.path.normpath(os.path.join(d, inc))
                if inside(q):
                    todo.append(q)
                    break
    return seen


def processes(build, directories):
    bindir = os.path.join(build, "bin")
    with tempfile.TemporaryDirectory() as base:
        pol = os.path.join(base, "policy.ini")
        with open(pol, "w") as f:
            f.write("[directories]\nbase_dirs = %s\n" % base if directories else "")
        out = subprocess.run([os.path.join(bindir, "sepcsi-supervisor"), "--policy", pol,
                              "--print-privileges", "--log-format", "json"],
                             capture_output=True, text=True, check=True).stdout
    procs = json.loads(out)["processes"]
    for p in procs:
        name = p["name"].split()[0]
        p["binary"] = os.path.join(bindir, FORKED_FROM.get(name, name))
    return procs


def report(build, directories, show_files):
    """One configuration's table and budgets; the budgets it exceeds."""
    rows, capable, core = [], 0, None
    for p in processes(build, directories):
        files = project_closure(units(p["binary"]) + sorted(line_table_files(p["binary"])), build)
        if not any(f.endswith(".c") for f in files):
            sys.exit("privsize: %s has no debug information (build with -g)" % p["binary"])
        lines = sum(code_lines(f) for f in files)
        eff = caps(p["cap_effective"])
        rows.append((p["name"], eff, lines, files))
        if eff:
            capable += lines
        if int(p["cap_effective"], 16) >> SYS_ADMIN & 1:
            core = (p["name"], lines)

    print("== %s" % ("with directory volumes (the helper mounts; no core)" if directories else
                     "without directory volumes (the default: the core mounts)"))
    print("%-22s %7s  %s" % ("process", "lines", "effective capabilities"))
    for name, eff, lines, files in rows:
        print("%-22s %7d  %s" % (name, lines, ", ".join(eff) or "none"))
        if show_files:
            for f in sorted(files):
                print("%30s %5d  %s" % ("", code_lines(f), os.path.relpath(f, ROOT)))
    print("holding CAP_SYS_ADMIN: %s, %d lines (budget %d)" % (core[0], core[1], CORE_BUDGET))
    print("every capable process together: %d lines (budget %d)" %
          (capable, CAPABLE_BUDGET))
    over = [what for what, n, budget in (("CAP_SYS_ADMIN", core[1], CORE_BUDGET),
                                         ("capable", capable, CAPABLE_BUDGET)) if n > budget]
    if over:
        print("over budget: %s" % ", ".join(over))
    return over


def test_build(build):
    """Whether build was configured with -DSEPCSI_TESTS=ON."""
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return any(re.match(r"SEPCSI_TESTS:BOOL=(ON|1|TRUE|YES)$", ln.strip(), re.I)
                       for ln in f)
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--check", action="store_true", help="exit 1 when a budget is exceeded")
    ap.add_argument("--files", action="store_true", help="list each binary's counted files")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if test_build(build):
        print("note: %s is a test build (-DSEPCSI_TESTS=ON): its test pause points are "
              "counted; a shipped build has none (tools/test.sh counts build-ship)" % build)
    over = report(build, False, args.files)
    print()
    over += report(build, True, args.files)
    return 1 if over and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
