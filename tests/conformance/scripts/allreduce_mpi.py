"""An MPIJob's real work: mpirun started this on every worker over SSH; each rank contributes
rank+1 to an allreduce that must give n(n+1)/2 everywhere."""

import socket

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
total = comm.allreduce(rank + 1, op=MPI.SUM)
expected = size * (size + 1) // 2
print(
    f"MPI rank={rank} size={size} host={socket.gethostname()} sum={total} expected={expected}",
    flush=True,
)
if total != expected:
    raise SystemExit(1)
