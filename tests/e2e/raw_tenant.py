"""A tenant given a raw block volume, as a pod is: root without any capability, holding
only the device node kubelet would hand it. The loop driver lets whoever holds a device
open issue its ioctls without any capability (docs/security.md, "Tenants and their
bytes"); the tests that use it check what such a tenant can reach."""
import subprocess

# The pod's program: the commands it is sent, one per line, on its node.
POD = r"""
import errno, fcntl, os, sys
node, fd = sys.argv[1], -1
for line in sys.stdin:
    cmd = line.split()
    try:
        if cmd[0] == "open":
            fd = os.open(node, os.O_RDWR if cmd[1] == "rw" else os.O_RDONLY)
        elif cmd[0] == "clr":
            fcntl.ioctl(fd, 0x4C01, 0)  # LOOP_CLR_FD
        elif cmd[0] == "rename":
            info = bytearray(fcntl.ioctl(fd, 0x4C05, bytes(232)))  # LOOP_GET_STATUS64
            info[56:120] = cmd[1].encode().ljust(64, b"\0")  # lo_file_name
            fcntl.ioctl(fd, 0x4C04, bytes(info))  # LOOP_SET_STATUS64
        elif cmd[0] == "setfd":  # a backing file of its own, on a device torn down
            backing = os.open(cmd[1], os.O_RDWR)
            try:
                fcntl.ioctl(fd, 0x4C00, backing)  # LOOP_SET_FD
            finally:
                os.close(backing)
        elif cmd[0] == "changefd":  # another backing file, of the same size
            backing = os.open(cmd[1], os.O_RDONLY)
            try:
                fcntl.ioctl(fd, 0x4C06, backing)  # LOOP_CHANGE_FD
            finally:
                os.close(backing)
        elif cmd[0] == "write":
            os.pwrite(fd, b"TENANT-X", 0)
            os.fsync(fd)
        elif cmd[0] == "close":
            os.close(fd)
        elif cmd[0] == "read":  # its node opened again, as a pod may at any time
            fd = os.open(node, os.O_RDONLY)
            line = "data " + os.pread(fd, 8, 0).decode("latin-1")
            os.close(fd)
            print(line, flush=True)
            continue
        print("ok", flush=True)
    except OSError as e:
        print("error " + errno.errorcode.get(e.errno, str(e.errno)), flush=True)
"""


class Pod:
    """The tenant, running POD's commands one at a time: do() answers the last one's
    outcome ("ok", "data <its first 8 bytes>" or "error <errno name>")."""

    def __init__(self, node):
        self.p = subprocess.Popen(["setpriv", "--bounding-set=-all", "--inh-caps=-all",
                                   "--ambient-caps=-all", "/usr/bin/python3", "-c", POD, node],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def do(self, *cmds):
        for c in cmds:
            self.p.stdin.write(c + "\n")
            self.p.stdin.flush()
            out = self.p.stdout.readline().strip()
        return out

    def end(self):
        self.p.kill()
        self.p.wait()
