"""Tiny environments and helpers shared by the environment-layer tests.

Module-level classes, so that worker processes can build them by pickled reference.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env import (
    Action,
    BatchedEnvironment,
    CategoricalAction,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
    VecCategoricalMask,
    VecObs,
)
from entityrl.ragged import RaggedArray


class Growing(Environment):
    """Step ``t`` shows ``t + 1`` tokens (random features) and one "Base"; episodes last
    ``length`` steps.

    Every token moves ("a", "b"; "c" is always masked); the base picks one token (never the
    first one) and the episode chooses a global "Mode" ("calm" only). The reward of a step is
    the sum of the token choices plus 10 times the position of the picked token, so a test can
    see that actions arrive. Metric ``tokens`` is set on every step but the last, which sets
    ``finished``: the episode reports the latest value of each.
    """

    def __init__(self, length: int = 3) -> None:
        self.length = length
        self.step = 0
        self.received: list[Mapping[str, Action]] = []

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Token": Entity(["step", "noise"]), "Base": Entity(["size"])},
            global_features=["progress"],
        )

    def action_space(self) -> dict:
        return {
            "Move": CategoricalActionSpace(["a", "b", "c"]),
            "Pick": SelectEntityActionSpace(),
            "Mode": GlobalCategoricalActionSpace(["calm", "wild"]),
        }

    def reset(self) -> Observation:
        self.step = 0
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.received.append(actions)
        move, pick, mode = actions["Move"], actions.get("Pick"), actions["Mode"]
        assert isinstance(move, CategoricalAction) and isinstance(mode, GlobalCategoricalAction)
        reward = float(move.indices.sum())
        if isinstance(pick, SelectEntityAction) and pick.actors:
            reward += 10.0 * int(pick.actees[0].split("-")[1])
        self.step += 1
        return self.observe(reward)

    def observe(self, reward: float) -> Observation:
        tokens = self.step + 1
        features = np.column_stack(
            [np.full(tokens, self.step, dtype=np.float32), self.rng.random(tokens)]
        )
        token_ids = [f"token-{i}" for i in range(tokens)]
        done = self.step >= self.length
        return Observation(
            features={"Token": features, "Base": [[float(tokens)]]},
            ids={"Token": token_ids, "Base": ["base"]},
            global_features=[self.step / self.length],
            visible={"Token": np.arange(tokens) % 2 == 0},
            actions={
                "Move": CategoricalActionMask(
                    actor_types=["Token"], mask=np.tile([True, True, False], (tokens, 1))
                ),
                "Pick": SelectEntityActionMask(
                    # The base acts once there is a token other than the first to pick.
                    actor_ids=["base"] if tokens > 1 else [],
                    actee_types=["Token"],
                    mask=[[i > 0 for i in range(tokens)]] if tokens > 1 else None,
                ),
                "Mode": GlobalCategoricalActionMask(mask=[True, False]),
            },
            reward=reward,
            done=done,
            metrics={"finished": 1.0} if done else {"tokens": float(tokens)},
        )

    def render(self) -> str:
        return f"step {self.step}"


def choose_first_legal(obs: VecObs) -> dict[str, RaggedArray]:
    """For every actor, its first legal choice (or actee position)."""
    actions = {}
    for name, mask in obs.action_masks.items():
        if mask.mask is None:
            values = np.zeros(mask.actors.items, dtype=np.int64)
        elif isinstance(mask, VecCategoricalMask):
            values = mask.mask.data.argmax(axis=1)
        else:
            widths = np.repeat(mask.actees.lengths, mask.actors.lengths)
            starts = np.cumsum(widths) - widths
            legal = mask.mask.data[:, 0]
            values = np.array(
                [int(legal[s : s + w].argmax()) for s, w in zip(starts, widths, strict=True)],
                dtype=np.int64,
            )
        actions[name] = RaggedArray(values.reshape(-1, 1).astype(np.int64), mask.actors.lengths)
    return actions


class Explodes(Environment):
    """A one-entity environment whose ``act`` raises on step ``fail_at``."""

    def __init__(self, fail_at: int = 2) -> None:
        self.fail_at = fail_at
        self.step = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Thing": Entity(["x"])})

    def action_space(self) -> dict:
        return {"Poke": CategoricalActionSpace(["gently", "hard"])}

    def reset(self) -> Observation:
        self.step = 0
        return self.observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        self.step += 1
        if self.step == self.fail_at:
            self.explode_on_purpose()
        return self.observe()

    def explode_on_purpose(self) -> None:
        raise ValueError(f"the thing exploded on step {self.step}")

    def observe(self) -> Observation:
        return Observation(
            features={"Thing": [[float(self.step)]]},
            actions={"Poke": CategoricalActionMask(actor_types=["Thing"])},
        )


class Sleepy(Explodes):
    """Like :class:`Explodes` but never fails; each ``act`` sleeps ``seconds``."""

    def __init__(self, seconds: float = 0.5) -> None:
        super().__init__(fail_at=-1)
        self.seconds = seconds

    def act(self, actions: Mapping[str, Action]) -> Observation:
        time.sleep(self.seconds)
        return super().act(actions)


def refuse_to_build() -> Environment:
    """An environment factory that always fails."""
    raise RuntimeError(f"factory refused to build in process {os.getpid()}")


class Countdown(BatchedEnvironment):
    """Natively batched: copy ``i`` counts down from a random start in 1..3; each copy has one
    "Clock" entity that picks "tick" or "tock"; reward is the choice index; the episode ends
    when the count reaches 0, reporting its start count as metric "start"."""

    obs_space = ObsSpace(entities={"Clock": Entity(["remaining"])})
    action_space = {"Tick": CategoricalActionSpace(["tick", "tock"])}  # noqa: RUF012

    def __init__(self, num_envs: int, seed: int | None = None) -> None:
        super().__init__(num_envs, seed)
        self.remaining = np.zeros(num_envs, dtype=np.int64)
        self.start = np.zeros(num_envs, dtype=np.int64)
        self.resets = np.zeros(num_envs, dtype=np.int64)

    def reset_envs(self, envs: npt.NDArray[np.int64]) -> None:
        self.remaining[envs] = self.start[envs] = self.rng.integers(1, 4, size=envs.shape[0])
        self.resets[envs] += 1

    def episode_metrics(self, ended: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[np.float64]]:
        return {"start": self.start[ended].astype(np.float64)}

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        reward = actions["Tick"].data[:, 0].astype(np.float32)
        self.remaining -= 1
        return reward, self.remaining == 0

    def observe(self) -> VecObs:
        ones = np.ones(self.num_envs, dtype=np.int64)
        return VecObs(
            features={"Clock": RaggedArray(self.remaining.reshape(-1, 1).astype(np.float32), ones)},
            global_features=np.zeros((self.num_envs, 0), dtype=np.float32),
            action_masks={
                "Tick": VecCategoricalMask(
                    RaggedArray(np.zeros((self.num_envs, 1), dtype=np.int64), ones)
                )
            },
            reward=np.zeros(self.num_envs, dtype=np.float32),
            done=np.zeros(self.num_envs, dtype=np.bool_),
        )
