"""The game loop: show the state, let a controller (a person or an agent) act, show the outcome."""

from __future__ import annotations

import time
from typing import Protocol

from rich.console import Console
from rich.text import Text

from entityrl.env.vec_env import VecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.play.choices import chosen_options, legal_turns
from entityrl.play.entities import ROW, RowEntities, format_value
from entityrl.play.view import show_choices, show_outcome, show_state
from entityrl.ragged import RaggedArray
from entityrl.training.agent import Agent


class QuitGame(Exception):  # noqa: N818 (a request to stop, not an error)
    """Raised by a controller to end the game (a person typed ``q`` or closed the input)."""


class Controller(Protocol):
    """Whoever chooses the actions: :class:`~entityrl.play.HumanPlayer`, a trained agent, or
    :class:`~entityrl.env.RandomPolicy`. Returns VecEnv actions for every row of ``obs``, or
    raises :class:`QuitGame` to stop."""

    def act(self, obs: VecObs) -> dict[str, RaggedArray]: ...


def play(
    env: VecEnv,
    controller: Controller,
    console: Console,
    *,
    steps: int | None = None,
    delay: float = 0.0,
) -> int:
    """Play ``env`` (a batch of one environment) until the controller quits or ``steps`` steps
    have been taken; pause ``delay`` seconds after each step. Returns the number of steps."""
    if env.num_envs != 1:
        raise ValueError(f"play needs a VecEnv of 1 environment, got {env.num_envs}")
    obs = env.reset()
    if isinstance(controller, Agent):
        controller.reset()  # a new game: an agent with memory forgets the last one's
    episode_returns: list[float] = []
    step = 0
    while steps is None or step < steps:
        console.rule(f"step {step}")
        entities = RowEntities(obs, env.obs_space)
        show_state(console, entities, _picture(env))
        try:
            actions = controller.act(obs)
        except QuitGame:
            console.print(Text("quit"))
            break
        previous, obs = obs, env.act(actions)  # act() rejects actions the masks forbid
        turns = legal_turns(previous, env.action_space, entities)
        show_choices(console, turns, chosen_options(turns, actions), entities)
        step += 1
        done = bool(obs.done[ROW])
        show_outcome(console, float(obs.reward[ROW]), done, obs.metrics)
        if done:
            episode_returns.append(float(obs.metrics["episode_return"][0]))
        if delay > 0:
            time.sleep(delay)
    console.print(Text(_summary(step, episode_returns)))
    return step


def _picture(env: VecEnv) -> str | None:
    """The environment's own drawing of row 0, or None if it does not draw itself."""
    try:
        return env.render(ROW)
    except NotImplementedError:
        return None


def _summary(steps: int, returns: list[float]) -> str:
    text = f"{_count(steps, 'step')}, {_count(len(returns), 'episode')} ended"
    if returns:
        text += f", mean return {format_value(sum(returns) / len(returns))}"
    return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
