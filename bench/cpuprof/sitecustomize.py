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
if _OUT and sys.argv and os.path.basename(sys.argv[0]) == "training-operator":
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

    def _write(signum, frame):  # type: ignore[no-untyped-def]
        tmp = f"{_OUT}.tmp"
        with open(tmp, "w") as out:
            out.writelines(f"{stack} {n}\n" for stack, n in _counts.items())
        os.replace(tmp, _OUT)

    signal.signal(signal.SIGPROF, _sample)
    signal.signal(signal.SIGUSR2, _write)
    signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)

    import atexit

    atexit.register(signal.setitimer, signal.ITIMER_PROF, 0, 0)
