"""The configurable survival world as a natively batched environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.batched import BatchedEnvironment
from entityrl.env.tasks import TaskFamily
from entityrl.env.vec_obs import VecObs
from entityrl.envs.survival.actions import ACTION_MODES, FullActions, SimpleActions
from entityrl.envs.survival.config import ConfigSource, SurvivalConfigError, load_config
from entityrl.envs.survival.dynamics import Simulation, StepOutcome
from entityrl.envs.survival.observe import Observer
from entityrl.envs.survival.render import render_world
from entityrl.envs.survival.rewards import Rewarder
from entityrl.envs.survival.rules import Rules
from entityrl.envs.survival.state import WorldState
from entityrl.ragged import RaggedArray


class SurvivalWorld(TaskFamily, BatchedEnvironment):
    """``num_envs`` copies of a survival world defined by a config file.

    The agent must keep its satiety and thirst (and, where configured, hp and temperature)
    above zero by hunting, collecting, crafting and equipping; it dies when one reaches zero and
    the episode also ends at the config's horizon. An agent that does nothing lives exactly
    ``life_limit`` steps.

    Arguments: ``config`` (a preset name, a YAML path or the config as a mapping; by default
    the class's preset, DayAndNight for this class), ``overrides`` (a nested mapping merged onto the config),
    ``life_limit`` (maximum satiety and thirst), ``reward`` (``dense``, ``sparse``,
    ``very_sparse``), ``observation`` (``entities``, ``nearest1``, ``nearest10_prey``,
    ``nearest10``, ``raw``), ``actions`` (``full``, ``simple``), ``max_count`` (full actions:
    the largest count a consume, pickup, discard or synthesize may ask for; 1: no ``count``
    action), ``expand`` (simple actions: the paper's Figure 10 expansions, see
    :data:`~entityrl.envs.survival.actions.EXPANSIONS`), ``horizon`` (maximum episode length),
    ``validate`` (check every batch against the spaces, see :class:`BatchedEnvironment`).

    After each step, :attr:`last_outcome` tells what happened in each copy before any copy was
    reset: the event it caused (an index into ``rules.event_names``, -1 for none), the meters
    it refilled, whether its agent died.

    Optimal return: not known in closed form; it is reached by surviving to the horizon. With
    the ``very_sparse`` reward that is 0; with ``sparse`` it is the reward of every meal and drink
    the agent can fit in.

    As a :class:`~entityrl.env.tasks.TaskFamily`, a copy given a task
    (:meth:`~entityrl.env.tasks.TaskFamily.set_tasks`) starts every episode on that task's map:
    its terrain, creatures, weather and the agent's starting place; what happens after the
    start draws from the world's own generator. Copies start without one: a new map every
    episode.
    """

    preset = "DayAndNight"

    def __init__(
        self,
        num_envs: int = 1,
        seed: int | None = None,
        *,
        config: ConfigSource | None = None,
        overrides: Mapping[str, Any] | None = None,
        life_limit: int | None = None,
        reward: str = "dense",
        observation: str = "entities",
        actions: str = "full",
        max_count: int = 1,
        expand: Sequence[str] = (),
        horizon: int | None = None,
        validate: bool = False,
    ) -> None:
        source = config if config is not None else self.preset
        super().__init__(num_envs, seed, validate=validate)
        self.rules = Rules(load_config(source, overrides, life_limit, horizon))
        if actions not in ACTION_MODES:
            raise ValueError(
                f"{self.rules.config.name}: unknown actions {actions!r}; expected one of "
                f"{', '.join(ACTION_MODES)}"
            )
        self.observer = Observer(self.rules, observation)
        if actions == "full" and observation != "entities":
            raise SurvivalConfigError(
                f"{self.rules.config.name}: observation {observation!r} shows no entities for "
                "the full action space to select; use actions='simple' or observation='entities'"
            )
        self.state = WorldState.allocate(self.rules, num_envs)
        self.simulation = Simulation(self.rules, self.state, self.rng)
        if isinstance(expand, str):
            expand = [expand]
        if actions == "full" and expand:
            raise ValueError(
                f"{self.rules.config.name}: expand {list(expand)} applies to actions='simple', "
                "got actions='full'"
            )
        if actions == "simple" and max_count != 1:
            raise ValueError(
                f"{self.rules.config.name}: max_count applies to actions='full' (the simple "
                f"actions act on one unit), got max_count={max_count} with actions='simple'"
            )
        self.actions: FullActions | SimpleActions = (
            FullActions(self.rules, max_count)
            if actions == "full"
            else SimpleActions(self.rules, self.rng, expand)
        )
        self.rewarder = Rewarder(self.rules, reward)
        self.obs_space = self.observer.obs_space
        self.action_space = self.actions.action_space
        self.last_outcome = StepOutcome.nothing(num_envs, len(self.rules.meter_max))
        self.init_tasks(num_envs)

    # ---------------------------------------------------------------- BatchedEnvironment
    def reset_envs(self, envs: npt.NDArray[np.int64]) -> None:
        for group, rng in self.task_draws(envs, self.rng):
            self.simulation.reset(group, rng)

    def step(
        self, actions: Mapping[str, RaggedArray]
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
        intent = self.actions.decode(actions, self.state)
        outcome = self.simulation.step(intent)
        done = outcome.died | (self.state.t >= self.rules.horizon)
        self.last_outcome = outcome
        return self.rewarder(outcome), done

    def observe(self) -> VecObs:
        s = self.state
        sight = self.observer.sight(s)
        n = self.num_envs
        return VecObs(
            features=self.observer.features(s, sight),
            global_features=self.observer.global_features(s, sight),
            action_masks=self.actions.masks(s, sight),
            reward=np.zeros(n, dtype=np.float32),
            done=np.zeros(n, dtype=np.bool_),
        )

    def refresh(self) -> VecObs:
        """The current observation after :attr:`state` was edited by hand (for tests and
        scripted scenarios): buffs and abilities are recomputed from the edited state, and the
        next :meth:`act` is checked against this observation."""
        if self._last is None:
            raise RuntimeError("call reset() before refresh()")
        self.simulation.refresh(np.arange(self.num_envs))
        obs = self.observe()
        self._last = obs
        return obs

    def episode_metrics(self, ended: npt.NDArray[np.int64]) -> dict[str, npt.NDArray[np.float64]]:
        """Whether the agent died (rather than reaching the horizon) and how often it did each
        of the config's tasks."""
        counts = self.state.event_counts[ended]
        metrics = {"died": self.last_outcome.died[ended].astype(np.float64)}
        for name, event in self.rules.tasks.items():
            metrics[f"task/{name.replace(' ', '_')}"] = counts[:, event].astype(np.float64)
        return metrics

    def render(self, index: int = 0) -> str:
        if not 0 <= index < self.num_envs:
            raise IndexError(f"environment {index} out of range for {self.num_envs} copies")
        return render_world(self.rules, self.state, index)


class DayAndNight(SurvivalWorld):
    """The DayAndNight preset: pigs, trees and rivers; water, meat, wood and a torch for the
    night, which shrinks the agent's vision.

    Optimal return: not known in closed form (see :class:`SurvivalWorld`).
    """

    preset = "DayAndNight"


class FourSeason(SurvivalWorld):
    """The FourSeason preset: DayAndNight plus wolves, mines, stone, leather, a coat and a
    spear; seasons, rain and body temperature.

    Optimal return: not known in closed form (see :class:`SurvivalWorld`).
    """

    preset = "FourSeason"
