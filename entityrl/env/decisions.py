"""Decisions at their own times: agents that decide every ``period`` steps, staggered by an
``offset``, or when the environment requests it (ML-Agents' ``DecisionRequester`` and
``RequestDecision``).

An *agent* is what one row of a batch acts for: a single-player environment (all its actor
entities decide together, as they share its reward), or one player of a multi-player game.
:class:`DecidingEnvironment` and :class:`DecidingGame` wrap one environment or one game:

* an agent decides on step ``t`` of its episode (``t = 0``: its first observation) when
  ``t >= offset`` and ``(t - offset) % period == 0``, or, with ``on_request``, when the
  environment's ``requests_decision()`` (``requests_decision(player)`` in a game) says so;
* on any other step its observation is passed on without action masks, so the policy takes no
  action for it, and the environment gets, in its place, the actions of the agent's last
  decision again (``between="repeat"``, ML-Agents' ``TakeActionsBetweenDecisions``; each only
  while it is still legal: the same actors, a choice the mask allows, actees still offered) or
  none (``between="none"``: no entry for the agent, as for an actor absent from a mask);
* rewards, ends of episodes and metrics are passed on unchanged, step by step.

What makes the non-decision steps drop out of training is the rollout's side: with decisions
on, a row with no actor is no sample, and each sample's reward is the sum of its agent's
rewards up to its next decision (:func:`entityrl.algorithms.common.gae.decision_gae`). So a
step where the environment itself offers an agent no actor (a turn-based game's waiting
player) is no decision either. See docs/decisions.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from entityrl.env.environment import Environment, SimulationWrapper
from entityrl.env.multiplayer import GameWrapper, MultiPlayerEnvironment, PlayerActions
from entityrl.env.observation import Action, Observation
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.validator import EnvValidationError, validate_actions

BETWEEN = ("repeat", "none")


@dataclass
class Decisions:
    """When agents decide: the ``env.decisions`` settings (see docs/decisions.md)."""

    period: int = 1
    """Steps from one decision of an agent to its next (1: every step; 0: only when the
    environment requests one, which needs ``on_request``)."""
    offset: int = 0
    """Steps of each episode before an agent's first scheduled decision (0 <= offset < period):
    agents with different offsets decide on different steps (staggering)."""
    periods: dict[str, int] = field(default_factory=dict)
    """Per player of a multi-player game, its own ``period`` (players not named: ``period``)."""
    offsets: dict[str, int] = field(default_factory=dict)
    """Per player of a multi-player game, its own ``offset`` (players not named: ``offset``)."""
    between: str = "repeat"
    """What an agent does on the steps between its decisions: ``repeat`` (the actions of its
    last decision again, ML-Agents' TakeActionsBetweenDecisions) or ``none`` (no action)."""
    on_request: bool = False
    """Also decide whenever the environment requests a decision: it implements
    ``requests_decision()`` (a game: ``requests_decision(player)``), asked after every step."""

    def __post_init__(self) -> None:
        for name, value in [("period", self.period), ("offset", self.offset)]:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"env.decisions.{name} must be an integer >= 0, got {value!r}")
        for key, table in [("periods", self.periods), ("offsets", self.offsets)]:
            for player, value in table.items():
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ValueError(
                        f"env.decisions.{key}[{player!r}] must be an integer >= 0, got {value!r}"
                    )
        if self.between not in BETWEEN:
            raise ValueError(
                f"env.decisions.between must be one of {', '.join(BETWEEN)}, got {self.between!r}"
            )
        for player in {None, *self.periods, *self.offsets}:
            self.schedule(player)  # checks the pair each agent gets

    @property
    def enabled(self) -> bool:
        """Whether any agent decides on fewer than all steps (else nothing is wrapped)."""
        return bool(
            self.period != 1 or self.offset or self.periods or self.offsets or self.on_request
        )

    def schedule(self, player: str | None = None) -> tuple[int, int]:
        """The ``(period, offset)`` of ``player`` (None: of a single-player environment's
        agent); ValueError naming the setting when they do not fit together."""
        period = self.periods.get(player, self.period) if player is not None else self.period
        offset = self.offsets.get(player, self.offset) if player is not None else self.offset
        who = "" if player is None else f" of player {player!r}"
        if period == 0 and not self.on_request:
            raise ValueError(
                f"env.decisions: the period{who} is 0 (decide only on request), which needs "
                "env.decisions.on_request=true; otherwise the agent never decides"
            )
        if period == 0 and offset:
            raise ValueError(
                f"env.decisions: the offset{who} is {offset}, but its period is 0 (decisions "
                "only on request, no schedule to offset); expected offset 0"
            )
        if period and offset >= period:
            raise ValueError(
                f"env.decisions: the offset{who} must be below its period {period} "
                f"(0 <= offset < period), got {offset}"
            )
        return period, offset


class _Clock:
    """One agent's steps in its episode, whether it decides now, and its last decision."""

    def __init__(
        self,
        schedule: tuple[int, int],
        between: str,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
    ) -> None:
        self.period, self.offset = schedule
        self.repeat = between == "repeat"
        self.obs_space = obs_space
        self.action_space = action_space
        self.age = 0  # steps of the agent's episode so far
        self.count = 0  # decisions of the agent in its episode
        self.deciding = False  # on the latest observation
        self.latest = Observation()  # the latest observation, as the environment gave it
        self.last: Mapping[str, Action] = {}

    def start(self) -> None:
        """A new episode of the agent: its clock restarts; nothing to repeat yet."""
        self.age, self.count, self.last = 0, 0, {}

    def scheduled(self) -> bool:
        age, period, offset = self.age, self.period, self.offset
        return period > 0 and age >= offset and (age - offset) % period == 0

    def present(self, obs: Observation, requested: bool) -> Observation:
        """``obs`` as the policy sees it: without masks unless the agent decides on it (never
        on the last observation of its episode, which no one acts on); the episode's count of
        decisions in its metrics when it ends."""
        self.latest = obs
        self.deciding = (self.scheduled() or requested) and bool(obs.actions) and not obs.done
        self.count += self.deciding
        changes: dict[str, object] = {}
        if obs.actions and not self.deciding:
            changes["actions"] = {}
        if obs.done:
            changes["metrics"] = {**obs.metrics, "decisions": float(self.count)}
        return dataclasses.replace(obs, **changes) if changes else obs  # type: ignore[arg-type]

    def take(self, chosen: Mapping[str, Action]) -> Mapping[str, Action]:
        """What the environment gets for the agent this step, given the policy's ``chosen``."""
        if self.deciding:
            self.last = chosen
            return chosen
        if not self.repeat:
            return {}
        return {name: action for name, action in self.last.items() if self._legal(name, action)}

    def _legal(self, name: str, action: Action) -> bool:
        """Whether ``action`` answers the mask of ``name`` in the latest observation exactly as
        the validator asks (the same actors, choices its mask allows, actees it offers): the
        entities may have changed since the decision."""
        mask = self.latest.actions.get(name)
        if mask is None:
            return False
        offered = dataclasses.replace(self.latest, actions={name: mask})
        try:
            validate_actions({name: action}, offered, self.obs_space, self.action_space)
        except EnvValidationError:
            return False
        return True


def _requests(env: object, on_request: bool, name: str) -> Callable[..., bool] | None:
    """The environment's ``requests_decision`` when ``on_request`` (TypeError without one)."""
    if not on_request:
        return None
    method = getattr(env, "requests_decision", None)
    if not callable(method):
        raise TypeError(
            f"env.decisions.on_request: {name} does not implement requests_decision(), through "
            "which an environment requests decisions (see docs/decisions.md); expected a "
            "method, got none"
        )
    return method  # type: ignore[no-any-return]


class DecidingEnvironment(SimulationWrapper, Environment):
    """``env`` with its agent deciding at the times ``decisions`` gives (see the module)."""

    def __init__(self, env: Environment, decisions: Decisions) -> None:
        name = type(env).__name__
        if decisions.periods or decisions.offsets:
            raise ValueError(
                f"env.decisions: periods/offsets name players, but {name} is a single-player "
                f"environment (one agent); expected period and offset, got periods="
                f"{decisions.periods}, offsets={decisions.offsets}"
            )
        self.env = env
        self._requested = _requests(env, decisions.on_request, name)
        self._clock = _Clock(
            decisions.schedule(), decisions.between, env.obs_space(), env.action_space()
        )

    def obs_space(self) -> ObsSpace:
        return self.env.obs_space()

    def action_space(self) -> Mapping[str, ActionSpace]:
        return self.env.action_space()

    def reset(self) -> Observation:
        self._clock.start()
        return self._present(self.env.reset())

    def act(self, actions: Mapping[str, Action]) -> Observation:
        obs = self.env.act(self._clock.take(actions))
        self._clock.age += 1
        return self._present(obs)

    def _present(self, obs: Observation) -> Observation:
        requested = self._requested is not None and bool(self._requested())
        return self._clock.present(obs, requested)


class DecidingGame(GameWrapper):
    """``game`` with each player deciding at the times ``decisions`` gives it (see the
    module); a player's clock starts with its first observation of a game."""

    def __init__(self, game: MultiPlayerEnvironment, decisions: Decisions) -> None:
        name = type(game).__name__
        players = list(game.players())
        unknown = sorted({*decisions.periods, *decisions.offsets} - set(players))
        if unknown:
            raise ValueError(
                f"env.decisions: periods/offsets name {unknown}, which are not players of "
                f"{name}; expected some of {players}"
            )
        self.env = game
        self._requested = _requests(game, decisions.on_request, name)
        spaces = game.obs_space(), game.action_space()
        self._clocks = {
            player: _Clock(decisions.schedule(player), decisions.between, *spaces)
            for player in players
        }

    def reset(self) -> dict[str, Observation]:
        first = self.env.reset()
        return {player: self._start(player, obs) for player, obs in first.items()}

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        joint = {player: self._clocks[player].take(chosen) for player, chosen in actions.items()}
        answered = self.env.act(joint)
        result = {}
        for player, obs in answered.items():
            if player not in actions:  # joins the game now
                result[player] = self._start(player, obs)
                continue
            self._clocks[player].age += 1
            result[player] = self._present(player, obs)
        return result

    def _start(self, player: str, obs: Observation) -> Observation:
        self._clocks[player].start()
        return self._present(player, obs)

    def _present(self, player: str, obs: Observation) -> Observation:
        requested = self._requested is not None and bool(self._requested(player))
        return self._clocks[player].present(obs, requested)


def deciding(
    factory: Callable[[], Environment | MultiPlayerEnvironment], decisions: Decisions
) -> Environment | MultiPlayerEnvironment:
    """An environment of ``factory`` wrapped to decide at the times ``decisions`` gives
    (picklable through :func:`functools.partial`, for worker processes)."""
    env = factory()
    if isinstance(env, MultiPlayerEnvironment):
        return DecidingGame(env, decisions)
    if isinstance(env, Environment):
        return DecidingEnvironment(env, decisions)
    raise TypeError(
        f"env.decisions: expected the factory to build an Environment or a "
        f"MultiPlayerEnvironment, got {type(env).__name__}"
    )
