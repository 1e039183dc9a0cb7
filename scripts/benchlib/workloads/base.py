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
