"""PackHunt: hunters that see only near themselves must corner prey together."""

from __future__ import annotations

from entityrl.env import Entity, Observation, ObsSpace
from entityrl.env.multiplayer import PlayerActions
from entityrl.envs.grid import Cell, draw_grid, sample_free_cells, step_within
from entityrl.envs.grid_group import GridGroupGame
from entityrl.envs.in_play import check_in_play, global_choice

HUNTERS_TO_CAPTURE = 2


class PackHunt(GridGroupGame):
    """``num_hunters`` hunters (players "0", "1", ...) on a ``size`` x ``size`` grid with
    ``num_prey`` prey and ``num_hazards`` hazards, all at random distinct cells.

    A hunter sees what lies within ``sight`` cells of it (in x and in y): ``Self`` (x, y),
    the other hunters still in play as ``Ally``, the ``Prey`` (with the number of hunters
    next to each) and the ``Hazard`` cells, each with its position relative to ``Self``;
    global features: the steps left and the grid's size. Everything out of sight is in the
    observation too, with ``visible=False``: hidden from the policy, seen by the value
    function, so a critic sees the whole pack.

    Each step every hunter in play moves (global ``move``: stay, up, down, left, right; off
    the grid or onto a prey is staying). A hunter ending on a hazard is eliminated: that
    observation is its last (``done``). A prey with at least two hunters next to it
    (Manhattan distance 1) at once is captured: the pack (``groups()``: every hunter) gets
    ``group_reward()`` +1, eliminated hunters included; individual rewards are 0. The game
    ends when every prey is captured, when fewer than two hunters are left, or after
    ``max_steps`` steps. Metrics at the end: ``captured`` and ``hunters_left``.

    Scripted baseline (``python benchmarks/multiplayer_baselines.py``, 2,000 games, seed 0,
    default arguments): :func:`~entityrl.envs.players.pack_hunt_baseline` (walk to the
    nearest prey in sight and wait next to it, never onto a hazard in sight; with no prey
    in sight, walk to the centre) returns 1.23 (+- 0.02) per hunter; uniformly random hunters 0.16.
    Optimal return: ``num_prey`` (3.0 by default) per hunter, every prey captured.
    """

    GROUP = "pack"

    def __init__(
        self,
        size: int = 8,
        num_hunters: int = 3,
        num_prey: int = 3,
        num_hazards: int = 6,
        sight: int = 2,
        max_steps: int = 50,
    ) -> None:
        super().__init__(size, num_hunters, sight, max_steps)
        if num_hunters < HUNTERS_TO_CAPTURE:
            raise ValueError(
                f"PackHunt: num_hunters must be >= {HUNTERS_TO_CAPTURE} (a capture takes "
                f"{HUNTERS_TO_CAPTURE}), got {num_hunters}"
            )
        if num_prey < 1 or num_hazards < 0:
            raise ValueError(
                f"PackHunt: need num_prey >= 1 and num_hazards >= 0, got num_prey={num_prey}, "
                f"num_hazards={num_hazards}"
            )
        if num_hunters + num_prey + num_hazards > size * size:
            raise ValueError(
                f"PackHunt: a {size}x{size} grid cannot hold {num_hunters} hunters, {num_prey} "
                f"prey and {num_hazards} hazards (needs {num_hunters + num_prey + num_hazards} "
                "cells)"
            )
        self.num_hunters = num_hunters
        self.num_prey = num_prey
        self.num_hazards = num_hazards
        self.hunters: dict[str, Cell] = {}  # the hunters in play, by player
        self.prey: list[Cell] = []
        self.hazards: list[Cell] = []
        self.captured = 0
        self.captured_now = 0

    def group_reward(self) -> dict[str, float]:
        return {self.GROUP: float(self.captured_now)}

    def obs_space(self) -> ObsSpace:
        relative = ["x", "y", "dx", "dy"]
        return ObsSpace(
            entities={
                "Self": Entity(["x", "y"]),
                "Ally": Entity(relative),
                "Prey": Entity([*relative, "hunters_next"]),
                "Hazard": Entity(relative),
            },
            global_features=["steps_left", "size"],
        )

    def reset(self) -> dict[str, Observation]:
        n, k = self.num_hunters, self.num_prey
        cells = sample_free_cells(self.rng, self.size, self.size, n + k + self.num_hazards)
        return self.set_state(cells[:n], cells[n : n + k], cells[n + k :])

    def set_state(
        self, hunters: list[Cell], prey: list[Cell], hazards: list[Cell]
    ) -> dict[str, Observation]:
        """Start a game from given cells of the hunters (in player order), prey and hazards
        (for tests and demonstrations)."""
        self.hunters = dict(zip(self.names, hunters, strict=True))
        self.prey = list(prey)
        self.hazards = list(hazards)
        self.captured = self.captured_now = 0
        self.steps = 0
        return {p: self.observe(p, cell, done=False) for p, cell in self.hunters.items()}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        check_in_play("PackHunt", actions, self.hunters)
        moves = {p: global_choice("PackHunt", p, chosen, "move") for p, chosen in actions.items()}
        blocked = set(self.prey)
        for player, move in moves.items():
            cell = self.hunters[player]
            to = step_within(cell, move, self.size, self.size)
            self.hunters[player] = cell if to in blocked else to
        self.steps += 1
        hazards = set(self.hazards)
        eliminated = {p: cell for p, cell in self.hunters.items() if cell in hazards}
        for player in eliminated:
            del self.hunters[player]
        cells = list(self.hunters.values())
        left = [cell for cell in self.prey if hunters_next(cell, cells) < HUNTERS_TO_CAPTURE]
        self.captured_now = len(self.prey) - len(left)
        self.captured += self.captured_now
        self.prey = left
        over = (
            not self.prey or len(self.hunters) < HUNTERS_TO_CAPTURE or self.steps >= self.max_steps
        )
        observations = self.answer(eliminated, self.hunters, over)
        if over:
            self.hunters = {}
        return observations

    def observe(self, player: str, me: Cell, done: bool) -> Observation:
        """``player``'s view from ``me``, its cell (the hazard it was eliminated on, if so)."""
        x, y = me
        allies = [cell for p, cell in self.hunters.items() if p != player]
        hunters = list(self.hunters.values())
        # Every entity is listed; those out of sight are hidden from the policy only.
        rows: dict[str, list[tuple[int, ...]]] = {}
        visible: dict[str, list[bool]] = {}
        for name, cells in (("Ally", allies), ("Prey", self.prey), ("Hazard", self.hazards)):
            rows[name] = [(cx, cy, cx - x, cy - y) for cx, cy in cells]
            visible[name] = [self.in_sight(me, cell) for cell in cells]
        rows["Prey"] = [
            (*row, hunters_next(cell, hunters))
            for row, cell in zip(rows["Prey"], self.prey, strict=True)
        ]
        metrics = {}
        if done:
            metrics = {"captured": float(self.captured), "hunters_left": float(len(self.hunters))}
        return self.view({"Self": [me], **rows}, visible, done, metrics)

    def render(self) -> str:
        symbols = dict.fromkeys(self.hazards, "X") | dict.fromkeys(self.prey, "p")
        symbols |= {cell: player[-1] for player, cell in self.hunters.items()}
        return draw_grid(self.size, self.size, symbols) + (
            f"\nstep {self.steps}/{self.max_steps}: captured {self.captured}, "
            "digits hunters, p prey, X hazard"
        )


def hunters_next(cell: Cell, hunters: list[Cell]) -> int:
    """How many of ``hunters`` are next to ``cell`` (Manhattan distance 1)."""
    return sum(abs(hx - cell[0]) + abs(hy - cell[1]) == 1 for hx, hy in hunters)
