"""Episodes for the replay viewer of web/: what a policy saw and chose, step by step.

The file (``entityrl-episodes/1``) is JSON lines. The first line is the header::

    {"format": "entityrl-episodes/1", "env": {"id": ..., "kwargs": {...}},
     "spaces": <entityrl.env.spaces.spaces_to_data>}

then one line per step of each complete episode, in the order the episodes ended::

    {"episode": 0, "step": 3,
     "observation": {"features": {"<type>": [[...], ...]}, "global_features": [...],
                     "actions": {"<action>": {"actors": [i, ...], "actees": [j, ...]}},
                     "images": {"<image>": {"shape": [h, w, c], "dtype": "uint8",
                                            "data": "<base64>"}}},
     "actions": {"<action>": [choice or actee position, one per actor]},
     "reward": 0.1, "return": 0.42}

Entities are numbered within the observation, type after type in the space's order (as in
:class:`~entityrl.env.VecObs`); ``reward`` is what the step's actions earned and ``return`` the
episode's sum through this step. A continuous action's entry in ``actions`` holds, per actor,
the list of its values. ``images`` is there only when the space declares images (the
header's ``spaces`` lists them): per image its shape ``(height, width, channels)``, its dtype
(``uint8``, or ``float32`` with values in [0, 1]) and its pixels, the array's raw
little-endian bytes in row-major order, base64-encoded (:func:`encoded_image`,
:func:`decoded_image`); recordings without images are as they always were. Any environment
records, natively batched ones included; numpy only.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from entityrl.env.actions import kind_of
from entityrl.env.space_data import spaces_to_data
from entityrl.env.spaces import IMAGE_DTYPES
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs, VecSelectEntityMask
from entityrl.ragged import RaggedArray

FORMAT = "entityrl-episodes/1"


class RecordingEnv:
    """Wraps a :class:`~entityrl.env.VecEnv`: steps it as asked and writes each complete
    episode of its environments to ``out`` (see module docstring); everything else is the
    wrapped environment's. Episodes still running when it stops being used are not written.
    """

    def __init__(self, env: VecEnv, out: IO[str], env_config: Mapping[str, Any]) -> None:
        self.env = env
        self.out = out
        self.episodes = 0
        self._last: VecObs | None = None
        self._open: dict[int, list[dict[str, Any]]] = {}  # per row, its episode so far
        spaces = spaces_to_data(env.obs_space, env.action_space)
        header = {"format": FORMAT, "env": dict(env_config), "spaces": spaces}
        out.write(json.dumps(header) + "\n")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self) -> VecObs:
        self._open.clear()
        self._last = self.env.reset()
        return self._last

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        before = self._last
        assert before is not None, "reset() the environment first"
        obs = self.env.act(actions)
        for row in range(obs.num_rows):
            steps = self._open.setdefault(row, [])
            reward = float(obs.reward[row])
            steps.append(
                {
                    "step": len(steps),
                    "observation": row_observation(before, row),
                    "actions": {
                        name: _chosen(self.env.action_space[name], a, row)
                        for name, a in actions.items()
                    },
                    "reward": reward,
                    "return": (steps[-1]["return"] if steps else 0.0) + reward,
                }
            )
            if obs.done[row]:
                self._write(steps)
                steps.clear()
        self._last = obs
        return obs

    def _write(self, steps: list[dict[str, Any]]) -> None:
        for step in steps:
            self.out.write(json.dumps({"episode": self.episodes, **step}) + "\n")
        self.episodes += 1


def row_observation(obs: VecObs, row: int) -> dict[str, Any]:
    """One row of a batch in the file's observation form."""
    actions: dict[str, Any] = {}
    for name, mask in obs.action_masks.items():
        entry = {"actors": _row(mask.actors, row)[:, 0].tolist()}
        if isinstance(mask, VecSelectEntityMask):
            entry["actees"] = _row(mask.actees, row)[:, 0].tolist()
        actions[name] = entry
    observation = {
        "features": {name: _row(feats, row).tolist() for name, feats in obs.features.items()},
        "global_features": obs.global_features[row].tolist(),
        "actions": actions,
    }
    if obs.images:
        observation["images"] = {
            name: encoded_image(pixels[row]) for name, pixels in obs.images.items()
        }
    return observation


def encoded_image(pixels: np.ndarray) -> dict[str, Any]:
    """An image in the file's form: its shape, dtype and base64 of its raw little-endian bytes,
    row-major."""
    little = pixels.astype(pixels.dtype.newbyteorder("<"), order="C", copy=False)
    return {
        "shape": list(pixels.shape),
        "dtype": str(little.dtype.name),
        "data": base64.b64encode(little.tobytes()).decode("ascii"),
    }


def decoded_image(entry: Mapping[str, Any]) -> np.ndarray:
    """The array of an image in the file's form (:func:`encoded_image`); a ValueError naming
    what does not fit."""
    shape, dtype = tuple(entry["shape"]), entry["dtype"]
    if dtype not in IMAGE_DTYPES:
        raise ValueError(f"image dtype: expected one of {list(IMAGE_DTYPES)}, got {dtype!r}")
    data = base64.b64decode(entry["data"])
    little = np.dtype(dtype).newbyteorder("<")
    count = int(np.prod(shape))
    if len(data) != count * little.itemsize:
        raise ValueError(
            f"image data: expected {count} values of {dtype} for shape {list(shape)} "
            f"({count * little.itemsize} bytes), got {len(data)} bytes"
        )
    pixels = np.frombuffer(data, little)
    return pixels.reshape(shape).astype(dtype)


def read_episodes(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the steps of a recording (for checks and tools)."""
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    if not lines or lines[0].get("format") != FORMAT:
        raise ValueError(f"{path}: not a recording of entityrl episodes (expected format {FORMAT})")
    return lines[0], lines[1:]


def _chosen(space: Any, values: RaggedArray, row: int) -> list[Any]:
    """What the actors of ``row`` chose: one number each (a choice, a candidate's position),
    or for a continuous action each its values."""
    chosen = _row(values, row)
    return chosen[:, 0].tolist() if kind_of(space).discrete else chosen.tolist()


def _row(array: RaggedArray, row: int) -> np.ndarray:
    return array.data[array.offsets[row] : array.offsets[row + 1]]
