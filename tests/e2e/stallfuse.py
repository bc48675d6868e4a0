"""A FUSE file system whose daemon stops answering, as a tenant's may (a FUSE
sidecar in a pod): what the helper must never wait for."""
import ctypes
import os
import struct
import subprocess
import threading
import time


class StallFuse:
    """A minimal FUSE server on the raw /dev/fuse protocol: one directory "sub" under its
    root, attributes never cached (attr_valid 0), STATFS answered. stall() makes it stop answering
    GETATTR (and LOOKUP: stall(lookups=True), a walk through it to a name inside), as a daemon a tenant runs (a FUSE sidecar) may; close() aborts it.
    With file_size, also a regular file "img" of that many zero bytes (a loop device's
    backing file, whose status the kernel asks of the daemon)."""

    def __init__(self, mountpoint, file_size=0):
        self.mp, self.file_size = mountpoint, file_size
        self.fd = os.open("/dev/fuse", os.O_RDWR)
        libc = ctypes.CDLL(None, use_errno=True)
        opts = "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other" % self.fd
        if libc.mount(b"stallfuse", mountpoint.encode(), b"fuse", 0, opts.encode()) != 0:
            raise OSError(ctypes.get_errno(), "mount fuse")
        self.stalled = threading.Event()
        self.lookups = False  # stall(lookups=True): LOOKUP is held too
        self.held = []
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()
        self.conn = os.minor(os.stat(mountpoint).st_dev)  # answered: INIT, then GETATTR

    def _attr(self, ino, mode):
        now, size = int(time.time()), self.file_size if ino == 3 else 0
        return struct.pack("<QQQQQQIIIIIIIIII", ino, size, (size + 511) // 512, now, now, now,
                           0, 0, 0, mode, 2, 0, 0, 0, 4096, 0)

    def _reply(self, unique, body=b"", err=0):
        try:
            os.write(self.fd, struct.pack("<IiQ", 16 + len(body), -err, unique) + body)
        except OSError:
            pass

    def _serve(self):
        while True:
            try:
                buf = os.read(self.fd, 1 << 20 | 4096)
            except OSError:
                return
            length, op, unique, node = struct.unpack_from("<IIQQ", buf)
            if op in (2, 42):  # FORGET, BATCH_FORGET: no answer
                continue
            if op == 26:  # INIT
                self._reply(unique, struct.pack("<IIIIHHIIHHII24x", 7, 31, 0, 0, 16, 12,
                                                 1 << 17, 1, 0, 0, 0, 0))
            elif op == 3:  # GETATTR
                if self.stalled.is_set():
                    self.held.append(unique)  # never answered while stalled
                    continue
                mode = 0o100600 if node == 3 else 0o40755
                self._reply(unique, struct.pack("<QII", 0, 0, 0) +
                            self._attr(node, mode))
            elif op == 17:  # STATFS (overlayfs asks it of each layer at mount)
                self._reply(unique, struct.pack("<QQQQQIIII24x", 1024, 512, 512, 100, 50,
                                                4096, 255, 4096, 0))
            elif op == 1 and self.stalled.is_set() and self.lookups:  # LOOKUP
                self.held.append(unique)
            elif op == 1:  # LOOKUP
                name = buf[40:length].split(b"\0")[0]
                if node == 1 and name == b"sub":
                    self._reply(unique, struct.pack("<QQQQII", 2, 0, 0, 0, 0, 0) +
                                self._attr(2, 0o40755))
                elif node == 1 and name == b"img" and self.file_size:
                    self._reply(unique, struct.pack("<QQQQII", 3, 0, 0, 0, 0, 0) +
                                self._attr(3, 0o100600))
                else:
                    self._reply(unique, err=2)
            elif op == 14:  # OPEN
                self._reply(unique, struct.pack("<QII", 0, 0, 0))
            elif op == 15:  # READ: zeros up to the file's end
                off, size = struct.unpack_from("<QI", buf, 48)
                self._reply(unique, bytes(max(0, min(size, self.file_size - off))))
            elif op in (18, 25):  # RELEASE, FLUSH
                self._reply(unique)
            else:
                self._reply(unique, err=38)  # ENOSYS

    def stall(self, lookups=False):
        self.lookups = lookups
        self.stalled.set()

    def close(self):
        """Abort the connection (every request still waiting fails), then unmount."""
        ctl = "/sys/fs/fuse/connections"
        if not os.path.exists(os.path.join(ctl, str(self.conn))):
            subprocess.run(["mount", "-t", "fusectl", "fusectl", ctl], check=False)
        try:
            with open(os.path.join(ctl, str(self.conn), "abort"), "w") as f:
                f.write("1")
        except OSError:
            pass
        subprocess.run(["umount", "-l", self.mp], check=False)


def fuse_subpath(root, pod):
    """A FUSE volume of a pod (its daemon the tenant's) with a subPath bind of its
    directory "sub", as kubelet makes one: <pod>/volume-subpaths/v/c/0."""
    vol = os.path.join(root, "pods", pod, "volumes", "kubernetes.io~csi", "fusepv", "mount")
    os.makedirs(vol)
    fs = StallFuse(vol)
    sub = os.path.join(root, "pods", pod, "volume-subpaths", "v", "c", "0")
    os.makedirs(sub)
    subprocess.run(["mount", "--bind", os.path.join(vol, "sub"), sub], check=True)
    return fs, sub


class StalledReadonlyDevice:
    """With it: someone else's read-only loop device (root's losetup) backed by a file of a
    FUSE file system under directory d whose daemon has stopped answering, so that any
    status question to that device waits for good; its path is .dev. Both go at the end."""

    def __init__(self, d):
        self.mp = os.path.join(d, "fuse")
        os.makedirs(self.mp)
        self.fs = StallFuse(self.mp, file_size=1 << 20)
        self.dev = None

    def __enter__(self):
        self.dev = subprocess.run(["losetup", "-r", "-f", "--show",
                                   os.path.join(self.mp, "img")],
                                  capture_output=True, text=True, check=True).stdout.strip()
        self.fs.stall()
        return self

    def __exit__(self, *exc):
        self.fs.close()
        if self.dev:
            subprocess.run(["losetup", "-d", self.dev], check=False)
        return False
