"""Scripted players of the multi-player environments: functions from one player's
:class:`Observation` to its actions, ``(obs) -> {action name: Action}``, and a uniformly
random player called the same way (:func:`uniform_random`). The trainer's
:class:`~entityrl.training.players.ScriptedFunction` plays any of them in a batch of games, and
``entityrl eval --opponent entityrl.envs.players:coin_duel_heuristic`` against an agent.

Each scripted player reads only what its environment shows the policy (entities marked
``visible=False`` are skipped), so it plays under the same information as a learner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from entityrl.env import (
    Action,
    ActionSpace,
    Batcher,
    GlobalCategoricalAction,
    Observation,
    ObsSpace,
    RandomPolicy,
)
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.envs.coin_duel import ACTIONS
from entityrl.envs.grid import MOVES_OR_STAY

Row = Sequence[float]
ScriptedFunction = Callable[[Observation], dict[str, Action]]
"""A scripted player: one player's observation in, its actions (by action name) out."""


def play_game(
    env: MultiPlayerEnvironment, seats: Mapping[str, ScriptedFunction]
) -> dict[str, float]:
    """Play one game of ``env``, each player acting by its scripted player in ``seats``;
    each player's return: its own rewards plus its group's rewards (those paid after it left
    included)."""
    latest = env.reset()
    groups = env.groups()
    returns = {player: obs.reward for player, obs in latest.items()}
    while in_play := [player for player, obs in latest.items() if not obs.done]:
        latest.update(env.act({player: seats[player](latest[player]) for player in in_play}))
        shared = env.group_reward()
        for player in returns:
            returns[player] += shared.get(groups.get(player, ""), 0.0)
            if player in in_play:
                returns[player] += latest[player].reward
    return returns


def uniform_random(
    obs_space: ObsSpace, action_space: Mapping[str, ActionSpace], seed: int | None = None
) -> ScriptedFunction:
    """A player taking uniformly random legal actions, one observation at a time (what
    :class:`~entityrl.env.RandomPolicy` does for a batch)."""
    batcher = Batcher(obs_space, action_space)
    policy = RandomPolicy(action_space, seed=seed)

    def play(obs: Observation) -> dict[str, Action]:
        (actions,) = batcher.unbatch(policy.act(batcher.batch([obs])), [obs])
        return actions

    return play


def move(name: str) -> dict[str, Action]:
    """The global ``move`` action of the grid games (their choices are
    :data:`~entityrl.envs.grid.MOVES_OR_STAY`, and CoinDuel's ``zap`` after them)."""
    return {"move": GlobalCategoricalAction(ACTIONS.index(name), name)}


def step_towards(start: Row, goal: Row) -> str:
    """The move that walks from ``start`` to ``goal`` along x first, then along y."""
    dx, dy = goal[0] - start[0], goal[1] - start[1]
    if dx:
        return "right" if dx > 0 else "left"
    if dy:
        return "up" if dy > 0 else "down"
    return "stay"


def distance(a: Row, b: Row) -> float:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def nearest(origin: Row, cells: Sequence[Row]) -> Row | None:
    """The first of the cells nearest to ``origin`` (Manhattan distance), None if none."""
    return min(cells, key=lambda cell: distance(origin, cell), default=None)


# ---------------------------------------------------------------------------- CoinDuel
def coin_duel_heuristic(obs: Observation) -> dict[str, Action]:
    """Walk to the nearest coin (the first listed among equally near ones), along x first,
    then along y; stay when no coin is left.

    Strong against a random player, with weaknesses a learner can exploit: it never zaps
    and never keeps away from the opponent, so a player that chases it down (its next step
    is predictable) zaps it again and again, taking a coin each time (see
    :func:`coin_duel_hunter`); it ignores the opponent when choosing a coin, racing for
    coins the opponent reaches first; and it never walks around a player in its way, so an
    opponent standing on its path stalls it.
    """
    me = obs.features["Self"][0]
    target = nearest(me, obs.features["Coin"])
    # A stunned player may only stay (its mask says so).
    return move("stay" if target is None or me[3] else step_towards(me, target))


def coin_duel_hunter(obs: Observation) -> dict[str, Action]:
    """An exploit of :func:`coin_duel_heuristic`, to show what a learner can find: zap the
    opponent whenever that is legal; while neither player is stunned, chase the opponent (to
    a cell next to where its fixed rule walks next); while it is stunned, collect coins as
    the heuristic does."""
    if can_zap(obs):
        return move("zap")
    me, opponent = obs.features["Self"][0], obs.features["Opponent"][0]
    if me[3] or opponent[3]:  # stunned: nothing to chase with, or nothing to chase
        return coin_duel_heuristic(obs)
    goal = nearest(opponent, obs.features["Coin"])
    ahead = opponent if goal is None else next_cell(opponent, goal)
    # Not into the cell the opponent enters (both would bounce); next to it, else nearest.
    options = {}
    for name, (dx, dy) in MOVES_OR_STAY.items():
        cell = (me[0] + dx, me[1] + dy)
        if cell != tuple(ahead):
            options[name] = (distance(cell, ahead) != 1, distance(cell, ahead))
    return move(min(options, key=options.__getitem__))


def can_zap(obs: Observation) -> bool:
    mask = obs.actions["move"].mask
    return mask is not None and bool(mask[ACTIONS.index("zap")])


def next_cell(cell: Row, goal: Row) -> tuple[float, float]:
    """The cell after ``cell`` on the x-then-y walk to ``goal``."""
    dx, dy = MOVES_OR_STAY[step_towards(cell, goal)]
    return (cell[0] + dx, cell[1] + dy)


# ---------------------------------------------------------------------------- PackHunt
def pack_hunt_baseline(obs: Observation) -> dict[str, Action]:
    """Walk to the nearest prey in sight and wait next to it for a second hunter; with no
    prey in sight, walk to the centre of the grid (where the others go too). Never steps on
    a hazard in sight (so never on any: those next to it are in sight).

    Its weakness: hunters that found different prey each wait at their own for a partner
    that never comes; and it ignores what its allies do.
    """
    me = obs.features["Self"][0]
    prey = in_sight(obs, "Prey")
    hazards = {(h[0], h[1]) for h in in_sight(obs, "Hazard")}
    target = nearest(me, prey)
    if target is not None and distance(me, target) == 1:
        return move("stay")
    if target is None:
        centre = (obs.global_features[1] - 1) / 2
        goal: Row = (round(centre), round(centre))
    else:
        goal = target
    safe = {}
    for name, (dx, dy) in MOVES_OR_STAY.items():
        cell = (me[0] + dx, me[1] + dy)
        if cell not in hazards:
            # Rather stay than take a safe step that gets no closer.
            safe[name] = distance(cell, goal) - (name == "stay") * 0.5
    return move(min(safe, key=safe.__getitem__))


# ---------------------------------------------------------------------------- GuardedExit
def guarded_exit_baseline(obs: Observation) -> dict[str, Action]:
    """Holding the key, walk to the exit; else walk to the key if it lies in sight; else, with
    the guard in sight and no ally in sight nearer to it (ties: go), walk into the guard; with
    nothing to do in sight, patrol the four cells one in from the corners, a corner per 6
    steps (with the default sight of 2, the patrol sees the whole grid).

    Its weaknesses: two explorers that do not see each other may both walk into the guard;
    the patrol ignores where the allies look; and the key's holder searches for an exit out
    of sight by the same patrol.
    """
    me = obs.features["Self"][0]
    allies = in_sight(obs, "Ally")
    guard, key, exit_ = (in_sight(obs, name) for name in ("Guard", "Key", "Exit"))
    if me[2] and exit_:
        goal: Row = exit_[0]
    elif key and not any(ally[4] for ally in allies):
        goal = key[0]
    elif (
        guard and not me[2] and all(distance(a, guard[0]) >= distance(me, guard[0]) for a in allies)
    ):
        goal = guard[0]
    else:
        steps_left, size = obs.global_features
        far = size - 2
        corners = ((1, 1), (1, far), (far, far), (far, 1))
        goal = corners[int(steps_left // 6) % 4]
    return move(step_towards(me, goal))


def in_sight(obs: Observation, entity_type: str) -> list[Row]:
    """The rows of the entities of one type the policy sees."""
    rows = obs.features.get(entity_type, [])
    shown = obs.visible.get(entity_type)
    return list(rows) if shown is None else [r for r, v in zip(rows, shown, strict=True) if v]


__all__ = [
    "ScriptedFunction",
    "coin_duel_heuristic",
    "coin_duel_hunter",
    "guarded_exit_baseline",
    "pack_hunt_baseline",
    "play_game",
    "uniform_random",
]
