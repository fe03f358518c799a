"""Rollouts of multi-player games: the learner plays some seats, other players the rest.

Each rollout, a :class:`~entityrl.training.players.Seating` (from ``seat``) says which rows
(seats) the learner plays and which player plays each other row. Every step, each player acts
for its rows, the actions are merged into one batch, and the game steps. The rollout holds the
learner's rows only, laid out (step, learner row) like any rollout, so PPO learns from it
unchanged; rows whose player had left are marked inactive and are not learned from.

Finished games are scored for the learner against the opponents it met
(:func:`~entityrl.training.match.score_games`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.ragged import RaggedArray
from entityrl.training.config import ConfigError
from entityrl.training.match import GameResult, score_games
from entityrl.training.players import Seating, merge_actions
from entityrl.training.sampler import Sampler, _Step, _Transition, _truncation_values


class PlayerSampler(Sampler):
    """Steps a :class:`PlayerVecEnv` with the learner ``net`` in the seats ``seat()`` gives it
    (every seat by default: independent learners sharing one policy) and the seating's
    opponents in the others."""

    env: PlayerVecEnv

    def __init__(
        self,
        env: PlayerVecEnv,
        net: RogueNet,
        steps: int,
        generator: torch.Generator | None = None,
        seat: Callable[[], Seating] | None = None,
    ) -> None:
        if net.memory:
            raise ConfigError(
                "net.memory: not supported in multi-player games yet (seats change hands "
                "between rollouts); set net.memory=false"
            )
        super().__init__(env, net, steps, generator)
        self.seat = seat or (lambda: Seating.learner_everywhere(env.num_envs))
        self.seating = self.seat()
        self.results: list[GameResult] = []

    @property
    def num_rows(self) -> int:
        return int(self.seating.learner_rows.shape[0])

    def collect(self) -> Rollout:
        self.seating = seating = self.seat()
        learner = seating.learner_rows
        opponents = [
            (player, rows, player.initial_state(rows)) for player, rows in seating.opponent_rows()
        ]
        # With the learner in every seat (independent learners, MA-POCA) the batch is its own.
        everywhere = not opponents
        obs = self.obs
        steps: list[_Step] = []
        for _ in range(self.steps):
            mine = obs if everywhere else obs.take(learner)
            out = self.net.act(mine, generator=self.generator)
            actions = out.actions(mine)
            parts = [(learner, actions)]
            for k, (player, rows, state) in enumerate(opponents):
                theirs, state = player.act(obs.take(rows), state)
                opponents[k] = (player, rows, state)
                parts.append((rows, theirs))
            transition = _Transition(
                mine,
                actions,
                {
                    name: RaggedArray(head.logprob.numpy().reshape(-1, 1), actions[name].lengths)
                    for name, head in out.heads.items()
                },
                out.values.numpy(),
                active=_active(obs, learner),
            )
            obs = self.env.act(actions if everywhere else merge_actions(parts, self.env.num_envs))
            transition.reward, transition.done = obs.reward[learner], obs.done[learner]
            transition.group_reward = obs.group_reward[learner]  # type: ignore[index]
            transition.game_over = obs.game_over[learner]  # type: ignore[index]
            transition.bootstrap = _truncation_values(
                self.net, obs if everywhere else _learner_view(obs, learner), None
            )
            steps.append((transition, self._learner_metrics(obs, learner)))
        self.obs = obs
        return self._rollout([steps], obs if everywhere else obs.take(learner), None)

    def _learner_metrics(
        self, obs: VecObs, learner: npt.NDArray[np.int64]
    ) -> dict[str, npt.NDArray[np.float64]]:
        """The metrics of the learner's players whose games ended; scores the games."""
        if obs.game_over is None or not obs.game_over.any():
            return {}
        ended = np.flatnonzero(obs.game_over)
        mine = np.isin(ended, learner)
        self.results += score_games(
            self.seating.owner[ended], obs.metrics["episode_return"], len(self.env.players)
        )
        return {key: values[mine] for key, values in obs.metrics.items()}

    def take_results(self) -> list[GameResult]:
        """The games scored since the last call."""
        results, self.results = self.results, []
        return results


def _active(obs: VecObs, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    if obs.active is None:
        return np.ones(rows.shape[0], dtype=np.bool_)
    return obs.active[rows]


def _learner_view(obs: VecObs, learner: npt.NDArray[np.int64]) -> VecObs:
    """``obs`` reduced to what truncation values need for the learner's rows: which of them
    were cut off, and their final observations."""
    view = VecObs(
        features={},
        global_features=np.zeros((learner.shape[0], 0), np.float32),
        action_masks={},
        reward=obs.reward[learner],
        done=obs.done[learner],
    )
    if obs.truncated is not None and obs.final is not None:
        cut = np.flatnonzero(obs.truncated)  # final holds these rows, in row order
        mine = np.isin(cut, learner)
        if mine.any():
            view.truncated = obs.truncated[learner]
            view.final = obs.final.take(np.flatnonzero(mine))
    return view
