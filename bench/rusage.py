#!/usr/bin/env python3
"""Runs a command and prints one line of what it cost the machine: wall, user and system CPU seconds, minor and major
page faults, voluntary and involuntary context switches (getrusage of the child), labelled with LABEL and, under
mpirun/srun, the launcher's rank. Where a step's time goes when it runs slower under a launcher than alone: user time
up with the same work is the ops themselves slower (caches, memory, a shared core), system time or faults up is the
kernel's (mapping and faulting in memory), involuntary switches up is a core shared with another process.

  bench/rusage.py LABEL COMMAND [ARGS...]
"""
import os
import resource
import subprocess
import sys
import time


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(sys.argv) < 3:
        print("usage: bench/rusage.py LABEL COMMAND [ARGS...]", file=sys.stderr)
        return 2
    label, cmd = sys.argv[1], sys.argv[2:]
    rank = next((os.environ[k] for k in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID") if k in os.environ), "-")
    t0 = time.monotonic()
    try:
        rc = subprocess.call(cmd)
    except OSError as e:
        print(f"rusage.py: {cmd[0]}: {e.strerror}", file=sys.stderr)
        return 2
    wall = time.monotonic() - t0
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{label} rank {rank}: wall {wall:.2f} s, user {r.ru_utime:.2f} s, sys {r.ru_stime:.2f} s, "
          f"faults {r.ru_minflt} minor / {r.ru_majflt} major, switches {r.ru_nvcsw} voluntary / {r.ru_nivcsw} "
          f"involuntary, exit {rc}", flush=True)
    return rc if rc >= 0 else 128 - rc  # killed by a signal: as a shell says it


if __name__ == "__main__":
    sys.exit(main())
