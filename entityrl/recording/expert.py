"""Experts as users write them: a function from one environment's :class:`Observation` to the
actions :meth:`Environment.act` takes, played on a whole batch.

``record`` and ``evaluate`` take policies that act on a :class:`~entityrl.env.VecObs` batch and
return, per action, one row of batched values per actor: a categorical choice, a select-entity
candidate's *position among the row's candidates*, continuous values, with actors in the
batch's order. :class:`FunctionExpert` turns a function written against one observation, as
an environment sees it (actors and actees by entity id), into such a policy, and says exactly
what is wrong when the function's answer does not fit the observation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from entityrl.env.action_rows import ActionOutputError, batch_actions
from entityrl.env.observation import Action, Observation
from entityrl.env.vec_env import SerialVecEnv, VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray

ExpertFunction = Callable[[Observation], Mapping[str, Action]]
"""One environment's observation in, its actions by action name out (as ``Environment.act``
takes them)."""


ExpertOutputError = ActionOutputError
"""An expert function's actions do not fit the observation it was given."""


class FunctionExpert:
    """An :data:`ExpertFunction` acting on every environment of ``env`` (a
    :class:`~entityrl.env.SerialVecEnv`, which keeps each environment's observation)."""

    def __init__(self, function: ExpertFunction, env: VecEnv) -> None:
        if not isinstance(env, SerialVecEnv):
            raise TypeError(
                f"an expert written as a function of one Observation reads each environment's "
                f"observation, which only a SerialVecEnv keeps; got a {type(env).__name__} "
                "(build the environments with make_vec(name, n) and no worker processes, or "
                "write the expert on the VecObs batch, as entityrl.envs.experts does)"
            )
        self.function = function
        self.env = env
        self.type_order = list(env.obs_space.entities)

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        observations = self.env.observations
        answers = [self.function(o) if o.actions else {} for o in observations]
        where = [
            f"expert {_name(self.function)} (environment {row})" for row in range(obs.num_rows)
        ]
        return batch_actions(observations, answers, self.env.action_space, self.type_order, where)


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__qualname__", None) or repr(function)
