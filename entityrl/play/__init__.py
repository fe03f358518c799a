"""Playing an environment in the terminal: a person (or an agent, to watch) chooses the actions.

``play(env, controller, console)`` runs the loop on a VecEnv of one environment;
:class:`HumanPlayer` is the controller that asks a person, and any object with
``act(obs: VecObs) -> dict[str, RaggedArray]`` (a trained agent, ``RandomPolicy``) can take its
place.
"""

from entityrl.play.human import HumanPlayer
from entityrl.play.session import Controller, QuitGame, play
from entityrl.play.view import make_console

__all__ = ["Controller", "HumanPlayer", "QuitGame", "make_console", "play"]
