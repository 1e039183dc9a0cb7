"""FUSE request counting: a private tracefs instance that counts the kernel's
fuse_request_send events of one FUSE connection, by opcode."""

import os

from .common import log, run


class FuseTrace:
    """Counts FUSE requests of one connection with the fuse_request_send tracepoint
    (a private tracefs instance: nobody else's tracing is touched)."""

    def __init__(self):
        self.inst = None
        self.mounted = None
        self.why = None

    def setup(self):
        base = "/sys/kernel/tracing"
        try:
            if not os.path.isdir(os.path.join(base, "events")):
                r = run(["mount", "-t", "tracefs", "nodev", base], timeout=10, check=False)
                if r.returncode != 0 or not os.path.isdir(os.path.join(base, "events")):
                    raise OSError("tracefs not available at %s" % base)
                self.mounted = base
            if not os.path.isdir(os.path.join(base, "events", "fuse", "fuse_request_send")):
                raise OSError("kernel has no fuse_request_send tracepoint")
            inst = os.path.join(base, "instances", "podfs-bench-%d" % os.getpid())
            os.mkdir(inst)
            self.inst = inst
            self._w("buffer_size_kb", "16384")
        except OSError as e:
            self.why = "FUSE request counting off: %s" % e
            self.close()

    def _w(self, rel, val):
        with open(os.path.join(self.inst, rel), "w") as f:
            f.write(val + "\n")

    def start(self, conn):
        if not self.inst:
            return False
        ev = "events/fuse/fuse_request_send/"
        self._w(ev + "enable", "0")
        self._w(ev + "filter", "connection == %d" % conn)
        self._w("trace", "")
        self._w(ev + "enable", "1")
        return True

    def stop(self):
        """{opcode name: count}, or None if events were lost."""
        self._w("events/fuse/fuse_request_send/enable", "0")
        lost = 0
        for cpu in os.listdir(os.path.join(self.inst, "per_cpu")):
            with open(os.path.join(self.inst, "per_cpu", cpu, "stats")) as f:
                for line in f:
                    if line.startswith("overrun:") or line.startswith("dropped events:"):
                        lost += int(line.split(":")[1])
        counts = {}
        with open(os.path.join(self.inst, "trace")) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                i = line.find(" opcode ")
                if i < 0:
                    continue
                j, k = line.find("(", i), line.find(")", i)
                name = line[j + 1:k].replace("FUSE_", "") if 0 < j < k else line[i + 8:].split()[0]
                counts[name] = counts.get(name, 0) + 1
        self._w("trace", "")
        return None if lost else counts

    def close(self):
        if self.inst:
            try:
                self._w("events/fuse/fuse_request_send/enable", "0")
            except OSError:
                pass
            try:
                os.rmdir(self.inst)
            except OSError as e:
                log("WARNING: cannot remove tracefs instance %s: %s" % (self.inst, e))
            self.inst = None
        if self.mounted:
            run(["umount", self.mounted], timeout=10, check=False)
            self.mounted = None


def fuse_conn(mnt):
    """The FUSE connection number of the mount at mnt (the tracepoint's 'connection')."""
    r = run(["stat", "-c", "%d", mnt], timeout=30)
    return os.minor(int(r.stdout))
