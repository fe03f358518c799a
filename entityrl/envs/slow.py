"""Slow: any registered environment whose every step first waits a fixed time, as a remote or
external simulator (a game engine, a physics or traffic simulator) keeps its caller waiting.

The wait is a ``time.sleep``, not computation: it costs the machine nothing, so many copies
stepping in worker processes wait at once. That is the case asynchronous sampling
(``rollout.mode=async``, docs/scaling.md) is measured on (benchmarks/scaling.py)::

    entityrl train CherryPick env.id=Slow env.kwargs.step_ms=2 rollout.processes=8

:class:`SlowGame` does the same for a multi-player game (each step of the game waits once, for
all its players). It is not registered (the registry's names are its shipped environments): a
run gives it as the environment factory, e.g.
``Trainer(config, functools.partial(SlowGame, "CoinDuel", 2.0))`` (benchmarks/async_games.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from entityrl.env import Action, Environment, Observation
from entityrl.env.environment import SimulationWrapper
from entityrl.env.multiplayer import GameWrapper, MultiPlayerEnvironment, PlayerActions
from entityrl.env.spaces import ActionSpace, ObsSpace


class Slow(SimulationWrapper, Environment):
    """The environment registered as ``env`` (built with ``kwargs``), each of whose steps
    first waits ``step_ms`` milliseconds; resets do not wait. Optimal return: that of
    ``env`` (CherryPick's by default: 1)."""

    def __init__(
        self, env: str = "CherryPick", step_ms: float = 2.0, kwargs: dict[str, Any] | None = None
    ) -> None:
        from entityrl.envs import make

        self.delay = _delay("Slow", step_ms)
        try:
            self.env: Environment = make(env, **(kwargs or {}))
        except (KeyError, TypeError) as err:
            raise ValueError(
                f"Slow: env must name a registered single-player environment built by "
                f"make(env, **kwargs); got env={env!r}, kwargs={kwargs!r}: {err}"
            ) from None
        if not isinstance(self.env, Environment):
            raise ValueError(
                f"Slow: env must be a single-player Environment; {env!r} is a "
                f"{type(self.env).__name__}"
            )

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Mapping[str, ActionSpace]:
        return self.env.action_space()

    def reset(self) -> Observation:
        return self.env.reset()

    def act(self, actions: Mapping[str, Action]) -> Observation:
        time.sleep(self.delay)
        return self.env.act(actions)


class SlowGame(GameWrapper):
    """The multi-player game registered as ``game`` (built with ``kwargs``), each of whose steps
    first waits ``step_ms`` milliseconds; resets do not wait."""

    def __init__(
        self, game: str = "CoinDuel", step_ms: float = 2.0, kwargs: dict[str, Any] | None = None
    ) -> None:
        from entityrl.envs import make

        self.delay = _delay("SlowGame", step_ms)
        built = make(game, **(kwargs or {}))
        if not isinstance(built, MultiPlayerEnvironment):
            raise ValueError(
                f"SlowGame: game must name a registered multi-player game; {game!r} is a "
                f"{type(built).__name__}"
            )
        self.env = built

    def reset(self) -> dict[str, Observation]:
        return self.env.reset()

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        time.sleep(self.delay)
        return self.env.act(actions)


def _delay(wrapper: str, step_ms: float) -> float:
    """``step_ms`` in seconds; a ValueError naming ``wrapper`` if it is not >= 0."""
    if not step_ms >= 0:
        raise ValueError(f"{wrapper}: step_ms must be >= 0 milliseconds, got {step_ms}")
    return step_ms / 1000.0
