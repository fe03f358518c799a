"""MultiArmedBandit: pull the one arm that pays."""

from __future__ import annotations

from collections.abc import Mapping

from entityrl.env import (
    Action,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)


class MultiArmedBandit(Environment):
    """No entities, only a global ``step`` feature; a global ``pull`` action picks arm A to E.

    Arm A pays 1 / ``num_steps``, the others nothing; episodes last ``num_steps`` steps.
    Optimal return: 1.0 (always A).
    """

    def __init__(self, num_steps: int = 32) -> None:
        if num_steps < 1:
            raise ValueError(f"MultiArmedBandit: num_steps must be >= 1, got {num_steps}")
        self.num_steps = num_steps
        self.steps = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(global_features=["step"])

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"pull": GlobalCategoricalActionSpace(["A", "B", "C", "D", "E"])}

    def reset(self) -> Observation:
        self.steps = 0
        return self.observe(reward=0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        pull = actions.get("pull")
        paid = isinstance(pull, GlobalCategoricalAction) and pull.label == "A"
        self.steps += 1
        return self.observe(reward=1.0 / self.num_steps if paid else 0.0)

    def observe(self, reward: float) -> Observation:
        return Observation(
            global_features=[self.steps],
            actions={"pull": GlobalCategoricalActionMask()},
            reward=reward,
            done=self.steps >= self.num_steps,
        )

    def render(self) -> str:
        return f"step {self.steps}/{self.num_steps}; arm A pays"
