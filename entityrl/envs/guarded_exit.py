"""GuardedExit: explorers that see only near themselves must give one of them up to escape."""

from __future__ import annotations

from entityrl.env import Entity, Observation, ObsSpace
from entityrl.env.multiplayer import PlayerActions
from entityrl.envs.grid import Cell, draw_grid, sample_free_cells, step_within
from entityrl.envs.grid_group import GridGroupGame
from entityrl.envs.in_play import check_in_play, global_choice


class GuardedExit(GridGroupGame):
    """``num_explorers`` explorers (players "0", "1", ...) on a ``size`` x ``size`` grid with a
    guard and a locked exit, all at random distinct cells.

    An explorer sees what lies within ``sight`` cells of it (in x and in y): ``Self`` (x, y,
    whether it holds the key), the other explorers still in play as ``Ally`` (the same), the
    ``Guard``, the ``Key`` once it lies on the ground, and the ``Exit``, each with its position
    relative to ``Self``; global features: the steps left and the grid's size. Everything out
    of sight is in the observation too, with ``visible=False``: hidden from the policy, seen
    by the value function.

    Each step every explorer in play moves (global ``move``: stay, up, down, left, right; off
    the grid is staying; explorers may share a cell). Explorers that step onto the guard are
    eliminated (that observation is their last, ``done``), and the guard with them: it drops
    the key on its cell. An explorer that steps onto the key picks it up; the explorer holding
    the key that steps onto the exit lets the group out: the group (``groups()``: every
    explorer) gets ``group_reward()`` +1, the eliminated explorer included, and the game ends.
    Individual rewards are 0. The game also ends when no explorer is left or after
    ``max_steps`` steps. Metrics in each explorer's last observation: ``escaped`` (it walked
    out with the group), ``given_up`` (the guard eliminated it) and ``explorers_left``.

    This is the task where credit after leaving matters: the explorer that slays the guard
    never sees the reward it made possible, so learners that credit each agent only with
    what it gets while in play learn to keep away from the guard. A group's return is 1 for
    a game escaped (:func:`~entityrl.training.match.play_group` measures it).

    Scripted baseline (``python benchmarks/multiplayer_baselines.py``, 2,000 games, seed 0,
    default arguments): :func:`~entityrl.envs.players.guarded_exit_baseline` (the explorer
    nearest the guard in sight walks into it, the others fetch the key and walk it to the
    exit; with nothing in sight, patrol) escapes in 0.86 of games; uniformly random explorers
    in 0.03. Optimal return: 1.0, every game escaped.
    """

    GROUP = "explorers"

    def __init__(
        self, size: int = 6, num_explorers: int = 3, sight: int = 2, max_steps: int = 30
    ) -> None:
        super().__init__(size, num_explorers, sight, max_steps)
        if num_explorers < 2:
            raise ValueError(
                "GuardedExit: num_explorers must be >= 2 (one is given up to the guard), "
                f"got {num_explorers}"
            )
        if num_explorers + 2 > size * size:
            raise ValueError(
                f"GuardedExit: a {size}x{size} grid cannot hold {num_explorers} explorers, the "
                f"guard and the exit (needs {num_explorers + 2} cells)"
            )
        self.explorers: dict[str, Cell] = {}  # the explorers in play, by player
        self.guard: Cell | None = None  # None once slain
        self.key: Cell | None = None  # on the ground; None before the guard falls or once held
        self.holder: str | None = None
        self.exit: Cell = (0, 0)
        self.escaped = False

    def group_reward(self) -> dict[str, float]:
        return {self.GROUP: float(self.escaped)}

    def obs_space(self) -> ObsSpace:
        relative = ["x", "y", "dx", "dy"]
        return ObsSpace(
            entities={
                "Self": Entity(["x", "y", "has_key"]),
                "Ally": Entity([*relative, "has_key"]),
                "Guard": Entity(relative),
                "Key": Entity(relative),
                "Exit": Entity(relative),
            },
            global_features=["steps_left", "size"],
        )

    def reset(self) -> dict[str, Observation]:
        cells = sample_free_cells(self.rng, self.size, self.size, len(self.names) + 2)
        return self.set_state(cells[:-2], guard=cells[-2], exit=cells[-1])

    def set_state(self, explorers: list[Cell], guard: Cell, exit: Cell) -> dict[str, Observation]:
        """Start a game from given cells of the explorers (in player order), the guard and the
        exit (for tests and demonstrations)."""
        self.explorers = dict(zip(self.names, explorers, strict=True))
        self.guard, self.key, self.holder, self.exit = guard, None, None, exit
        self.escaped = False
        self.steps = 0
        return {p: self.observe(p, cell, done=False) for p, cell in self.explorers.items()}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        check_in_play("GuardedExit", actions, self.explorers)
        for player, chosen in actions.items():
            move = global_choice("GuardedExit", player, chosen, "move")
            self.explorers[player] = step_within(self.explorers[player], move, self.size, self.size)
        self.steps += 1
        eliminated = {p: cell for p, cell in self.explorers.items() if cell == self.guard}
        for player in eliminated:
            del self.explorers[player]
        if eliminated:
            self.key, self.guard = self.guard, None
        for player, cell in self.explorers.items():
            if cell == self.key:
                self.key, self.holder = None, player
        self.escaped = self.holder in self.explorers and self.explorers[self.holder] == self.exit
        over = self.escaped or not self.explorers or self.steps >= self.max_steps
        observations = self.answer(eliminated, self.explorers, over)
        if over:
            self.explorers = {}
        return observations

    def observe(self, player: str, me: Cell, done: bool) -> Observation:
        """``player``'s view from ``me``, its cell (the guard's, if it was eliminated there)."""
        x, y = me

        def relative(cell: Cell) -> tuple[int, int, int, int]:
            return (cell[0], cell[1], cell[0] - x, cell[1] - y)

        allies = {p: cell for p, cell in self.explorers.items() if p != player}
        others = {"Guard": self.guard, "Key": self.key, "Exit": self.exit}
        others = {name: cell for name, cell in others.items() if cell is not None}
        # Every entity is listed; those out of sight are hidden from the policy only.
        features = {
            "Self": [(x, y, int(self.holder == player))],
            "Ally": [(*relative(cell), int(self.holder == p)) for p, cell in allies.items()],
            **{name: [relative(cell)] for name, cell in others.items()},
        }
        visible = {
            "Ally": [self.in_sight(me, cell) for cell in allies.values()],
            **{name: [self.in_sight(me, cell)] for name, cell in others.items()},
        }
        metrics = {}
        if done:
            in_play = player in self.explorers
            metrics = {
                "escaped": float(self.escaped and in_play),
                "given_up": float(not in_play),
                "explorers_left": float(len(self.explorers)),
            }
        return self.view(features, visible, done, metrics)

    def render(self) -> str:
        symbols = {self.exit: "E"}
        if self.guard is not None:
            symbols[self.guard] = "G"
        if self.key is not None:
            symbols[self.key] = "k"
        symbols |= {cell: player[-1] for player, cell in self.explorers.items()}
        return draw_grid(self.size, self.size, symbols) + (
            f"\nstep {self.steps}/{self.max_steps}: key held by "
            f"{'nobody' if self.holder is None else 'explorer ' + self.holder}; "
            "digits explorers, G guard, k key, E exit"
        )
