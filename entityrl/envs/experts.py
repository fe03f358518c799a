"""Scripted experts: policies that play built-in environments (near-)optimally.

Each acts on a whole :class:`~entityrl.env.VecObs` batch, like a trained agent, and so can be
recorded as demonstrations (``entityrl.recording.record``), evaluated
(``entityrl.training.evaluate``) or compared with a learned policy. They read only what the
policy sees (the observation), never the environment's hidden state.

========================  =========================================================  ==========
environment               expert                                                     its return
========================  =========================================================  ==========
CherryPick                the best remaining cherry                                  1.0
PickMatchingBalls         a ball of the most common color, until none is left        1.0
TreasureHunt              a shortest path (avoiding traps) to the nearest treasure   5.0
Corridor                  always right                                               1.0
ContinuousMoveToOrigin    the thrust that coasts it home by the episode's end        1.0
MultiSnake                each snake a shortest safe path to its food                ~0.9
survival worlds           eat and drink when low, else gather, craft and hunt         (lifetime)
========================  =========================================================  ==========

MultiSnake's expert is written as users write one (docs/recording.md): a function of one
environment's :class:`~entityrl.env.Observation` returning its actions, which ``record`` and
:class:`~entityrl.recording.FunctionExpert` play on a batch (:data:`FUNCTION_EXPERTS`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from entityrl.env import Action, CategoricalAction, Observation, ObsSpace
from entityrl.env.spaces import ActionSpace, GlobalCategoricalActionSpace
from entityrl.env.vec_obs import VecCategoricalMask, VecObs, VecSelectEntityMask
from entityrl.envs.move_to_origin import THRUST
from entityrl.envs.multi_snake import MOVES as SNAKE_MOVES
from entityrl.envs.pick_matching_balls import NUM_COLORS
from entityrl.envs.treasure_hunt import BOUND, MOVES
from entityrl.ragged import RaggedArray

Cell = tuple[int, int]


class CherryPickExpert:
    """CherryPick: each pick takes the best cherry left in the bowl."""

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        quality = obs.features["Cherry"].data[:, 0].astype(np.float64)
        return {"Pick Cherry": _best_of_type(obs, "Pick Cherry", "Cherry", quality)}


class CorridorExpert:
    """Corridor: walk right to the end (the walker's one move per step)."""

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        actors = obs.action_masks["Move"].actors
        return {"Move": RaggedArray(np.ones_like(actors.data), actors.lengths)}


class PickMatchingBallsExpert:
    """PickMatchingBalls: commit to the most common color of the bowl (its balls all match,
    so picking every one of them earns the full return) and pick its balls one by one; once
    none is left, any pick ends the episode at the full return."""

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        balls = obs.features["Ball"]
        colors = ball_colors(balls.data)
        scores = np.zeros(balls.items)
        for row in range(balls.size0):
            span = slice(balls.offsets[row], balls.offsets[row + 1])
            if balls.lengths[row]:
                counts = np.bincount(colors[span], minlength=NUM_COLORS)
                scores[span] = colors[span] == counts.argmax()
        return {"Pick Ball": _best_of_type(obs, "Pick Ball", "Ball", scores)}


def ball_colors(features: npt.NDArray[np.float32]) -> npt.NDArray[np.int64]:
    """Each ball's color from its features: one-hot (the colors sum to 1) or the color index
    repeated in all color features."""
    color_features = features[:, :NUM_COLORS]
    one_hot = color_features.sum(axis=1) == 1
    return np.where(one_hot, color_features.argmax(axis=1), color_features[:, 0]).astype(np.int64)


def _best_of_type(obs: VecObs, action: str, entity_type: str, scores: npt.NDArray) -> RaggedArray:
    """Each actor of a select-entity ``action`` picks the legal candidate of ``entity_type``
    with the highest score (``scores``: one per entity of that type, flattened)."""
    mask = obs.action_masks[action]
    # Written for its environment's select-entity action, as the environment itself is: it
    # reads the candidates, which only that kind's mask has.
    assert isinstance(mask, VecSelectEntityMask)
    # Entity indices within a row count the types before this one first.
    before = np.zeros(obs.num_rows, dtype=np.int64)
    for name, features in obs.features.items():
        if name == entity_type:
            break
        before += features.lengths
    own = obs.features[entity_type]
    chosen: list[int] = []
    legal = None if mask.mask is None else mask.mask.data[:, 0]
    pair = 0
    for row in range(obs.num_rows):
        candidates = mask.actees[row][:, 0] - before[row]
        inside = (candidates >= 0) & (candidates < own.lengths[row])
        values = np.full(candidates.shape[0], -np.inf)
        values[inside] = scores[own.offsets[row] + candidates[inside]]
        for _ in range(mask.actors.lengths[row]):
            allowed = values.copy()
            if legal is not None:
                allowed[~legal[pair : pair + candidates.size]] = -np.inf
            pair += candidates.size
            chosen.append(int(np.argmax(allowed)))
    return RaggedArray(np.array(chosen, dtype=np.int64).reshape(-1, 1), mask.actors.lengths)


class TreasureHuntExpert:
    """TreasureHunt: one step along a shortest path to the nearest reachable treasure,
    never onto a trap (breadth-first search over the board)."""

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        mask = obs.action_masks["move"]  # only its actors are read: any kind has them
        traps, treasure = obs.features["Trap"], obs.features["Treasure"]
        moves = np.zeros(mask.actors.items, dtype=np.int64)
        positions = obs.global_features.round().astype(np.int64)
        for row in np.flatnonzero(mask.actors.lengths):
            start = (int(positions[row, 0]), int(positions[row, 1]))
            goals = {_cell(p) for p in treasure[row]}
            walls = {_cell(p) for p in traps[row]}
            moves[mask.actors.offsets[row]] = self.first_move(start, goals, walls)
        return {"move": RaggedArray(moves.reshape(-1, 1), mask.actors.lengths)}

    def first_move(self, start: Cell, goals: set[Cell], walls: set[Cell]) -> int:
        """The move (index into MOVES) that starts a shortest safe path to the nearest goal."""
        first: dict[Cell, int] = {start: -1}
        frontier = deque([start])
        while frontier:
            cell = frontier.popleft()
            if cell in goals:
                return max(first[cell], 0)
            for move, (dx, dy) in enumerate(MOVES.values()):
                step = (cell[0] + dx, cell[1] + dy)
                inside = abs(step[0]) <= BOUND and abs(step[1]) <= BOUND
                if inside and step not in walls and step not in first:
                    first[step] = move if cell == start else first[cell]
                    frontier.append(step)
        return 0  # no treasure reachable: any move is as good


def _cell(position: npt.NDArray[np.float32]) -> Cell:
    return round(float(position[0])), round(float(position[1]))


class ContinuousMoveToOriginExpert:
    """ContinuousMoveToOrigin: the thrust (within the bounds) that sets the velocity that
    would coast the ship to the origin exactly at the end of a ``max_steps``-step episode
    (the step count is one of the ship's features)."""

    def __init__(self, max_steps: int = 32) -> None:
        self.max_steps = max_steps

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        ship = obs.features["Spaceship"].data.astype(np.float64)
        remaining = np.maximum(self.max_steps - ship[:, 4:5], 1.0)
        wanted = -ship[:, 0:2] / remaining  # the velocity that arrives on the last step
        thrust = np.clip(wanted - ship[:, 2:4], -THRUST[0], THRUST[0]).astype(np.float32)
        return {"thrust": RaggedArray(thrust, obs.action_masks["thrust"].actors.lengths)}


class SurvivalExpert:
    """The survival worlds with the simple actions (``actions="simple"``): a scripted survivor,
    the upper reference of the survival bench (experiments/eden/run.py) and the expert its
    behaviour cloning imitates.

    Each step it takes the first legal action of: ``consume`` when satiety or thirst is below
    ``hungry`` of its maximum (``consume`` itself picks what relieves the emptiest meter);
    ``attack`` (the nearest target: a pig is food, and a wolf in reach bites either way);
    ``pickup`` (what the backpack holds least of: meat and water lying about); ``collect``
    while it carries no water (the nearest river or tree: water, or wood for a torch);
    ``equip``, ``synthesize`` (a torch for the night); ``move`` (toward the nearest pig, else a
    random step); ``idle``. Wood is gathered only on the way to water, since a backpack of wood
    feeds no one. The simple actions aim themselves, so it needs only the masks, the two meters
    and the water carried. It reads the meters as fractions of their maximum, as every
    observation but ``raw`` gives them (``raw`` gives raw values: refused).
    """

    WALK = 4
    WISHES = ("attack", "pickup", "collect", "equip", "synthesize", "move", "idle")

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        hungry: float = 0.6,
    ) -> None:
        names = list(obs_space.global_features)
        space = action_space.get("act")
        if not isinstance(space, GlobalCategoricalActionSpace):
            raise ValueError(
                "SurvivalExpert plays the simple actions (a global categorical action 'act'); "
                f"got actions {sorted(action_space)}: build the world with actions='simple'"
            )
        needed = ("satiety", "thirst", "carrying_water")
        missing = [m for m in needed if m not in names]
        if missing or any(n.startswith("backpack0_") for n in names):
            raise ValueError(
                f"SurvivalExpert reads {', '.join(needed)} (meters as fractions of their "
                "maximum), which the entity and fixed-size observations give; got global "
                f"features {names[:6]}... (observation 'raw', or a world without them)"
            )
        choices = list(space.choices)
        absent = [c for c in ("consume", *self.WISHES) if c not in choices]
        if absent:
            raise ValueError(
                f"SurvivalExpert needs the simple actions {absent}, which action expansions "
                f"replaced; got choices {choices}"
            )
        self.meters = [names.index("satiety"), names.index("thirst")]
        self.water = names.index("carrying_water")
        self.choices = choices
        self.hungry = hungry
        # Per copy: the water carried and the choice made at the last step, the steps left to
        # walk on before collecting again.
        self.water_before = np.zeros(0, dtype=np.float32)
        self.last = np.zeros(0, dtype=np.int64)
        self.away = np.zeros(0, dtype=np.int64)

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        mask = obs.action_masks["act"]
        assert isinstance(mask, VecCategoricalMask) and mask.mask is not None
        legal = mask.mask.data
        features = obs.global_features
        rows = obs.num_rows
        water = features[:, self.water]
        if self.away.shape[0] != rows:  # the first batch
            self.water_before, self.last = water.copy(), np.zeros(rows, dtype=np.int64)
            self.away = np.zeros(rows, dtype=np.int64)
        # Collecting yields what the backpack holds least of: beside a tree or a mine and no
        # river, wood or stone again and again. After a collect that gave no water, walk on.
        dry = (self.last == self.choices.index("collect")) & (water <= self.water_before)
        self.away = np.where(dry, self.WALK, self.away - 1)
        wants = {
            "consume": features[:, self.meters].min(axis=1) < self.hungry,
            "collect": (features[:, self.water] == 0) & (self.away <= 0),
        }
        chosen = np.full(rows, self.choices.index("idle"), dtype=np.int64)
        decided = np.zeros(rows, dtype=np.bool_)
        # The first wish that is legal wins; later ones fill only the undecided rows.
        for wish in ("consume", *self.WISHES):
            choice = self.choices.index(wish)
            take = ~decided & wants.get(wish, True) & legal[:, choice]
            chosen[take] = choice
            decided |= take
        self.water_before, self.last = water.copy(), chosen
        return {"act": RaggedArray(chosen[:, None], mask.actors.lengths)}


EXPERTS = {
    "CherryPick": CherryPickExpert,
    "ContinuousMoveToOrigin": ContinuousMoveToOriginExpert,
    "PickMatchingBalls": PickMatchingBallsExpert,
    "TreasureHunt": TreasureHuntExpert,
    "Corridor": CorridorExpert,
}
"""The scripted expert of each environment that has one, by registered name."""


def multi_snake_expert(obs: Observation, board_size: int = 10) -> dict[str, Action]:
    """MultiSnake: each snake in turn (they move in color order) takes the first step of a
    shortest path to its food that stays on the board and avoids every snake, food of other
    colors and the cells earlier snakes move into this step; with no such path, any free move."""
    heads = [(int(x), int(y), int(color)) for x, y, color in obs.features["SnakeHead"]]
    food = {int(color): (int(x), int(y)) for x, y, color in obs.features["Food"]}
    blocked = {(int(x), int(y)) for x, y, _ in obs.features["SnakeBody"]}
    blocked |= {(x, y) for x, y, _ in heads}
    ids = obs.entity_ids("SnakeHead")
    moves = np.zeros(len(heads), np.int64)
    for i in sorted(range(len(heads)), key=lambda i: heads[i][2]):
        x, y, color = heads[i]
        walls = blocked | {cell for c, cell in food.items() if c != color}
        goals = {food[color]} if color in food else set()
        moves[i] = _first_move((x, y), goals, walls, board_size)
        dx, dy = SNAKE_MOVES[moves[i]]
        blocked.add((x + dx, y + dy))
    return {"move": CategoricalAction(list(ids), moves)}


def _first_move(start: Cell, goals: set[Cell], walls: set[Cell], size: int) -> int:
    """The move (index into MultiSnake's MOVES) starting a shortest path from ``start`` to a
    goal through free cells of the board; a move onto a free cell if no goal is reachable."""
    first: dict[Cell, int] = {start: -1}
    frontier = deque([start])
    while frontier:
        cell = frontier.popleft()
        if cell in goals:
            return first[cell]
        for move, (dx, dy) in enumerate(SNAKE_MOVES):
            step = (cell[0] + dx, cell[1] + dy)
            free = 0 <= step[0] < size and 0 <= step[1] < size and step not in walls
            if free and step not in first:
                first[step] = move if cell == start else first[cell]
                frontier.append(step)
    reached = [move for cell, move in first.items() if cell != start]
    return reached[0] if reached else 0


FUNCTION_EXPERTS: dict[str, Callable[[Observation], Mapping[str, Action]]] = {
    "MultiSnake": multi_snake_expert,
}
"""Experts written as functions of one environment's Observation, by registered name."""
