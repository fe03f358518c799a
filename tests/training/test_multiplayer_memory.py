"""net.memory in multi-player games: each player's state of each row (seat), carried from step
to step, afresh where the seat's episode starts; the rollout's replay; matches; resuming."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from env.player_envs import Dropout, Reinforcements
from stop_after import StopAfter

from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.envs import make_vec
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.ragged import RaggedArray
from entityrl.training import Agent, Trainer, load_config
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.match import play_group, play_match
from entityrl.training.player_sampler import PlayerSampler
from entityrl.training.players import Actions, NetworkPlayer, Player, PlayerStates, Seating

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
# Small networks with memory, chunks of 4 steps.
MEMORY = ["net.memory=true", "net.d_model=16", "net.n_layer=1", "ppo.seq_len=4", *QUIET]


def network(env: PlayerVecEnv, seed: int) -> RogueNet:
    torch.manual_seed(seed)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, memory=True))
    with torch.no_grad():  # a memory that matters: a large projection of the state
        net.memory.proj.weight.mul_(20.0)  # type: ignore[union-attr]
    return net


class Recorder:
    """Plays as ``inner`` and records, every step, its rows' observations and states."""

    def __init__(self, inner: NetworkPlayer) -> None:
        self.inner = inner
        self.seen: list[tuple[VecObs, torch.Tensor]] = []

    def initial_state(self, rows: npt.NDArray[np.int64]) -> torch.Tensor | None:
        return self.inner.initial_state(rows)

    def act(self, obs: VecObs, state: torch.Tensor) -> tuple[Actions, Any]:
        self.seen.append((obs, state.clone()))
        return self.inner.act(obs, state)

    def check(self, game_over: npt.NDArray[np.bool_]) -> None:
        """:func:`check_states` of what it recorded; ``game_over`` (steps, its rows)."""
        obs = [o for o, _ in self.seen]
        active = np.stack([o.active for o in obs])  # type: ignore[misc]
        check_states(self.inner.net, obs, [s for _, s in self.seen], active, game_over)


def check_states(
    net: RogueNet,
    obs: list[VecObs],
    states: list[torch.Tensor],
    active: npt.NDArray[np.bool_],
    game_over: npt.NDArray[np.bool_],
) -> None:
    """The states a player acted from (``states``, per step, of the rows of ``obs``) against
    ``net`` stepped by hand one row at a time: a row's episode starts at the first step, after
    its game ended and when its player joins; from there on, each state is the one the network
    left after the row's step before. Checked where the row was ``active`` (in play);
    ``game_over`` (steps, rows): the row's game ended with the step."""
    starts = np.ones_like(active)
    starts[1:] = game_over[:-1] | ~active[:-1]
    # Both kinds of step occur: carried over, and an episode starting after the first step.
    assert (active & ~starts).any() and (active & starts)[1:].any()
    for row in range(active.shape[1]):
        state = net.initial_state(1)
        for t, step_obs in enumerate(obs):
            if starts[t, row]:
                state = net.initial_state(1)
            if active[t, row]:
                torch.testing.assert_close(
                    states[t][row : row + 1], state, atol=1e-5, rtol=1e-5, msg=f"{row=}, {t=}"
                )
            state = net.act(step_obs.take(np.array([row])), state=state).state


def alternating_seats(env: PlayerVecEnv, opponent: Player) -> Seating:
    """The learner in seat ``g % players`` of game ``g``, ``opponent`` in the others."""
    players = len(env.players)
    owner = np.zeros((env.num_games, players), np.int64)
    owner[np.arange(env.num_games), np.arange(env.num_games) % players] = -1
    return Seating(owner.reshape(-1), [opponent])


GAMES = {
    # Players leave mid-game; games are cut off after 3 steps (truncated) and restart.
    "leaving": functools.partial(Dropout, limit=3),
    # A player joins after the first step.
    "joining": Reinforcements,
}


@pytest.mark.parametrize("opponent", [False, True], ids=["learner everywhere", "opponent"])
@pytest.mark.parametrize("game", list(GAMES))
def test_each_seat_s_state_is_carried_and_starts_afresh_with_its_episode(
    game: str, opponent: bool
) -> None:
    env = PlayerVecEnv(GAMES[game], num_games=4, seed=0)
    net = network(env, 0)
    recorder = Recorder(NetworkPlayer(network(env, 1), torch.Generator()))
    seating = alternating_seats(env, recorder) if opponent else None
    sampler = PlayerSampler(env, net, steps=5, seat=None if seating is None else lambda: seating)
    # Two rollouts: the states carry over from one to the next.
    rollouts = [sampler.collect(), sampler.collect()]
    rows = sampler.num_rows
    obs, states = [], []
    for rollout in rollouts:
        assert rollout.states is not None
        for t in range(5):
            obs.append(rollout.obs.take(np.arange(t * rows, (t + 1) * rows)))
            states.append(torch.from_numpy(rollout.states[t * rows : (t + 1) * rows]))
    active = np.concatenate([r.active for r in rollouts])  # type: ignore[misc]
    game_over = np.concatenate([r.game_over for r in rollouts])  # type: ignore[misc]
    check_states(net, obs, states, active, game_over)
    if opponent:
        # The opponent's rows: their games' ends are those of the learner's row (one a game).
        theirs = np.flatnonzero(alternating_seats(env, recorder).owner >= 0)
        recorder.check(game_over[:, theirs // len(env.players)])


@pytest.mark.parametrize("game", list(GAMES))
def test_an_agent_starts_each_seat_afresh_with_its_episode(game: str) -> None:
    """Evaluation and play act through Agent.act: a seat's state starts afresh where its
    episode does, also after steps out of play."""
    env = PlayerVecEnv(GAMES[game], num_games=4, seed=0)
    agent = Agent(network(env, 0), seed=0)
    obs = env.reset()
    seen, states, game_over = [], [], []
    for _ in range(10):
        actions = agent.act(obs)
        assert agent.acted_from is not None
        seen.append(obs)
        states.append(agent.acted_from.clone())
        obs = env.act(actions)
        game_over.append(obs.game_over)
    active = np.stack([o.active for o in seen])  # type: ignore[misc]
    check_states(agent.net, seen, states, active, np.stack(game_over))  # type: ignore[arg-type]


def test_chunks_replay_the_states_of_seats_that_left_and_restarted() -> None:
    """The rollout's dones reset the replayed state wherever the sampler's started afresh
    (players leave, games restart inside the chunks), so the update's replay gives back every
    stored log-probability and value."""
    env = PlayerVecEnv(functools.partial(Dropout, limit=3), num_games=4, seed=0)
    opponent = NetworkPlayer(network(env, 1), torch.Generator())
    seating = alternating_seats(env, opponent)
    sampler = PlayerSampler(env, network(env, 0), steps=8, seat=lambda: seating)
    sampler.collect()  # the second rollout starts mid-game, from carried states
    rollout = sampler.collect()
    rollout.estimate_advantages(rollout.rewards, 0.99, 0.95)
    rows = rollout.shuffled_rows(np.random.default_rng(1), 4)
    batch = rollout.minibatch(rows, rollout.advantages[rows], seq_len=4)
    with torch.no_grad():
        replayed = sampler.net.evaluate(batch.obs, batch.actions, batch.sequences)
    torch.testing.assert_close(
        replayed.heads["choice"].logprob, batch.logprobs["choice"], atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(replayed.values, batch.values, atol=1e-5, rtol=1e-5)


class CountingPlayer:
    """Its state of a row: how many times it acted there since the row's episode started."""

    def initial_state(self, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return np.zeros(rows.shape[0], np.int64)

    def act(
        self, obs: VecObs, state: npt.NDArray[np.int64]
    ) -> tuple[Actions, npt.NDArray[np.int64]]:
        return {}, state + 1


def test_a_player_keeps_its_own_state_of_each_row_until_the_row_s_episode_ends() -> None:
    states = PlayerStates(4)
    a, b = CountingPlayer(), CountingPlayer()
    obs = VecObs({}, np.zeros((2, 0), np.float32), {}, np.zeros(2, np.float32), np.zeros(2, bool))
    states.act(a, obs, np.array([0, 1]))
    states.act(b, obs, np.array([2, 3]))
    states.act(a, obs, np.array([0, 2]))  # a takes over row 2 from b
    assert states.get(a).tolist() == [2, 1, 1, 0] and states.get(b).tolist() == [0, 0, 1, 1]
    states.restart(np.array([False, True, True, False]))
    assert states.get(a).tolist() == [2, 0, 0, 0] and states.get(b).tolist() == [0, 0, 0, 1]
    states.keep([b])
    assert states.get(a).tolist() == [0, 0, 0, 0]  # forgotten: it starts afresh


class Staying(NetworkPlayer):
    """A network's memory, but always "stay": every Dropout game lasts its ``limit`` steps."""

    def act(self, obs: VecObs, state: torch.Tensor | None) -> tuple[Actions, Any]:
        actions, state = super().act(obs, state)
        choice = actions["choice"]
        return {"choice": RaggedArray(np.zeros_like(choice.data), choice.lengths)}, state


def game_ends(steps: int, rows: int) -> npt.NDArray[np.bool_]:
    """``game_over`` (steps, rows) of Dropout games of 3 steps where nobody leaves."""
    return np.broadcast_to((np.arange(steps) % 3 == 2)[:, None], (steps, rows)).copy()


def test_matches_carry_each_player_s_state_and_start_it_afresh_every_game() -> None:
    env = PlayerVecEnv(functools.partial(Dropout, limit=3), num_games=2, seed=0)
    players = [Recorder(Staying(network(env, seed), torch.Generator())) for seed in (0, 1)]
    play_match(players[0], players[1], env, games=4, seats=[0])
    for player, rows in zip(players, (2, 4), strict=True):
        assert len(player.seen) == 6  # two games of 3 steps in each game slot
        player.check(game_ends(6, rows))
    group = Recorder(Staying(network(env, 0), torch.Generator()))
    play_group(group, env, games=4)
    group.check(game_ends(6, env.num_envs))


def resume_configs(tmp_path: Path, game: str, extra: list[str]) -> tuple[Any, Any]:
    def config(run_dir: Path) -> Any:
        return load_config(game, [*MEMORY, *extra, f"log.run_dir={run_dir}"])

    return config(tmp_path / "whole"), config(tmp_path / "parts")


@pytest.mark.parametrize(
    ("game", "extra"),
    [
        (
            "CoinDuel",
            [
                "algo=selfplay", "rollout.num_envs=8", "rollout.steps=8", "optim.bs=32",
                "total_timesteps=384", "selfplay.snapshot_every=128", "selfplay.swap_every=192",
            ],
        ),
        (
            "GuardedExit",
            [
                "algo=poca", "rollout.num_envs=4", "rollout.steps=8", "optim.bs=48",
                "poca.d_model=16", "poca.epochs=2", "total_timesteps=576",
            ],
        ),
    ],
    ids=["selfplay", "poca"],
)  # fmt: skip
def test_a_resumed_run_with_memory_continues_exactly(
    tmp_path: Path, game: str, extra: list[str]
) -> None:
    whole, parts = resume_configs(tmp_path, game, extra)
    Trainer(whole).run()
    # 64 samples an iteration: self-play stops after the opponent changed (at 192 samples)
    # and resumes with it, so the opponent's memory must come back from the checkpoint.
    Trainer(parts, callbacks=[StopAfter(4)]).run()
    Trainer(parts, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    assert a["step"] == b["step"]
    for name, value in a["model"].items():
        assert torch.equal(value, b["model"][name]), name
    assert torch.equal(a["memory"][0], b["memory"][0]) and a["memory"][0].abs().sum() > 0
    if "selfplay" in a:
        memory = a["selfplay"][0]["opponent_memory"]
        assert memory is not None and memory.abs().sum() > 0
        assert torch.equal(memory, b["selfplay"][0]["opponent_memory"])
        assert a["selfplay"][0]["pool"]["ratings"] == b["selfplay"][0]["pool"]["ratings"]
    if "poca" in a:
        for name, value in a["poca"][0]["critic"].items():
            assert torch.equal(value, b["poca"][0]["critic"][name]), name


def test_independent_learners_with_memory_train_on_a_multi_player_game(tmp_path: Path) -> None:
    overrides = [
        *MEMORY, "algo=ppo", "rollout.num_envs=4", "rollout.steps=8", "optim.bs=32",
        "total_timesteps=256", f"log.run_dir={tmp_path}",
    ]  # fmt: skip
    result = Trainer(load_config("PackHunt", overrides)).run()
    assert result.steps >= 256
    # One state per seat of every game.
    seats = make_vec("PackHunt", 4).num_envs
    assert load_checkpoint(tmp_path)["memory"][0].shape == (seats, 16)
