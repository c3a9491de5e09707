"""``python -m synapto.bench.evolve raw SAMPLE.pkl OUT.json``: one raw-ceiling process
(started by :func:`synapto.bench.evolve.raw.measure_raw`)."""

import sys

from synapto.bench.evolve.raw import raw_process

if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "raw":
        raw_process(sys.argv[2], sys.argv[3])
    else:
        sys.exit("usage: python -m synapto.bench.evolve raw SAMPLE.pkl OUT.json")
