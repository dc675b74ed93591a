"""``BENCH_CPUPROF=1``: a CPU-time sampler inside our operator, for ``bench/suite.py``.

py-spy samples by wall clock: on this 2-core machine the API server, etcd and kwok take turns
with the operator, and a sample taken while the operator waits for a core counts as work of
whatever it was about to run. This sampler ticks on the process's own CPU time
(``ITIMER_PROF``, the kernel's 4 ms tick here) and records the Python stack of the main thread,
so each sample is 4 ms the operator really spent. Time in C code (orjson, OpenSSL, pydantic's
core, the garbage collector) lands on the Python frame that called it. ``SIGUSR2`` writes the
counts so far, as collapsed stacks, to ``$JOBCONTROLLER_CPUPROF_OUT``; the suite asks at
submission and at the end and keeps the difference (``<scenario>.cpuprof.txt``).
"""

import os
import sys

_OUT = os.environ.get("JOBCONTROLLER_CPUPROF_OUT")
if _OUT and sys.argv and os.path.basename(sys.argv[0]).endswith("-operator"):
    import collections
    import signal

    _counts: collections.Counter[str] = collections.Counter()

    def _frame(f):  # type: ignore[no-untyped-def]
        code = f.f_code
        where = "/".join(code.co_filename.split("/")[-2:])
        return f"{code.co_qualname} ({where}:{code.co_firstlineno})"

    def _sample(signum, frame):  # type: ignore[no-untyped-def]
        stack = []
        while frame is not None:
            stack.append(_frame(frame))
            frame = frame.f_back
        _counts[";".join(reversed(stack))] += 1

    # The garbage collector's CPU time by generation: a sample taken during a collection is
    # handled after it, on whatever frame allocated, so the stacks alone cannot show it.
    import gc
    import time

    _gc_cpu = [0.0, 0.0, 0.0]
    _gc_runs = [0, 0, 0]
    _gc_started = [0.0]

    def _gc(phase, info):  # type: ignore[no-untyped-def]
        if phase == "start":
            _gc_started[0] = time.process_time()
        else:
            _gc_cpu[info["generation"]] += time.process_time() - _gc_started[0]
            _gc_runs[info["generation"]] += 1

    gc.callbacks.append(_gc)

    def _write(signum, frame):  # type: ignore[no-untyped-def]
        tmp = f"{_OUT}.tmp"
        with open(tmp, "w") as out:
            out.writelines(f"{stack} {n}\n" for stack, n in list(_counts.items()))
            # Pseudo-stacks in 4 ms ticks, so the GC shows beside the samples it hides in.
            for gen in range(3):
                ticks = round(_gc_cpu[gen] / 0.004)
                out.write(f"<gc generation {gen}, {_gc_runs[gen]} runs> {ticks}\n")
        os.replace(tmp, _OUT)

    signal.signal(signal.SIGPROF, _sample)
    signal.signal(signal.SIGUSR2, _write)
    signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)

    import atexit

    atexit.register(signal.setitimer, signal.ITIMER_PROF, 0, 0)
