"""What the machine's capability bounding set allows every process here."""

CAP_SYS_RESOURCE = 24


def bounding_has(cap_bit):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapBnd:"):
                return bool(int(line.split()[1], 16) & (1 << cap_bit))
    return False
