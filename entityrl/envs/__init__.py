"""Built-in environments, by name.

``make("MineSweeper", width=4)`` builds one environment; ``make_vec("MineSweeper", 64, seed=0)``
builds a vectorized batch of them (natively batched environments build themselves).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from entityrl.env import BatchedEnvironment, Environment, ProcessVecEnv, SerialVecEnv, VecEnv
from entityrl.env.decisions import Decisions, deciding
from entityrl.env.multiplayer import MultiPlayerEnvironment
from entityrl.env.multiplayer_vec import MultiPlayerSettingError, PlayerVecEnv, keeps_seats
from entityrl.env.multiplayer_workers import ProcessPlayerVecEnv, RayPlayerVecEnv
from entityrl.env.process_vec_env import DEFAULT_ANSWER_TIMEOUT
from entityrl.envs.cherry_pick import CherryPick
from entityrl.envs.cherry_pick_batched import CherryPickBatched
from entityrl.envs.coin_duel import CoinDuel
from entityrl.envs.corridor import Corridor
from entityrl.envs.count import Count
from entityrl.envs.floor_is_lava import FloorIsLava
from entityrl.envs.goal_grid import GoalGrid
from entityrl.envs.guarded_exit import GuardedExit
from entityrl.envs.hidden_arm import HiddenArm
from entityrl.envs.lanes import Lanes
from entityrl.envs.matrix_game import MatrixGame
from entityrl.envs.meta import Trials
from entityrl.envs.minefield import Minefield
from entityrl.envs.minesweeper import MineSweeper
from entityrl.envs.move_to_origin import ContinuousMoveToOrigin, MoveToOrigin
from entityrl.envs.multi_armed_bandit import MultiArmedBandit
from entityrl.envs.multi_snake import MultiSnake
from entityrl.envs.not_hotdog import NotHotdog
from entityrl.envs.pack_hunt import PackHunt
from entityrl.envs.pick_matching_balls import PickMatchingBalls
from entityrl.envs.recall import Recall
from entityrl.envs.rock_paper_scissors import RockPaperScissors
from entityrl.envs.rps_duel import RockPaperScissorsDuel
from entityrl.envs.slow import Slow
from entityrl.envs.survival import DayAndNight, FourSeason, RiverNavigation, SurvivalWorld
from entityrl.envs.treasure_hunt import TreasureHunt
from entityrl.envs.xor import Xor

EnvClass = type[Environment] | type[BatchedEnvironment] | type[MultiPlayerEnvironment]
"""What the registry holds: a class of one of the three kinds of environment."""
ENV_KINDS = (Environment, BatchedEnvironment, MultiPlayerEnvironment)

REGISTRY: dict[str, EnvClass] = {
    "CherryPick": CherryPick,
    "CherryPickBatched": CherryPickBatched,
    "CoinDuel": CoinDuel,
    "ContinuousMoveToOrigin": ContinuousMoveToOrigin,
    "Corridor": Corridor,
    "Count": Count,
    "DayAndNight": DayAndNight,
    "FloorIsLava": FloorIsLava,
    "FourSeason": FourSeason,
    "GoalGrid": GoalGrid,
    "GuardedExit": GuardedExit,
    "HiddenArm": HiddenArm,
    "Lanes": Lanes,
    "MatrixGame": MatrixGame,
    "Minefield": Minefield,
    "MineSweeper": MineSweeper,
    "MoveToOrigin": MoveToOrigin,
    "MultiArmedBandit": MultiArmedBandit,
    "MultiSnake": MultiSnake,
    "NotHotdog": NotHotdog,
    "PackHunt": PackHunt,
    "PickMatchingBalls": PickMatchingBalls,
    "Recall": Recall,
    "RiverNavigation": RiverNavigation,
    "RockPaperScissors": RockPaperScissors,
    "RockPaperScissorsDuel": RockPaperScissorsDuel,
    "Slow": Slow,
    "Survival": SurvivalWorld,
    "TreasureHunt": TreasureHunt,
    "Trials": Trials,
    "Xor": Xor,
}


# Environments of other libraries, named "<library>:<their id>" (gymnasium:CartPole-v1): per
# library, the module of its adapter, whose ADAPTER class takes the id as ``env_id`` and whose
# check_id(id) raises KeyError for an id the library does not know.
ADAPTERS: dict[str, str] = {
    "crafter": "entityrl.interop.crafter",
    "entity_gym": "entityrl.compat.entity_gym",  # entity_gym:<module>:<Class>
    "gymnasium": "entityrl.interop.gymnasium",
    "minigrid": "entityrl.interop.minigrid",
    "mpe2": "entityrl.interop.pettingzoo",  # mpe2:simple_tag_v3, as pettingzoo:simple_tag_v3
    "openspiel": "entityrl.interop.openspiel",
    "pettingzoo": "entityrl.interop.pettingzoo",
}


def names() -> list[str]:
    """Names of all registered environments."""
    return sorted(REGISTRY)


def register(name: str, cls: EnvClass) -> None:
    """Make ``cls`` available by ``name`` (to ``make``, ``make_vec`` and the CLI)."""
    if not (isinstance(cls, type) and issubclass(cls, ENV_KINDS)):
        raise TypeError(
            f"{cls!r} is not an Environment, BatchedEnvironment or MultiPlayerEnvironment"
        )
    REGISTRY[name] = cls


def lookup(name: str) -> EnvClass:
    """The class registered under ``name``, or imported from a ``"module:Class"`` path; a clear
    error (with suggestions) if there is none."""
    if name in REGISTRY:
        return REGISTRY[name]
    library, _, env_id = name.partition(":")
    if library in ADAPTERS:
        return _adapter(library, env_id)
    if ":" in name:
        return _import_class(name)
    close = difflib.get_close_matches(name, REGISTRY, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise KeyError(f"unknown environment {name!r}.{hint} Registered: {', '.join(names())}")


def _import_class(path: str) -> EnvClass:
    module_name, _, attr = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, TypeError, ValueError) as err:
        # import_module raises TypeError or ValueError for names such as "../x" (a path).
        raise KeyError(
            f"cannot import environment {path!r} (expected module:Class, the module importable "
            f"by its dotted name, not a file path): {err}"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, ENV_KINDS)):
        raise KeyError(
            f"{path!r} is not an Environment, BatchedEnvironment or MultiPlayerEnvironment class"
        )
    if inspect.isabstract(cls):
        missing = ", ".join(f"{name}()" for name in sorted(cls.__abstractmethods__))
        raise KeyError(f"{path!r} is an abstract class: it does not implement {missing}")
    return cls


def _adapter(library: str, env_id: str) -> EnvClass:
    try:
        module = importlib.import_module(ADAPTERS[library])
    except ImportError as err:
        raise KeyError(
            f"{library}:{env_id} needs the {err.name} package: pip install 'entityrl[{library}]'"
        ) from None
    module.check_id(env_id)
    # A library whose ids name classes of more than one kind says which one each names.
    choose = getattr(module, "adapter_for", None)
    return module.ADAPTER if choose is None else choose(env_id)  # type: ignore[no-any-return]


def _constructor_kwargs(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` plus, for another library's environment, its id in that library."""
    library, _, env_id = name.partition(":")
    return {"env_id": env_id, **kwargs} if library in ADAPTERS else kwargs


def check_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    """Reject keyword arguments the environment's constructor does not accept."""
    cls = lookup(name)
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return  # passed on (to another library's constructor), which checks them
    accepted = [p for p in params if p not in ("num_envs", "seed", "validate", "env_id")]
    for key in kwargs:
        if key not in accepted:
            raise TypeError(
                f"{name}: unknown argument {key!r}; accepted: {', '.join(accepted) or 'none'}"
            )


def make(name: str, **kwargs: Any) -> Environment:
    """One environment of a registered (non-batched) type."""
    cls = lookup(name)
    if issubclass(cls, BatchedEnvironment):
        raise TypeError(f"{name} is natively batched; use make_vec({name!r}, num_envs)")
    check_kwargs(name, kwargs)
    return cls(**_constructor_kwargs(name, kwargs))


def make_vec(
    name: str,
    num_envs: int,
    seed: int | None = None,
    *,
    processes: int = 0,
    validate: bool = False,
    wrap: Callable[[VecEnv], VecEnv] | None = None,
    answer_timeout: float | None = DEFAULT_ANSWER_TIMEOUT,
    backend: str = "local",
    ray_address: str | None = None,
    decisions: Decisions | None = None,
    **kwargs: Any,
) -> VecEnv:
    """``num_envs`` copies of a registered environment: in this process, or split over
    ``processes`` worker processes when ``processes > 1`` (with ``backend="ray"``, over
    ``processes`` Ray actors of the cluster at ``ray_address``, see
    :class:`~entityrl.env.ray_vec_env.RayVecEnv`). With ``validate``, every
    observation (every batch, for a natively batched environment) is checked against the
    declared spaces. ``wrap`` wraps the vectorized environment (in each worker process, when
    there are several), e.g. ``functools.partial(StackedVecEnv, k=4)``. A worker process
    that does not answer within ``answer_timeout`` seconds is killed and reported. With
    ``decisions``, every environment's agents decide at the times it gives
    (:mod:`entityrl.env.decisions`)."""
    cls = lookup(name)
    check_kwargs(name, kwargs)
    if issubclass(cls, BatchedEnvironment):
        if decisions is not None and decisions.enabled:
            raise ValueError(
                f"env.decisions: {name} is natively batched, stepped as one batch; decisions at "
                "their own times wrap one environment at a time (expected an Environment or a "
                "MultiPlayerEnvironment)"
            )
        env = cls(num_envs=num_envs, seed=seed, **_constructor_kwargs(name, kwargs))  # type: ignore[call-arg]
        # Set after construction: a subclass need not pass the option on to the base class.
        env.validate = validate
        return env if wrap is None else wrap(env)
    factory = functools.partial(cls, **_constructor_kwargs(name, kwargs))
    return vectorize(
        factory,
        num_envs,
        seed,
        processes=processes,
        validate=validate,
        wrap=wrap,
        answer_timeout=answer_timeout,
        backend=backend,
        ray_address=ray_address,
        decisions=decisions,
    )


def vectorize(
    factory: Callable[[], Environment | MultiPlayerEnvironment],
    num_envs: int,
    seed: int | None = None,
    *,
    processes: int = 0,
    validate: bool = False,
    wrap: Callable[[VecEnv], VecEnv] | None = None,
    answer_timeout: float | None = DEFAULT_ANSWER_TIMEOUT,
    backend: str = "local",
    ray_address: str | None = None,
    decisions: Decisions | None = None,
) -> VecEnv:
    """``num_envs`` environments from ``factory`` (a class or a zero-argument callable), as
    :func:`make_vec` builds them: for a multi-player game, ``num_envs`` games with one row per
    (game, player)."""
    games = _builds_games(factory)
    if decisions is not None and decisions.enabled:
        factory = functools.partial(deciding, factory, decisions)
    if games:
        return _player_vec(
            factory,  # type: ignore[arg-type]
            num_envs,
            seed,
            processes,
            validate,
            wrap,
            answer_timeout,
            functools.partial(RayPlayerVecEnv, address=ray_address) if backend == "ray" else None,
        )
    workers: Callable[..., VecEnv] | None = ProcessVecEnv if processes > 1 else None
    if backend == "ray":
        from entityrl.env.ray_vec_env import RayVecEnv

        workers = functools.partial(RayVecEnv, address=ray_address)
    if workers is not None:
        return workers(
            factory,
            num_envs,
            seed,
            num_workers=processes,
            validate=validate,
            wrap=wrap,
            answer_timeout=answer_timeout,
        )
    serial = SerialVecEnv(factory, num_envs, seed, validate=validate)  # type: ignore[arg-type]
    return serial if wrap is None else wrap(serial)


def _builds_games(factory: Callable[[], Any]) -> bool:
    """Whether ``factory`` builds multi-player games (a factory that is neither a class nor a
    partial of one is asked by building one)."""
    target = factory.func if isinstance(factory, functools.partial) else factory
    if isinstance(target, type):
        return issubclass(target, MultiPlayerEnvironment)
    probe = factory()
    probe.close()
    return isinstance(probe, MultiPlayerEnvironment)


def _player_vec(
    factory: Callable[[], MultiPlayerEnvironment],
    num_games: int,
    seed: int | None,
    processes: int,
    validate: bool,
    wrap: Callable[[VecEnv], VecEnv] | None,
    answer_timeout: float | None = DEFAULT_ANSWER_TIMEOUT,
    actors: Callable[..., VecEnv] | None = None,
) -> VecEnv:
    """``num_games`` games of a multi-player environment, one row per (game, player): in this
    process, or split over ``processes`` worker processes when ``processes > 1``, or over
    ``processes`` workers that ``actors`` makes (Ray actors)."""
    target = factory.func if isinstance(factory, functools.partial) else factory
    name = getattr(target, "__name__", type(target).__name__)
    if processes > 1 or actors is not None:
        if num_games < processes:
            raise MultiPlayerSettingError(
                f"rollout.processes={processes}: {name} is a multi-player game, split over the "
                f"worker processes a whole game at a time, and there are only {num_games} "
                "games (rollout.num_envs, per training process when world_size > 1); use at "
                f"most {num_games} processes or more games"
            )
        workers = actors or ProcessPlayerVecEnv
        return workers(
            factory,
            num_games,
            seed,
            num_workers=processes,
            validate=validate,
            wrap=wrap,
            answer_timeout=answer_timeout,
        )
    games = PlayerVecEnv(factory, num_games, seed, validate=validate)
    return games if wrap is None else keeps_seats(wrap(games), name)


__all__ = [
    "ADAPTERS",
    "REGISTRY",
    "CherryPick",
    "CherryPickBatched",
    "CoinDuel",
    "Corridor",
    "Count",
    "FloorIsLava",
    "GuardedExit",
    "HiddenArm",
    "Lanes",
    "MatrixGame",
    "MineSweeper",
    "Minefield",
    "MoveToOrigin",
    "MultiArmedBandit",
    "MultiSnake",
    "NotHotdog",
    "PackHunt",
    "PickMatchingBalls",
    "Recall",
    "RockPaperScissors",
    "RockPaperScissorsDuel",
    "Slow",
    "TreasureHunt",
    "Trials",
    "Xor",
    "check_kwargs",
    "lookup",
    "make",
    "make_vec",
    "names",
    "register",
]
