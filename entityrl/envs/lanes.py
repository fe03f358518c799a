"""Lanes: each of two players walks its own lane to its goal; a game for decision periods."""

from __future__ import annotations

from entityrl.env import (
    Entity,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.envs.in_play import check_in_play

MOVES = ("left", "stay", "right")
PLAYERS = ("0", "1")


class Lanes(MultiPlayerEnvironment):
    """Players "0" and "1", each on its own lane of ``length`` cells, start on a random cell
    other than their goal, which is one end of their lane (drawn per game). Each sees itself
    as ``Walker`` (position in [0, 1], the goal's side, -1 left or +1 right) and moves with the
    global ``move`` (left, stay, right; walls stop it). Every step costs ``step_cost``;
    reaching the goal pays 1 and ends the player's part of the game. The game ends when both
    have arrived, or after ``max_steps`` steps (cut off: truncated).

    A player that repeats its first decision (walk towards the goal) until it arrives plays
    optimally, so an agent deciding every 5 steps (``env.decisions``, actions repeated between
    decisions) can earn what one deciding every step earns: the return is
    ``1 - step_cost * distance``; metric ``extra_steps``, the steps beyond the distance (0:
    optimal; ``max_steps`` for a player that never arrives).
    Optimal return: 1 - step_cost * distance, 0.94 on average with the defaults (a start
    uniform over the 6 cells other than the goal: distance 3.5).
    """

    def __init__(self, length: int = 7, max_steps: int = 20, step_cost: float = 0.02) -> None:
        if length < 2:
            raise ValueError(f"Lanes: length must be >= 2, got {length}")
        if max_steps < length - 1:
            raise ValueError(
                f"Lanes: max_steps must be >= length - 1 = {length - 1} (time to walk a lane), "
                f"got {max_steps}"
            )
        if not 0.0 <= step_cost < 1.0 / max_steps:
            raise ValueError(
                f"Lanes: step_cost must be >= 0 and below 1/max_steps = {1.0 / max_steps:g} "
                f"(arriving always pays), got {step_cost}"
            )
        self.length = length
        self.max_steps = max_steps
        self.step_cost = step_cost
        self.positions = [0, 0]
        self.goals = [0, 0]
        self.distances = [0, 0]
        self.steps = 0
        self.in_play: tuple[str, ...] = ()

    def players(self) -> tuple[str, ...]:
        return PLAYERS

    def obs_space(self) -> ObsSpace:
        return ObsSpace(entities={"Walker": Entity(["position", "goal_side"])})

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"move": GlobalCategoricalActionSpace(list(MOVES))}

    def reset(self) -> dict[str, Observation]:
        end = self.length - 1
        self.goals = [end * int(self.rng.integers(2)) for _ in PLAYERS]
        # A start other than the goal: one of the other length - 1 cells.
        self.positions = [
            (goal + 1 + int(self.rng.integers(end))) % self.length for goal in self.goals
        ]
        self.distances = [abs(p - g) for p, g in zip(self.positions, self.goals, strict=True)]
        self.steps = 0
        self.in_play = PLAYERS
        return {p: self._observe(i, 0.0, done=False) for i, p in enumerate(PLAYERS)}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        check_in_play("Lanes", actions, self.in_play)
        self.steps += 1
        answers = {}
        for player in self.in_play:
            i = PLAYERS.index(player)
            move = actions[player].get("move")
            # No action (an agent between decisions with env.decisions.between=none): stay.
            if isinstance(move, GlobalCategoricalAction):
                step = MOVES.index(move.label) - 1
                self.positions[i] = min(max(self.positions[i] + step, 0), self.length - 1)
            arrived = self.positions[i] == self.goals[i]
            reward = -self.step_cost + float(arrived)
            answers[player] = self._observe(
                i, reward, done=arrived or self.steps >= self.max_steps, cut=not arrived
            )
        self.in_play = tuple(p for p in self.in_play if not answers[p].done)
        return answers

    def _observe(self, me: int, reward: float, done: bool, cut: bool = False) -> Observation:
        extra = self.steps - self.distances[me] if not cut else self.max_steps
        return Observation(
            features={
                "Walker": [
                    (
                        self.positions[me] / (self.length - 1),
                        1.0 if self.goals[me] else -1.0,
                    )
                ]
            },
            actions={"move": GlobalCategoricalActionMask()},
            reward=reward,
            done=done,
            truncated=done and cut,
            metrics={"extra_steps": float(extra)} if done else {},
        )

    def render(self) -> str:
        lanes = []
        for i, player in enumerate(PLAYERS):
            cells = ["."] * self.length
            cells[self.goals[i]] = "G"
            cells[self.positions[i]] = player
            lanes.append("".join(cells))
        return "\n".join(lanes) + f"\nstep {self.steps}/{self.max_steps}"
