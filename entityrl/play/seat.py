"""One seat of a multi-player game, for a controller that plays a single row.

:class:`OneSeat` shows one player's view of one game as a batch of one environment, so the
terminal game loop (a person, or an agent being watched) works unchanged; the other seats are
played by another :class:`~entityrl.training.players.Player` (a trained agent, or random
moves), whose state of each seat (a network's memory) is carried from step to step and starts
afresh with the seat's episode, as in matches. For the seated player an episode is the whole
game: it may leave before the end and then watches the others finish.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from entityrl.env.multiplayer_vec import MultiPlayerVecEnv
from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.ragged import RaggedArray
from entityrl.training.players import Player, PlayerStates, episode_over, merge_actions


class OneSeat(VecEnv):
    """Seat ``seat`` (a player's index) of the single game of ``env``; ``others`` plays
    every other seat."""

    def __init__(self, env: MultiPlayerVecEnv, seat: int, others: Player) -> None:
        if env.num_games != 1:
            raise ValueError(f"OneSeat needs a batch of 1 game, got {env.num_games}")
        self.env = env
        self.seat = seat
        self.others = others
        self.obs_space = env.obs_space
        self.action_space = env.action_space
        self.num_envs = 1
        self.mine = np.array([seat])
        self.theirs = np.array([r for r in range(env.num_envs) if r != seat])
        self._obs: VecObs | None = None
        self._states = PlayerStates(env.num_envs)

    def reset(self) -> VecObs:
        self._states = PlayerStates(self.env.num_envs)
        self._obs = self.env.reset()
        return self._view(self._obs)

    def act(self, actions: Mapping[str, RaggedArray]) -> VecObs:
        if self._obs is None:
            raise RuntimeError("call reset() before act()")
        theirs = self._states.act(self.others, self._obs.take(self.theirs), self.theirs)
        merged = merge_actions(
            [(self.mine, dict(actions)), (self.theirs, theirs)], self.env.num_envs
        )
        after = self.env.act(merged)
        self._states.restart(episode_over(self._obs, after))
        self._obs = after
        return self._view(after)

    def _view(self, obs: VecObs) -> VecObs:
        """The seat's row; done when the game ends, with the seat's metrics of the game."""
        view = obs.take(self.mine)
        view.reward = obs.reward[self.mine]
        if obs.game_over is not None:
            view.done = obs.game_over[self.mine]
            if view.done[0]:
                view.metrics = {key: values[self.mine] for key, values in obs.metrics.items()}
        return view

    def render(self, index: int = 0) -> str:
        return self.env.render(self.seat)

    def close(self) -> None:
        self.env.close()
