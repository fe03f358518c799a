"""RaggedArray operations against ragged-buffer 0.4.8, on training-sized batches.

Inputs (saved to an .npz the peer script loads): 2,048 rows of 0-64 items (uniform), float32
features (4 and 16 wide) plus an int64 copy, a row permutation, one value per row. Every case
is timed with ``median_seconds`` (median of REPEATS repeats of >= 50 ms each) on both sides;
ragged-buffer runs in its own venv (benchmarks/peer/ragged_peer.py, a long-lived subprocess),
and each case is timed on both sides back to back, which side goes first alternating. The
whole comparison runs ROUNDS times and the table shows the median over rounds.

usage: ENTITYRL_PEER_PYTHON=/path/to/enn/bin/python \\
       python benchmarks/ragged.py [--rounds 3] [--repeats 7] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _peer import PEER_PYTHON, PEER_SCRIPTS, machine, require_peer
from peer.ragged_peer import median_seconds
from results import replace_section

from entityrl.ragged import RaggedArray

ROWS = 2048
MAX_LENGTH = 64
FEATURES = (4, 16)
# The peer builds a batch from a list of rows either by pushing them one by one or by
# concatenating them itself; the table credits it with the faster of the two.
FROM_LIST = "construct from list of arrays"
PEER_FROM_LIST = (f"{FROM_LIST} (push)", f"{FROM_LIST} (concatenate)")
NOTES = """\
Reading:
- Selecting rows by an index array (the minibatch shuffle) is where ragged-buffer stays ahead,
  most with narrow items: numpy has no call that copies variable-length blocks, so `take`
  builds a flat item index (one `np.repeat`) and copies every item through it (`np.take`),
  while ragged-buffer's compiled code selects rows at close to the speed of a plain copy.
- Concatenation copies all the data once on both sides and runs at memory speed, so the two
  stay within about 20% of each other; so do the position-in-row indices (one repeat and one
  add over the items on our side).
- `from_flat` wraps the caller's arrays without copying and `flatten` returns the stored array;
  ragged-buffer copies in `from_flattened` and `as_array`: those ratios measure that design
  difference, not faster copying.
- A step-1 slice is a view on both sides; a single row is a numpy view here and a one-row
  RaggedBuffer there.
- `padding` pads every row into its own grid row and returns index, batch, mask and
  inverse_index; `padpack` also packs several short rows into one grid row (first fit) and
  returns index, batch and inverse_index. `padpack` fails on buffers with more than one
  feature, so it is timed on a one-feature int64 buffer with the same lengths, as rogue-net
  calls it; `padding` depends on the lengths only.
- ragged-buffer's `size1()` builds a new lengths array on every call; `lengths` is stored."""


def make_inputs(features: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, MAX_LENGTH + 1, size=ROWS).astype(np.int64)
    items = int(lengths.sum())
    return {
        "data": rng.normal(size=(items, features)).astype(np.float32),
        "int_data": rng.integers(0, 100, size=(items, features)).astype(np.int64),
        "lengths": lengths,
        "perm": rng.permutation(ROWS).astype(np.int64),
        "per_row": rng.integers(0, 1000, size=ROWS).astype(np.int64),
        "slice": np.array([ROWS // 4, 3 * ROWS // 4], dtype=np.int64),
        "row": np.int64(ROWS // 2),
    }


def our_cases(inputs: dict[str, np.ndarray]) -> dict[str, Callable[[], object]]:
    """The RaggedArray call for every case, named as in benchmarks/peer/ragged_peer.py."""
    data, lengths, perm, per_row = (inputs[k] for k in ("data", "lengths", "perm", "per_row"))
    ragged = RaggedArray.from_flat(data, lengths)
    ints = RaggedArray.from_flat(inputs["int_data"], lengths)
    rows = ragged.to_list()
    step = ROWS // 16
    parts = [ragged.take(np.arange(i * step, (i + 1) * step)) for i in range(16)]
    lo, hi = (int(x) for x in inputs["slice"])
    row = int(inputs["row"])
    return {
        "construct from flat data + lengths": lambda: RaggedArray.from_flat(data, lengths),
        FROM_LIST: lambda: RaggedArray.from_arrays(rows),
        "index by row array (shuffle)": lambda: ragged[perm],
        "slice of rows": lambda: ragged[lo:hi],
        "concat of 16 batches": lambda: RaggedArray.concat(parts),
        "flatten (as_array)": ragged.flatten,
        "add per-row scalar (int64)": lambda: ints.add_per_row(per_row),
        "padding metadata (padpack)": ragged.padding,
        "row index of items (indices(0))": ragged.row_index,
        "position in row (indices(1))": ragged.position_in_row,
        "size0, lengths, items": lambda: (ragged.size0, ragged.lengths, ragged.items),
        "index a single row": lambda: ragged[row],
    }


class PeerTimer:
    """The peer script, kept running: ``time(case)`` asks it to time one case."""

    def __init__(self, inputs: Path, repeats: int) -> None:
        self.process = subprocess.Popen(
            [str(PEER_PYTHON), str(PEER_SCRIPTS / "ragged_peer.py"), str(inputs), str(repeats)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def time(self, case: str) -> float:
        if case == FROM_LIST:
            return min(self.time(name) for name in PEER_FROM_LIST)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(case + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"ragged_peer.py exited (code {self.process.wait()}) on {case!r}")
        return float(json.loads(answer))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def microseconds(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.0f}" if us >= 100 else f"{us:.3g}"


def ratio(value: float) -> str:
    return f"{value:,.0f}x" if value >= 10 else f"{value:.2f}x"


def table(ours: dict[int, dict[str, float]], peer: dict[int, dict[str, float]]) -> str:
    header = "| operation | " + " | ".join(
        f"ours, f={f} (µs) | ragged-buffer, f={f} (µs) | ratio, f={f}" for f in FEATURES
    )
    lines = [header + " |", "|---" + "|---:" * 3 * len(FEATURES) + "|"]
    for name in ours[FEATURES[0]]:
        cells = [name]
        for f in FEATURES:
            cells += [
                microseconds(ours[f][name]),
                microseconds(peer[f][name]),
                ratio(peer[f][name] / ours[f][name]),
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(ours: dict[int, dict[str, float]], peer: dict[int, dict[str, float]]) -> str:
    ratios = {(name, f): peer[f][name] / ours[f][name] for f in FEATURES for name in ours[f]}
    (slowest, f), lowest = min(ratios.items(), key=lambda kv: kv[1])
    faster = sum(r > 1 for r in ratios.values())
    return (
        f"entityrl is faster in {faster} of {len(ratios)} measurements; the lowest ratio is "
        f"{ratio(lowest)} ({slowest}, f={f})."
    )


def compare(
    inputs: dict[str, np.ndarray], path: Path, rounds: int, repeats: int
) -> dict[str, dict[str, list[float]]]:
    """Seconds per call of every case on each side ("ours", "peer"), one entry per round."""
    cases = our_cases(inputs)
    times: dict[str, dict[str, list[float]]] = {
        side: {name: [] for name in cases} for side in ("ours", "peer")
    }
    peer = PeerTimer(path, repeats)
    try:
        for round_ in range(rounds):
            for name, fn in cases.items():
                for side in ("peer", "ours") if round_ % 2 == 0 else ("ours", "peer"):
                    seconds = peer.time(name) if side == "peer" else median_seconds(fn, repeats)
                    times[side][name].append(seconds)
            print(f"f={inputs['data'].shape[1]}: round {round_ + 1} of {rounds} done", flush=True)
    finally:
        peer.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = parser.parse_args()
    require_peer()
    load_before = os.getloadavg()[0]
    ours: dict[int, dict[str, float]] = {}
    peer: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for f in FEATURES:
            inputs = make_inputs(f)
            path = Path(tmp) / f"ragged_{f}.npz"
            np.savez(path, **inputs)
            times = compare(inputs, path, args.rounds, args.repeats)
            ours[f], peer[f] = (
                {name: statistics.median(runs) for name, runs in times[side].items()}
                for side in ("ours", "peer")
            )
    text = table(ours, peer)
    print(text)
    print(summary(ours, peer))
    if args.write:
        replace_section(
            "Ragged arrays (benchmarks/ragged.py)",
            "Command: `ENTITYRL_PEER_PYTHON=/work/peers/enn/bin/python python "
            f"benchmarks/ragged.py --rounds {args.rounds} --repeats {args.repeats} --write`"
            f"\n\nMachine: {machine()}; shared with other jobs (1-minute load average "
            f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end).\n\n"
            f"Inputs: {ROWS:,} rows of 0-{MAX_LENGTH} items (uniform, ~{ROWS * MAX_LENGTH // 2:,}"
            " items), float32 features f wide (int64 for the per-row add). Time per call: median"
            f" of {args.repeats} repeats of >= 50 ms, then the median over {args.rounds} complete"
            " rounds; within a round each case is timed on both sides back to back, the side"
            " that goes first alternating between rounds. Peer: ragged-buffer 0.4.8 in its own"
            " venv, same inputs, same run. Ratio = peer time / our time (above 1: entityrl is"
            " faster)."
            f"\n\n{text}\n\n{summary(ours, peer)}\n\n{NOTES}\n",
        )


if __name__ == "__main__":
    main()
