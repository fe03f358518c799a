"""CherryPick: pick the best half of a bowl of cherries, one per step."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env import (
    Action,
    Entity,
    Environment,
    Observation,
    ObsSpace,
    SelectEntityAction,
    SelectEntityActionMask,
    SelectEntityActionSpace,
)


def check_num_cherries(name: str, num_cherries: int) -> None:
    if num_cherries < 2:
        raise ValueError(
            f"{name}: num_cherries must be >= 2 (one pick per pair), got {num_cherries}"
        )


def cherry_qualities(rng: np.random.Generator, shape: tuple[int, ...]) -> npt.NDArray[np.float64]:
    """Normal qualities along the last axis, shifted so that the best half sums to 1."""
    quality = rng.normal(size=shape)
    picks = shape[-1] // 2
    best = -np.partition(-quality, picks - 1, axis=-1)[..., :picks]
    return quality + (1.0 - best.sum(axis=-1, keepdims=True)) / picks


def describe_bowl(steps: int, num_picks: int, qualities: npt.ArrayLike) -> str:
    """One line for people: which pick comes next and the qualities left in the bowl."""
    shown = " ".join(f"{q:+.2f}" for q in np.asarray(qualities).tolist())
    return f"pick {steps + 1}/{num_picks}  cherries: {shown}"


CHERRY_PICK_SPACE = ObsSpace(entities={"Cherry": Entity(["quality"]), "Player": Entity([])})


class CherryPick(Environment):
    """A bowl of ``num_cherries`` cherries of random quality; the player picks one per step.

    The player (an entity without features) selects one remaining cherry each step and gets
    its quality as reward; the episode ends after ``num_cherries // 2`` picks. Qualities are
    normal, shifted so that the best ``num_cherries // 2`` cherries sum to exactly 1.
    Optimal return: 1.0 (always pick the best remaining cherry).
    """

    def __init__(self, num_cherries: int = 32) -> None:
        check_num_cherries("CherryPick", num_cherries)
        self.num_cherries = num_cherries
        self.cherries: list[float] = []
        self.steps = 0

    @property
    def num_picks(self) -> int:
        return self.num_cherries // 2

    def obs_space(self) -> ObsSpace:
        return CHERRY_PICK_SPACE

    def action_space(self) -> dict[str, SelectEntityActionSpace]:
        return {"Pick Cherry": SelectEntityActionSpace()}

    def reset(self) -> Observation:
        self.cherries = cherry_qualities(self.rng, (self.num_cherries,)).tolist()
        self.steps = 0
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        reward = 0.0
        pick = actions.get("Pick Cherry")
        if isinstance(pick, SelectEntityAction):
            for _, index in pick.actees:  # type: ignore[misc]
                reward += self.cherries.pop(index)
        self.steps += 1
        return self.observe(reward)

    def observe(self, reward: float) -> Observation:
        return Observation(
            features={
                "Cherry": np.array(self.cherries, dtype=np.float32).reshape(-1, 1),
                "Player": np.zeros((1, 0), dtype=np.float32),
            },
            actions={
                "Pick Cherry": SelectEntityActionMask(
                    actor_types=["Player"], actee_types=["Cherry"]
                )
            },
            reward=reward,
            done=self.steps >= self.num_picks,
        )

    def render(self) -> str:
        return describe_bowl(self.steps, self.num_picks, self.cherries)
