"""What every workload family takes from the run: its options, scratch dir,
targets, results and FUSE request tracer."""

from ..spec import rtt_suffix


class Workload:
    """A workload family of one run; each of its workloads is a method fn(t, rnd)
    that measures target t in round rnd and records its rows in self.results."""

    def __init__(self, bench):
        self.a = bench.a
        self.scratch = bench.scratch
        self.targets = bench.targets
        self.results = bench.results
        self.trace = bench.trace
        self.rtt_sfx = rtt_suffix(self.a.rtt_us)

    @staticmethod
    def add_counts(x, tracing, counts, before=None, after=None):
        """Puts the FUSE requests counted by the tracer (None: its buffer
        overran) and, for podfs, the requests sent to podfsd between two
        readings of its stats into the extras x of one run."""
        if tracing:
            x["requests"] = None if counts is None else sum(counts.values())
            if counts:
                x["ops"] = counts
        if before is not None and after is not None:
            ops = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}
            x["wire_requests"] = sum(ops.values())
            x["wire_ops"] = ops
        return x
