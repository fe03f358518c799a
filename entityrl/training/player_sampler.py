"""Rollouts of multi-player games: the learner plays some seats, other players the rest.

Each rollout, a :class:`~entityrl.training.players.Seating` (from ``seat``) says which rows
(seats) the learner plays and which player plays each other row. Every step, each player acts
for its rows, the actions are merged into one batch, and the game steps. The rollout holds the
learner's rows only, laid out (step, learner row) like any rollout, so PPO learns from it
unchanged; rows whose player had left are marked inactive and are not learned from. A row's
``done`` is set on the step its player leaves and on every step it is not in play, so that
nothing (returns, or with ``net.memory`` the policy's state) carries over into the episode that
starts in the row later: its game's restart, or its player joining.

Finished games are scored for the learner against the opponents it met
(:func:`~entityrl.training.match.score_games`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import torch

from entityrl.algorithms.common.rollout import Rollout
from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.nn.rogue_net import RogueNet
from entityrl.training.agent import Agent
from entityrl.training.match import GameResult, score_games
from entityrl.training.players import PlayerStates, Seating, episode_over, merge_actions
from entityrl.training.sampler import Sampler, _act, _Step, _truncation_values, with_cut_offs


class PlayerSampler(Sampler):
    """Steps a :class:`MultiPlayerVecEnv` with the learner ``net`` in the seats ``seat()`` gives it
    (every seat by default: independent learners sharing one policy) and the seating's
    opponents in the others.

    With ``net.memory`` the learner keeps a state for every row of the batch (:attr:`state`),
    and the opponents theirs (:attr:`opponent_states`); a row's states start afresh where its
    episode starts (:func:`~entityrl.training.players.episode_over`), and the rollout stores
    the learner's state at every step, as the single-player sampler does.
    """

    env: MultiPlayerVecEnv

    def __init__(
        self,
        env: MultiPlayerVecEnv,
        net: RogueNet,
        steps: int,
        generator: torch.Generator | None = None,
        seat: Callable[[], Seating] | None = None,
        decisions: bool = False,
    ) -> None:
        super().__init__(env, net, steps, generator, decisions)
        self.opponent_states = PlayerStates(env.num_envs)
        self.seat = seat or (lambda: Seating.learner_everywhere(env.num_envs))
        self.seating = self.seat()
        self.results: list[GameResult] = []

    @property
    def num_rows(self) -> int:
        return int(self.seating.learner_rows.shape[0])

    def collect(self) -> Rollout:
        self.seating = self.seat()
        steps, self.obs, results = play(
            self.agent, self.env, self.obs, self.steps, self.seating, self.opponent_states
        )
        self.results += results
        return self._rollout([steps], *self.learner_next(self.obs, self.state))

    def learner_next(
        self, obs: VecObs, state: torch.Tensor | None
    ) -> tuple[VecObs, torch.Tensor | None]:
        """What follows the rollout's last step for the learner: its rows of the batch's
        latest observation ``obs`` and of the policy's ``state`` (all of them, the learner
        everywhere)."""
        learner = self.seating.learner_rows
        if learner.shape[0] == obs.num_rows:
            return obs, state
        return obs.take(learner), None if state is None else state[learner]

    def take_results(self) -> list[GameResult]:
        """The games scored since the last call."""
        results, self.results = self.results, []
        return results


def play(
    agent: Agent,
    env: MultiPlayerVecEnv,
    obs: VecObs,
    steps: int,
    seating: Seating,
    opponent_states: PlayerStates,
) -> tuple[list[_Step], VecObs, list[GameResult]]:
    """``steps`` steps of the games ``env`` from ``obs``: ``agent`` acts for the learner's rows
    of ``seating`` (and keeps their states), its opponents for theirs (from and into
    ``opponent_states``). The learner's steps, the observations after the last, and the games
    that ended, scored for the learner. Run by :class:`PlayerSampler` in the training process,
    and by each worker on its own games with ``rollout.mode=async``
    (:class:`~entityrl.training.async_sampler.AsyncGameSampler`)."""
    learner = seating.learner_rows
    opponents = seating.opponent_rows()
    opponent_states.keep(seating.opponents)
    # With the learner in every seat (independent learners, MA-POCA) the batch is its own.
    everywhere = not opponents
    taken: list[_Step] = []
    results: list[GameResult] = []
    for _ in range(steps):
        mine = obs if everywhere else obs.take(learner)
        transition = _act(agent, mine, None if everywhere else learner)
        transition.active = _active(obs, learner)
        parts = [(learner, transition.actions)]
        for player, rows in opponents:
            parts.append((rows, opponent_states.act(player, obs.take(rows), rows)))
        after = env.act(transition.actions if everywhere else merge_actions(parts, env.num_envs))
        # Rows not in play count as ended too: nothing of them carries over to the episode
        # that starts in the row later, neither returns nor memory (PPO's replay of the
        # chunks resets the state after every done, where the sampler reset it).
        over = episode_over(obs, after)
        transition.reward, transition.done = after.reward[learner], over[learner]
        transition.group_reward = after.group_reward[learner]  # type: ignore[index]
        transition.game_over = after.game_over[learner]  # type: ignore[index]
        state = agent.state
        transition.bootstrap, transition.cut = _truncation_values(
            agent.net,
            after if everywhere else _learner_view(after, learner),
            state if everywhere or state is None else state[torch.from_numpy(learner)],
        )
        taken.append((transition, _learner_metrics(after, seating, len(env.players), results)))
        agent.end_episodes(over)
        opponent_states.restart(over)
        obs = after
    return taken, obs, results


def _learner_metrics(
    obs: VecObs, seating: Seating, players: int, results: list[GameResult]
) -> dict[str, npt.NDArray[np.float64]]:
    """The metrics of the learner's players whose games ended; adds the games' scores to
    ``results``."""
    if obs.game_over is None or not obs.game_over.any():
        return {}
    ended = np.flatnonzero(obs.game_over)
    mine = np.isin(ended, seating.learner_rows)
    results += score_games(seating.owner[ended], obs.metrics["episode_return"], players)
    learners = np.zeros(obs.num_rows, dtype=np.bool_)
    learners[ended[mine]] = True
    return with_cut_offs({key: values[mine] for key, values in obs.metrics.items()}, obs, learners)


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
