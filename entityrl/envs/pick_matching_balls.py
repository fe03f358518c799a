"""PickMatchingBalls: pick as many balls of one color as possible."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

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

NUM_COLORS = 6


class PickMatchingBalls(Environment):
    """Balls of six colors; each step the player picks one ball not yet picked.

    The episode ends when the player picks a ball whose color differs from the earlier picks,
    or when no ball is left. Its only reward comes at the end: the number of matching picks
    divided by the number of balls of the most common color. There are ``max_balls`` balls
    (with ``randomize``, a uniform number between 3 and ``max_balls``). Ball features are the
    color, either one-hot (``one_hot``) or the color index repeated in all six color features,
    and whether the ball was picked; only unpicked balls may be selected.
    Optimal return: 1.0 (pick every ball of the most common color, then any other ball).
    """

    def __init__(self, max_balls: int = 32, one_hot: bool = False, randomize: bool = False) -> None:
        least = 3 if randomize else 1
        if max_balls < least:
            raise ValueError(
                f"PickMatchingBalls: max_balls must be >= {least}"
                f"{' with randomize' if randomize else ''}, got {max_balls}"
            )
        self.max_balls = max_balls
        self.one_hot = one_hot
        self.randomize = randomize
        self.colors = np.zeros(0, dtype=np.int64)
        self.picked = np.zeros(0, dtype=np.bool_)
        self.mismatch = False

    def obs_space(self) -> ObsSpace:
        colors = [f"color{c}" for c in range(NUM_COLORS)]
        return ObsSpace(entities={"Ball": Entity([*colors, "selected"]), "Player": Entity([])})

    def action_space(self) -> dict[str, SelectEntityActionSpace]:
        return {"Pick Ball": SelectEntityActionSpace()}

    def reset(self) -> Observation:
        count = int(self.rng.integers(3, self.max_balls + 1)) if self.randomize else self.max_balls
        self.colors = self.rng.integers(0, NUM_COLORS, size=count)
        self.picked = np.zeros(count, dtype=np.bool_)
        self.mismatch = False
        return self.observe()

    def set_state(self, colors: list[int], picked: list[bool]) -> Observation:
        """Put the environment in a given state (for tests and demonstrations)."""
        self.colors = np.asarray(colors, dtype=np.int64)
        self.picked = np.asarray(picked, dtype=np.bool_)
        self.mismatch = False
        return self.observe()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        pick = actions.get("Pick Ball")
        if isinstance(pick, SelectEntityAction):
            for _, index in pick.actees:  # type: ignore[misc]
                earlier = self.colors[self.picked]
                if earlier.size and earlier[0] != self.colors[index]:
                    self.mismatch = True
                self.picked[index] = True
        return self.observe()

    def observe(self) -> Observation:
        done = self.mismatch or bool(self.picked.all())
        reward = 0.0
        if done:
            matching = int(self.picked.sum()) - int(self.mismatch)
            reward = matching / int(np.bincount(self.colors, minlength=NUM_COLORS).max())
        if self.one_hot:
            color_features = np.eye(NUM_COLORS)[self.colors]
        else:
            color_features = np.repeat(self.colors[:, None], NUM_COLORS, axis=1)
        balls = np.column_stack([color_features, self.picked]).astype(np.float32)
        unpicked = np.flatnonzero(~self.picked)
        return Observation(
            features={
                "Ball": balls.reshape(-1, NUM_COLORS + 1),
                "Player": np.zeros((1, 0), dtype=np.float32),
            },
            actions={
                "Pick Ball": SelectEntityActionMask(
                    actor_types=["Player"] if unpicked.size else [],
                    actee_ids=[("Ball", int(i)) for i in unpicked],
                )
            },
            reward=reward,
            done=done,
        )

    def render(self) -> str:
        balls = " ".join(
            f"[{c}]" if picked else f" {c} "
            for c, picked in zip(self.colors.tolist(), self.picked.tolist(), strict=True)
        )
        return f"balls (picked in brackets): {balls}"
