"""OpenSpiel games as multi-player games, and the exact exploitability of entityrl policies.

An OpenSpiel game becomes a :class:`~entityrl.env.multiplayer.MultiPlayerEnvironment` whose
players are its seats ``player_0``, ``player_1``, ...; ``make_vec`` then batches one row per
(copy, seat), so ``algo=selfplay`` pits the learner against its snapshots.

- A player observes its **information state tensor** (what it knows: its private cards and
  the public actions so far) as global features ``info[i]``, or, for a game without one, its
  observation tensor (``obs[i]``); a one-hot ``player=<i>`` says which seat it holds.
- Its action is the global categorical ``action`` over OpenSpiel's distinct actions, masked
  to the legal ones. In a turn-based game only the player to move has the action; in a
  simultaneous-move game every player does, and the joint move is applied at once.
- **Chance nodes** (dealing cards, rolling dice) are resolved inside the environment, each
  outcome drawn with its probability from the environment's seeded :attr:`rng`; the players
  never see them except through their observations.
- A player's reward is the change of its OpenSpiel return since its last observation; every
  player's observation is ``done`` when the game ends.

Mean-field games, games whose chance outcomes are sampled without being listed, and games with
neither tensor are refused (:class:`UnsupportedGameError`, one line naming what is missing).

:func:`exploitability` scores a trained policy on a small two-player zero-sum turn-based game
with OpenSpiel's own best responses: the policy's probabilities at every information state,
computed in one batch from the tensors the environment gives, form an OpenSpiel
``TabularPolicy``; :func:`mixture_exploitability` scores a mixture of policies (one drawn per
game, as a pool's Nash mixture plays) through OpenSpiel's ``PolicyAggregator``, which weighs
each policy's choices at an information state by how likely that policy was to reach it. A
game of more than :data:`MAX_HISTORIES` histories is refused
(:class:`GameTooLargeError`), pointing to the approximate best response
(:mod:`entityrl.training.best_response`, ``entityrl eval RUN --exploitability --approximate``).

Registry names: ``openspiel:<OpenSpiel's name>``, such as ``openspiel:kuhn_poker``; the game's
parameters are keyword arguments (``env.kwargs`` in a config: ``{players: 3}``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyspiel
import torch
from open_spiel.python import policy as openspiel_policy
from open_spiel.python.algorithms import exploitability as openspiel_exploitability
from open_spiel.python.algorithms.policy_aggregator import PolicyAggregator

from entityrl.env import (
    Batcher,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
)
from entityrl.env.multiplayer import MultiPlayerEnvironment, PlayerActions
from entityrl.env.space_data import space_differences
from entityrl.env.spaces import ActionSpace
from entityrl.nn.rogue_net import RogueNet
from entityrl.training.agent import Agent, load_agent

PREFIX = "openspiel:"
"""How entityrl's registry names an OpenSpiel game."""

ACTION = "action"
"""The one action of every player: a choice among the game's distinct actions."""

MAX_HISTORIES = 1_000_000
"""The most histories (nodes of the game tree) a game may have for :func:`exploitability`:
Kuhn poker has 58, Leduc poker 9,457, tic-tac-toe 549,946."""

APPROXIMATE = (
    "entityrl eval RUN --exploitability --approximate (from Python: "
    "entityrl.training.best_response.approximate_nash_conv)"
)
"""Where a refusal of the exact exploitability points: the approximate best response."""

Dynamics = pyspiel.GameType.Dynamics
ChanceMode = pyspiel.GameType.ChanceMode
Utility = pyspiel.GameType.Utility


class UnsupportedGameError(ValueError):
    """An OpenSpiel game the adapter cannot map onto entityrl's multi-player API, or whose
    exploitability it cannot compute."""


class GameTooLargeError(UnsupportedGameError):
    """A game too large for an exact best response."""


def check_id(env_id: str) -> None:
    """Raise KeyError (with close matches) unless OpenSpiel registers a game ``env_id``."""
    known = pyspiel.registered_names()
    if env_id not in known:
        close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"OpenSpiel has no game {env_id!r}.{hint}")


def load_game(game: str | pyspiel.Game, **params: Any) -> pyspiel.Game:
    """The OpenSpiel game ``game`` names (OpenSpiel's name, with or without ``openspiel:``)
    with ``params``, or ``game`` itself when it is one already."""
    if isinstance(game, pyspiel.Game):
        return game
    name = game.removeprefix(PREFIX)
    check_id(name)
    try:
        return pyspiel.load_game(name, params)
    except pyspiel.SpielError as err:
        raise UnsupportedGameError(
            f"{PREFIX}{name}: OpenSpiel refused the parameters {params}: {err}"
        ) from None


def _tensor_kind(game: pyspiel.Game) -> str:
    """``info`` (the information state tensor) or ``obs`` (the observation tensor): what the
    game's players observe; refuses a game that is not a sequence of moves with listed chance
    outcomes."""
    kind = game.get_type()
    name = kind.short_name
    if kind.dynamics not in (Dynamics.SEQUENTIAL, Dynamics.SIMULTANEOUS):
        raise UnsupportedGameError(
            f"openspiel:{name}: expected turn-based or simultaneous moves, got {kind.dynamics.name} "
            "dynamics (mean-field games have no per-player moves)"
        )
    if kind.chance_mode == ChanceMode.SAMPLED_STOCHASTIC:
        raise UnsupportedGameError(
            f"openspiel:{name}: its chance outcomes are sampled by OpenSpiel, not listed with "
            "probabilities; the adapter draws listed outcomes with its own seeded generator"
        )
    if kind.provides_information_state_tensor:
        return "info"
    if kind.provides_observation_tensor:
        return "obs"
    raise UnsupportedGameError(
        f"openspiel:{name}: provides neither information_state_tensor nor observation_tensor; "
        "a player's observation is one of them"
    )


class OpenSpielGame(MultiPlayerEnvironment):
    """One copy of an OpenSpiel game (see the module's description).

    ``env_id`` is OpenSpiel's name of the game (``kuhn_poker``) or a loaded ``pyspiel.Game``;
    ``params`` are the game's parameters (``players=3``).
    """

    def __init__(self, env_id: str | pyspiel.Game, **params: Any) -> None:
        self.game = load_game(env_id, **params)
        self.name = f"{PREFIX}{self.game.get_type().short_name}"
        self.tensor = _tensor_kind(self.game)
        self.num_players = self.game.num_players()
        self._players = [f"player_{p}" for p in range(self.num_players)]
        if self.tensor == "info":
            size = int(np.prod(self.game.information_state_tensor_shape()))
        else:
            size = int(np.prod(self.game.observation_tensor_shape()))
        self._obs_space = ObsSpace(
            entities={},
            global_features=[
                *(f"{self.tensor}[{i}]" for i in range(size)),
                *(f"player={p}" for p in range(self.num_players)),
            ],
        )
        choices = [str(a) for a in range(self.game.num_distinct_actions())]
        self._action_space = {ACTION: GlobalCategoricalActionSpace(choices)}
        self._identity = np.eye(self.num_players, dtype=np.float32)
        self.state = self.game.new_initial_state()
        self._paid = np.zeros(self.num_players)

    def players(self) -> list[str]:
        return self._players

    def obs_space(self) -> ObsSpace:
        return self._obs_space

    def action_space(self) -> Mapping[str, ActionSpace]:
        return self._action_space

    def reset(self) -> dict[str, Observation]:
        self.state = self.game.new_initial_state()
        self._paid = np.zeros(self.num_players)
        self._resolve_chance()
        return self._observe_all()

    def act(self, actions: PlayerActions) -> dict[str, Observation]:
        movers = self._movers(self.state)
        chosen = []
        for player in movers:
            given = actions.get(self._players[player], {}).get(ACTION)
            if given is None:
                raise ValueError(
                    f"{self.name}: {self._players[player]} is to move, but it was given no "
                    f"{ACTION!r} action"
                )
            chosen.append(int(given.index))  # type: ignore[attr-defined]
        if self.state.is_simultaneous_node():
            self.state.apply_actions(chosen)
        else:
            self.state.apply_action(chosen[0])
        self._resolve_chance()
        return self._observe_all()

    def observe(self, state: pyspiel.State, player: int, reward: float = 0.0) -> Observation:
        """What ``player`` sees at ``state`` (a decision or terminal node): the features and,
        where it is to move, the mask of its legal actions; ``reward``: what it gained since
        its last observation."""
        if self.tensor == "info":
            tensor = state.information_state_tensor(player)
        else:
            tensor = state.observation_tensor(player)
        masks = {}
        if player in self._movers(state):
            legal = np.asarray(state.legal_actions_mask(player), dtype=np.bool_)
            masks = {ACTION: GlobalCategoricalActionMask(mask=legal)}
        return Observation(
            features={},
            global_features=np.concatenate(
                [np.asarray(tensor, dtype=np.float32), self._identity[player]]
            ),
            actions=masks,
            reward=reward,
            done=state.is_terminal(),
        )

    def _movers(self, state: pyspiel.State) -> list[int]:
        """The players who choose an action at ``state``."""
        if state.is_terminal():
            return []
        if state.is_simultaneous_node():
            return list(range(self.num_players))
        return [state.current_player()]

    def _resolve_chance(self) -> None:
        """Draw chance outcomes until a player is to move or the game has ended."""
        while self.state.is_chance_node():
            outcomes, probabilities = zip(*self.state.chance_outcomes(), strict=True)
            self.state.apply_action(int(self.rng.choice(outcomes, p=probabilities)))

    def _observe_all(self) -> dict[str, Observation]:
        returns = np.asarray(self.state.returns(), dtype=np.float64)
        rewards, self._paid = returns - self._paid, returns
        return {
            name: self.observe(self.state, player, float(rewards[player]))
            for player, name in enumerate(self._players)
        }

    def render(self) -> str:
        return str(self.state)


ADAPTER = OpenSpielGame
"""What ``openspiel:<name>`` names in entityrl's registry."""


# ---------------------------------------------------------------------------- exploitability
def policy_table(net: RogueNet, game: pyspiel.Game) -> openspiel_policy.TabularPolicy:
    """``net``'s policy as OpenSpiel's table: at every information state of ``game``, the
    probabilities of the legal actions given the observation :class:`OpenSpielGame` makes of
    it (all states in one batch)."""
    env = OpenSpielGame(game)
    differences = space_differences(
        (net.obs_space, net.action_space), (env.obs_space(), env.action_space()), "the policy"
    )
    if differences:
        raise ValueError(
            f"exploitability: the policy was not trained on {env.name}: " + "; ".join(differences)
        )
    if net.memory is not None:
        raise ValueError(
            "exploitability: expected a policy of the information state alone, got one with "
            "net.memory (its choices depend on its recurrent state)"
        )
    table = openspiel_policy.TabularPolicy(game)
    observations = [env.observe(state, state.current_player()) for state in table.states]
    obs = Batcher(env.obs_space(), env.action_space()).batch(observations)
    with torch.no_grad():
        scores = net.choice_scores(obs)[ACTION]
    logits = (
        scores.scores
        if scores.legal is None
        else scores.scores.masked_fill(~scores.legal, -torch.inf)
    )
    table.action_probability_array = logits.double().softmax(-1).cpu().numpy()
    return table


def check_exact(game: pyspiel.Game) -> None:
    """Raise :class:`UnsupportedGameError` unless OpenSpiel's exact exploitability applies to
    ``game``: two players, zero- or constant-sum, turn-based, at most :data:`MAX_HISTORIES`
    histories (else :class:`GameTooLargeError`)."""
    kind = game.get_type()
    name = f"{PREFIX}{kind.short_name}"
    _tensor_kind(game)  # a game the adapter cannot map is refused before its tree is walked
    if game.num_players() != 2 or kind.utility not in (Utility.ZERO_SUM, Utility.CONSTANT_SUM):
        raise UnsupportedGameError(
            f"exploitability: {name}: expected a two-player zero-sum game, got "
            f"{game.num_players()} players, {kind.utility.name} utility"
        )
    if kind.dynamics != Dynamics.SEQUENTIAL:
        raise UnsupportedGameError(
            f"exploitability: {name}: expected a turn-based game, got simultaneous moves; "
            f"estimate it with learned best responses instead: {APPROXIMATE}"
        )
    histories, stack = 0, [game.new_initial_state()]
    while stack:
        state = stack.pop()
        histories += 1
        if histories > MAX_HISTORIES:
            raise GameTooLargeError(
                f"exploitability: {name} has more than {MAX_HISTORIES:,} histories, too many "
                f"for an exact best response; estimate it with learned best responses instead: "
                f"{APPROXIMATE}"
            )
        if not state.is_terminal():
            stack.extend(state.child(action) for action in state.legal_actions())


def exploitability(
    policy: Agent | RogueNet | str | Path, game: str | pyspiel.Game, **params: Any
) -> float:
    """How much a best response wins against ``policy`` in ``game``, averaged over both seats
    (OpenSpiel's ``exploitability``: NashConv / 2; 0 exactly at an equilibrium).

    ``policy``: a network, an agent, or a run directory or checkpoint; ``game``: OpenSpiel's
    name (``kuhn_poker`` or ``openspiel:kuhn_poker``, with the game's ``params``) or a loaded
    game. Raises :class:`UnsupportedGameError` (:class:`GameTooLargeError` for a game too
    large) in one line.
    """
    loaded = load_game(game, **params)
    check_exact(loaded)
    if isinstance(policy, str | Path):
        policy = load_agent(policy)
    net = policy.net if isinstance(policy, Agent) else policy
    return float(openspiel_exploitability.exploitability(loaded, policy_table(net, loaded)))


def mixture_exploitability(
    nets: Sequence[RogueNet],
    weights: Sequence[float],
    game: str | pyspiel.Game,
    **params: Any,
) -> float:
    """:func:`exploitability` of the mixture that draws ``nets[i]`` with probability
    ``weights[i]`` for a whole game (in both seats), as one behaviour policy: at each
    information state, the nets' probabilities weighed by ``weights`` times the chance that
    each net's own choices lead there."""
    mixture = np.asarray(weights, dtype=np.float64)
    if len(nets) != len(mixture) or not len(nets) or (mixture < 0).any() or mixture.sum() <= 0:
        raise ValueError(
            "mixture_exploitability: expected one non-negative weight per policy (some "
            f"positive), got {len(mixture)} weights {mixture.tolist()} for {len(nets)} policies"
        )
    loaded = load_game(game, **params)
    check_exact(loaded)
    tables = [policy_table(net, loaded) for net in nets]
    players = list(range(loaded.num_players()))
    weights_list = (mixture / mixture.sum()).tolist()
    mixed = PolicyAggregator(loaded).aggregate(
        players, [tables for _ in players], [weights_list for _ in players]
    )
    return float(openspiel_exploitability.exploitability(loaded, mixed))
