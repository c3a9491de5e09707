"""A small MPI program for the multi-host check: where does each rank run, and do messages
between hosts go over the network?

Rank 0 sends ``argv[1]`` bytes to every other rank; every rank checks what it received.
Rank 0 prints one JSON line: the hostname of every rank, in rank order.
"""

import json
import socket
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
size = int(sys.argv[1])
payload = np.arange(size, dtype=np.uint8) if comm.rank == 0 else np.empty(size, dtype=np.uint8)
for dest in range(1, comm.size):
    if comm.rank == 0:
        comm.Send(payload, dest=dest)
    elif comm.rank == dest:
        comm.Recv(payload, source=0)
        assert np.array_equal(payload, np.arange(size, dtype=np.uint8)), "payload arrived damaged"
hosts = comm.gather(socket.gethostname())
if comm.rank == 0:
    print(json.dumps(hosts))
