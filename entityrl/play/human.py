"""A person at the keyboard as a controller: prompts every actor for one of its legal options."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TextIO

import numpy as np
from rich.console import Console
from rich.text import Text

from entityrl.env.actions import kind_of
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.play.choices import Option, Turn, legal_turns, to_actions
from entityrl.play.entities import RowEntities
from entityrl.play.session import QuitGame
from entityrl.play.view import show_turn
from entityrl.ragged import RaggedArray

QUIT = "q"


class HumanPlayer:
    """Chooses the actions of row 0 by asking a person, one actor at a time.

    A number picks the option with that key, Enter picks a random legal option, ``q`` (or the
    end of the input) quits. Reads ``stdin`` if given, else the terminal through ``input()``.
    """

    def __init__(
        self,
        console: Console,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        *,
        stdin: TextIO | None = None,
        seed: int | None = None,
    ) -> None:
        numeric = [(n, s) for n, s in action_space.items() if not kind_of(s).discrete]
        if numeric:
            name, space = numeric[0]
            raise ValueError(
                f"action {name!r} ({type(space).__name__}) takes numbers: a person picks "
                "among options only, as in categorical and select-entity actions (watch an "
                "agent instead: --agent or --random-agent)"
            )
        self.console = console
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.stdin = stdin
        self.rng = np.random.default_rng(seed)

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        entities = RowEntities(obs, self.obs_space)
        turns = legal_turns(obs, self.action_space, entities)
        if not turns:
            # Nobody acts this step; wait so the game does not race ahead of the person.
            if self._read("nobody acts this step; Enter to continue, q to quit: ") == QUIT:
                raise QuitGame
            return to_actions(obs, [], [])
        picks = []
        for turn in turns:
            show_turn(self.console, turn, entities)
            picks.append(self._ask(turn))
        return to_actions(obs, turns, picks)

    def _ask(self, turn: Turn) -> Option:
        by_key = {option.key: option for option in turn.options}
        while True:
            answer = self._read("choice (Enter = random, q = quit): ")
            if answer == QUIT:
                raise QuitGame
            if answer == "":
                return turn.options[int(self.rng.integers(len(turn.options)))]
            if answer.lstrip("-").isdigit() and int(answer) in by_key:
                return by_key[int(answer)]
            allowed = ", ".join(str(key) for key in by_key)
            self.console.print(
                Text(
                    f"{answer!r} is not a legal choice: type one of {allowed}, "
                    "Enter for a random one, or q to quit",
                    style="red",
                )
            )

    def _read(self, prompt: str) -> str:
        """One stripped line; the end of the input counts as ``q``."""
        try:
            line = self.console.input(prompt, markup=False, emoji=False, stream=self.stdin)
        except EOFError:
            return QUIT
        if self.stdin is not None and not line:
            return QUIT  # readline() returns "" only at the end of the stream
        answer = line.strip()
        if not (self.stdin or sys.stdin).isatty():
            # Nobody typed it on a terminal, so it was not echoed: keep the transcript readable.
            self.console.print(Text(answer))
        return answer
