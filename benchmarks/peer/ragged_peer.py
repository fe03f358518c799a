"""Times ragged-buffer 0.4.8 on the inputs saved by benchmarks/ragged.py.

Runs under the reference stack's interpreter (see benchmarks/_peer.py) and stays alive so the
two sides can be timed case by case, close together in time on a shared machine: it reads one
case name per line from stdin and answers each with a JSON line, the median seconds per call.
``median_seconds`` is shared with benchmarks/ragged.py so both sides are timed the same way;
this module imports ragged_buffer only inside ``peer_cases``.
usage: python ragged_peer.py INPUTS.npz REPEATS
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import timeit
from collections.abc import Callable

import numpy as np

MIN_REPEAT_SECONDS = 0.05


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median over ``repeats`` of the mean time per call, each repeat lasting >= 50 ms."""
    timer = timeit.Timer(fn)
    number = 1
    while timer.timeit(number) < MIN_REPEAT_SECONDS:
        number *= 2
    return statistics.median(t / number for t in timer.repeat(repeats, number))


def peer_cases(inputs: dict[str, np.ndarray]) -> dict[str, Callable[[], object]]:
    """The ragged-buffer call for every case of benchmarks/ragged.py, on the same inputs."""
    import ragged_buffer
    from ragged_buffer import RaggedBufferF32, RaggedBufferI64

    data, lengths, perm = inputs["data"], inputs["lengths"], inputs["perm"]
    features = data.shape[1]
    buf = RaggedBufferF32.from_flattened(data, lengths)
    ints = RaggedBufferI64.from_flattened(inputs["int_data"], lengths)
    # ragged-buffer broadcasts over items but not over features: one value per row and feature.
    per_row = RaggedBufferI64.from_flattened(
        np.repeat(inputs["per_row"][:, None], features, axis=1), np.ones_like(lengths)
    )
    # padpack() works on the one-feature index buffers rogue-net calls it on.
    index = RaggedBufferI64.from_flattened(np.zeros((len(data), 1), np.int64), lengths)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    rows = [data[a:b] for a, b in itertools.pairwise(bounds)]
    step = len(lengths) // 16
    parts = [buf[np.arange(i * step, (i + 1) * step)] for i in range(16)]
    lo, hi = inputs["slice"]

    def push_rows() -> object:
        out = RaggedBufferF32(features)
        for row in rows:
            out.push(row)
        return out

    def concatenate_rows() -> object:
        sizes = np.array([len(r) for r in rows], dtype=np.int64)
        return RaggedBufferF32.from_flattened(np.concatenate(rows), sizes)

    return {
        "construct from flat data + lengths": lambda: RaggedBufferF32.from_flattened(data, lengths),
        "construct from list of arrays (push)": push_rows,
        "construct from list of arrays (concatenate)": concatenate_rows,
        "index by row array (shuffle)": lambda: buf[perm],
        "slice of rows": lambda: buf[lo:hi, :, :],
        "concat of 16 batches": lambda: ragged_buffer.cat(parts),
        "flatten (as_array)": buf.as_array,
        "add per-row scalar (int64)": lambda: ints + per_row,
        "padding metadata (padpack)": index.padpack,
        "row index of items (indices(0))": lambda: buf.indices(0),
        "position in row (indices(1))": lambda: buf.indices(1),
        "size0, lengths, items": lambda: (buf.size0(), buf.size1(), buf.items()),
        "index a single row": lambda: buf[int(inputs["row"])],
    }


def main() -> None:
    path, repeats = sys.argv[1], int(sys.argv[2])
    cases = peer_cases(dict(np.load(path)))
    for line in sys.stdin:
        print(json.dumps(median_seconds(cases[line.strip()], repeats)), flush=True)


if __name__ == "__main__":
    main()
