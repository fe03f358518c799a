"""Xor: output the XOR of two bits, possibly negated."""

from __future__ import annotations

from collections.abc import Mapping

from entityrl.env import (
    Action,
    Entity,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)


class Xor(Environment):
    """Two ``Input`` entities each hold a random bit; a global ``negate`` feature is 0 or 1.

    The global ``output`` action must give ``bit1 XOR bit2 XOR negate``: reward 1 if it does,
    0 otherwise. Every episode is one step. Optimal return: 1.0.
    """

    def __init__(self) -> None:
        self.bits = (0, 0)
        self.negate = 0

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Input": Entity(["is_set"])}, global_features=["negate"])

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"output": GlobalCategoricalActionSpace(["0", "1"])}

    @property
    def answer(self) -> int:
        return self.bits[0] ^ self.bits[1] ^ self.negate

    def reset(self) -> Observation:
        bit1, bit2, self.negate = self.rng.integers(0, 2, size=3).tolist()
        self.bits = (bit1, bit2)
        return self.observe(reward=0.0, done=False)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        output = actions.get("output")
        correct = isinstance(output, GlobalCategoricalAction) and output.index == self.answer
        return self.observe(reward=1.0 if correct else 0.0, done=True)

    def observe(self, reward: float, done: bool) -> Observation:
        return Observation(
            features={"Input": [[bit] for bit in self.bits]},
            global_features=[self.negate],
            actions={"output": GlobalCategoricalActionMask()},
            reward=reward,
            done=done,
        )

    def render(self) -> str:
        return f"bits {self.bits[0]} {self.bits[1]}  negate {self.negate}"
