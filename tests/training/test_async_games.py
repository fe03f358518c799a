"""Asynchronous sampling of multi-player games: workers that own whole games (self-play, and
independent learners with algo=ppo)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from env.player_envs import Bigger, Dropout, pick_zero
from stop_after import StopAfter

from entityrl.algorithms.poca.algorithm import POCA
from entityrl.algorithms.poca.critic import group_returns, group_rewards
from entityrl.env import GlobalCategoricalAction
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.env.multiplayer_workers import ProcessPlayerVecEnv
from entityrl.envs import make, make_vec
from entityrl.envs.coin_duel import ACTIONS
from entityrl.envs.slow import SlowGame
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training import Trainer, load_agent, load_config
from entityrl.training.async_games import AsyncGameSampler, portable
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError
from entityrl.training.match import play_match
from entityrl.training.players import NetworkPlayer, RandomPlayer, ScriptedPlayer, Seating

pytestmark = pytest.mark.filterwarnings(
    "ignore::entityrl.training.async_sampler.NotReproducibleWarning"
)

ASYNC_SELFPLAY = [
    "algo=selfplay", "rollout.num_envs=32", "rollout.steps=8", "optim.bs=128",
    "selfplay.snapshot_every=512", "selfplay.swap_every=512", "log.tensorboard=false",
    "log.progress=false", "torch_threads=1", "rollout.processes=2", "rollout.mode=async",
]  # fmt: skip


def config(run_dir: Path, *extra: str):  # type: ignore[no-untyped-def]
    return load_config(None, [*ASYNC_SELFPLAY, f"log.run_dir={run_dir}", *extra], check_env=False)


def metrics(run_dir: Path) -> list[dict[str, float]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def network(env: ProcessPlayerVecEnv, seed: int = 0) -> RogueNet:
    torch.manual_seed(seed)
    return RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_layer=1))


class RecordingSampler(AsyncGameSampler):
    """Keeps the acting policy's log-probabilities of the last rollout it received, before
    the learner's view replaces them."""

    acted: dict[str, np.ndarray]

    def _correct(self, rollout, lag: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
        self.acted = {name: lp.data[:, 0].copy() for name, lp in rollout.logprobs.items()}
        return super()._correct(rollout, lag)


def test_with_no_update_the_learner_s_view_of_a_worker_rollout_is_the_acting_policy() -> None:
    """Lag 0: the workers acted with the learner's parameters, so its evaluation of their
    rollout gives back their log-probabilities (ratios 1), in the rows of the learner's seats,
    with the games of both workers scored for it."""
    with ProcessPlayerVecEnv(Bigger, num_games=8, seed=0, num_workers=2) as env:
        net = network(env)
        opponent = NetworkPlayer(network(env, seed=1), torch.Generator())
        rng = np.random.default_rng(0)

        def seat() -> Seating:  # the learner in one random seat of each game
            learner = np.zeros((8, 2), dtype=bool)
            learner[np.arange(8), rng.integers(2, size=8)] = True
            return Seating(np.where(learner.reshape(-1), -1, 0), [opponent])

        sampler = RecordingSampler(env, net, 3, np.random.default_rng(1), eval_rows=7, seat=seat)
        assert sampler.num_rows == 8
        sampler.collect()
        sampler.after_update()  # no update: the next rollout was acted by these parameters
        acted, owner = sampler.acted["pick"], sampler.seating.owner
        rollout = sampler.collect()
        sampler.after_update()
    assert rollout.rewards.shape == (3, 8) and rollout.num_rows == 24
    np.testing.assert_allclose(rollout.logprobs["pick"].data[:, 0], acted, atol=1e-5)
    np.testing.assert_allclose(rollout.ratios, 1.0, atol=1e-5)
    # Bigger ends every step: each game of the three rollouts is scored, from the learner's
    # seat of it (the second rollout's are the returned one's), worker after worker.
    results = sampler.take_results()
    assert len(results) == 3 * 3 * 8
    seats = (np.flatnonzero(owner < 0) % 2).tolist()
    assert [r.seat for r in results[24:48]] == seats[:4] * 3 + seats[4:] * 3


def test_opponents_cross_to_the_workers_once_and_play_there() -> None:
    """A scripted opponent that always picks 0 runs on the workers' own games: the learner never
    loses against it. It is sent with the first request only."""
    with ProcessPlayerVecEnv(Bigger, num_games=4, seed=0, num_workers=2) as env:
        opponent = ScriptedPlayer(pick_zero, env)
        owner = np.array([-1, 0] * 2 + [0, -1] * 2)
        sampler = AsyncGameSampler(
            env, network(env), 2, np.random.default_rng(0), eval_rows=64,
            seat=lambda: Seating(owner, [opponent]),
        )  # fmt: skip
        sampler.collect()
        sampler.after_update()
        rollout = sampler.collect()
        sampler.after_update()
        assert sampler._requests()[0][-1] is None  # the workers hold it already
    picks = rollout.actions["pick"].data[:, 0].reshape(2, 4)
    np.testing.assert_array_equal(rollout.rewards, (picks > 0).astype(np.float32))
    assert {r.score for r in sampler.take_results()} <= {0.5, 1.0}


def test_an_opponent_that_cannot_cross_to_the_workers_is_named() -> None:
    class Stubborn:
        pass

    with pytest.raises(TypeError, match="got a Stubborn"):
        portable(Stubborn())  # type: ignore[arg-type]
    kind, _ = portable(RandomPlayer({}, seed=0))
    assert kind == "random"


def test_async_self_play_learns_the_dominant_pick_and_beats_random(tmp_path: Path) -> None:
    Trainer(config(tmp_path / "run", "total_timesteps=8192", "seed=1"), Bigger).run()
    logged = metrics(tmp_path / "run")
    assert [m["async/policy_lag"] for m in logged[:3]] == [0.0, 1.0, 1.0]
    agent = load_agent(tmp_path / "run", deterministic=True)
    # The untrained policy picks at random: it wins 1/3 of its games against random.
    games = PlayerVecEnv(Bigger, num_games=16, seed=3)
    player = NetworkPlayer(agent.net, torch.Generator(), deterministic=True)
    match = play_match(player, RandomPlayer(games.action_space, seed=4), games, 400)
    assert match.wins / 400 > 0.55  # picking 2 always: 2/3 won, 1/3 drawn
    assert match.losses == 0
    assert load_checkpoint(tmp_path / "run")["selfplay"][0]["pool"]["learner_elo"] > 1250


def test_async_self_play_learns_coin_duel_against_random(tmp_path: Path) -> None:
    """CoinDuel's shipped config, 20,000 steps with async workers, seed 1: the agent scores
    above what the untrained network does against a random player (0.48-0.49 for seeds 1-3
    over the same 400 games; this run 0.63, sync mode's 0.63: benchmarks/RESULTS.md)."""
    overrides = ["log.tensorboard=false", "log.progress=false", "torch_threads=1", "seed=1"]
    overrides += ["rollout.processes=2", "rollout.mode=async", "total_timesteps=20000"]
    Trainer(load_config("CoinDuel", [*overrides, f"log.run_dir={tmp_path}"])).run()
    agent = load_agent(tmp_path, seed=0)
    env = make_vec("CoinDuel", 50, seed=12345)
    opponent = RandomPlayer(env.action_space, 12345)
    result = play_match(NetworkPlayer(agent.net, agent.generator), opponent, env, 400)
    assert (result.wins + result.draws / 2) / 400 > 0.56


def test_async_self_play_against_a_fixed_random_opponent_and_independent_learners(
    tmp_path: Path,
) -> None:
    Trainer(
        config(tmp_path / "fixed", "total_timesteps=1024", "selfplay.opponent=random"), Bigger
    ).run()
    assert metrics(tmp_path / "fixed")[-1]["async/policy_lag"] == 1.0
    Trainer(config(tmp_path / "ppo", "total_timesteps=1024", "algo=ppo"), Bigger).run()
    logged = metrics(tmp_path / "ppo")
    assert [m["async/policy_lag"] for m in logged] == [0.0, 1.0]
    assert logged[-1]["async/abs_log_ratio"] > 0


def test_async_self_play_draws_its_opponents_from_the_nash_mixture(tmp_path: Path) -> None:
    extra = ["total_timesteps=2048", "selfplay.opponent_mix=nash", "selfplay.play_latest=0"]
    Trainer(config(tmp_path / "run", *extra, "selfplay.meta_games=20"), Bigger).run()
    logged = metrics(tmp_path / "run")
    assert [m["selfplay/pool"] for m in logged] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]
    assert logged[-1]["selfplay/meta_steps"] > 0 and logged[-1]["async/policy_lag"] == 1.0


def test_async_poca_corrects_its_group_returns_by_the_agents_ratios(tmp_path: Path) -> None:
    """A lagged rollout's group targets are V-trace's with the product of the group's agents'
    truncated ratios, and each agent's advantage (target - its baseline) is weighed by its own
    ratio; the first rollout (lag 0) has no ratios."""
    seen = []
    estimate = POCA.estimate

    def recording(self: POCA, rollout) -> None:  # type: ignore[no-untyped-def]
        estimate(self, rollout)
        with torch.no_grad():  # the critic's view, as estimate saw it
            values, baselines = self.critic(
                rollout.obs, rollout.actions, self._present(rollout.active)
            )
            following, _ = self.critic(rollout.next_obs, {}, self._present(rollout.next_obs.active))
        critic = (values.numpy(), baselines.numpy().reshape(-1), following.numpy())
        seen.append((self.targets, rollout, critic, self.ctx.config.ppo))

    extra = ["algo=poca", "total_timesteps=576", "rollout.num_envs=8", "rollout.steps=8"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(POCA, "estimate", recording)
        Trainer(config(tmp_path / "run", *extra), Dropout).run()
    assert [m["async/policy_lag"] for m in metrics(tmp_path / "run")] == [0.0, 1.0, 1.0]
    assert seen[0][1].ratios is None
    targets, rollout, (values, baselines, following), ppo = seen[-1]
    ratios = rollout.ratios
    assert ratios is not None and 0 < ratios.min() < 0.99 and ratios.max() == 1.0
    steps, rows = ratios.shape
    rewards = group_rewards(rollout.rewards, rollout.group_rewards, rollout.active, 3)
    over = rollout.game_over.reshape(steps, rows // 3, 3)[..., 0]
    args = (rewards, values.reshape(steps, -1), over, following, ppo.gamma, ppo.gae_lambda)
    group = ratios.reshape(steps, rows // 3, 3).prod(-1)
    np.testing.assert_allclose(targets, group_returns(*args, group), rtol=1e-5, atol=1e-5)
    assert np.abs(targets - group_returns(*args)).max() > 1e-3  # the correction matters
    weighed = (np.repeat(targets.reshape(-1), 3) - baselines) * ratios.reshape(-1)
    np.testing.assert_allclose(rollout.advantages, weighed, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("memory", [[], ["net.memory=true", "net.d_model=16", "ppo.seq_len=4"]])
def test_an_async_self_play_run_resumes_from_its_checkpoint(
    tmp_path: Path, memory: list[str]
) -> None:
    run = tmp_path / "run"
    extra = ["total_timesteps=1024", "selfplay.snapshot_every=256", "selfplay.swap_every=256"]
    extra += memory
    Trainer(config(run, *extra), Bigger, callbacks=[StopAfter(2)]).run()
    pool = load_checkpoint(run)["selfplay"][0]["pool"]
    resumed = Trainer(config(run, *extra), Bigger, resume=run).run()
    assert resumed.steps == 1024
    # After resuming, the first rollout is collected afresh by the learner's policy.
    assert [m["async/policy_lag"] for m in metrics(run)] == [0.0, 1.0, 0.0, 1.0]
    saved = load_checkpoint(run)
    assert len(saved["selfplay"][0]["pool"]["snapshots"]) > len(pool["snapshots"])
    # The opponent's memory stays in the workers; the learner's is saved as in sync mode.
    assert saved["selfplay"][0]["opponent_memory"] is None
    assert ("memory" in saved) == bool(memory)


def test_decisions_in_a_game_given_as_a_class_are_refused_when_the_sampler_is_built() -> None:
    with (
        ProcessPlayerVecEnv(Bigger, num_games=2, seed=0, num_workers=2) as env,
        pytest.raises(ConfigError, match=re.escape("does not support env.decisions in a")),
    ):
        AsyncGameSampler(env, network(env), 2, np.random.default_rng(0), 8, decisions=True)


@pytest.mark.parametrize(
    ("extra", "unsupported"),
    [
        (["env.decisions.period=2"], "env.decisions in a multi-player game"),
        (["selfplay.mode=magnet"], "selfplay.mode=magnet"),
        (["world_size=2"], "world_size=2"),
        (["rollout.processes=1"], "rollout.processes=1"),
    ],
)
def test_async_games_refuse_what_they_do_not_support(
    tmp_path: Path, extra: list[str], unsupported: str
) -> None:
    with pytest.raises(
        ConfigError, match=re.escape(f"rollout.mode=async does not support {unsupported}")
    ):
        Trainer(config(tmp_path / "run", *extra), Bigger)


def test_slow_game_waits_before_each_step_and_plays_the_wrapped_game() -> None:
    slow, plain = SlowGame("CoinDuel", step_ms=20.0), make("CoinDuel")
    slow.seed(3)
    plain.seed(3)
    assert list(slow.players()) == list(plain.players())
    first, expected = slow.reset(), plain.reset()
    for player in expected:
        np.testing.assert_array_equal(
            first[player].features["Coin"], expected[player].features["Coin"]
        )
    zap = {p: {"move": GlobalCategoricalAction(len(ACTIONS) - 1, "zap")} for p in first}
    started = time.perf_counter()
    after = slow.act(zap)
    assert time.perf_counter() - started >= 0.020
    for player, obs in plain.act(zap).items():
        np.testing.assert_array_equal(after[player].features["Self"], obs.features["Self"])
    with pytest.raises(ValueError, match="SlowGame: game must name a registered multi-player"):
        SlowGame("CherryPick")
    with pytest.raises(ValueError, match="SlowGame: step_ms must be >= 0 milliseconds, got -1"):
        SlowGame(step_ms=-1.0)


def test_with_memory_and_no_update_the_learner_replays_a_worker_rollout_as_it_was_acted() -> None:
    """net.memory: the workers carry the learner's and the opponent's states of their rows
    across rollouts; the learner's replay of its seats (from the states stored at the first
    step, reset where a seat's episode ended or it was not in play) gives back the acting
    log-probabilities and values."""
    config = RogueNetConfig(d_model=16, n_layer=1, memory=True)
    with ProcessPlayerVecEnv(Dropout, num_games=6, seed=0, num_workers=2) as env:
        torch.manual_seed(0)
        net = RogueNet(env.obs_space, env.action_space, config)
        with torch.no_grad():  # a memory that matters: a large projection of the state
            net.memory.proj.weight.mul_(20.0)  # type: ignore[union-attr]
        opponent = NetworkPlayer(
            RogueNet(env.obs_space, env.action_space, config), torch.Generator()
        )
        seating = Seating(np.array([-1, 0, 0] * 3 + [0, -1, 0] * 3), [opponent])
        sampler = RecordingSampler(
            env, net, 5, np.random.default_rng(1), eval_rows=10, seat=lambda: seating
        )
        sampler.collect()
        sampler.after_update()
        acted = sampler.acted["choice"]
        rollout = sampler.collect()
        sampler.after_update()
    assert rollout.states is not None and np.abs(rollout.states[:6]).max() > 0  # carried over
    assert rollout.dones.any() and not rollout.dones.all()
    np.testing.assert_allclose(rollout.logprobs["choice"].data[:, 0], acted, atol=1e-5)
    np.testing.assert_allclose(rollout.ratios, 1.0, atol=1e-5)


def test_async_independent_learners_with_memory_train_on_a_game(tmp_path: Path) -> None:
    extra = ["algo=ppo", "net.memory=true", "net.d_model=16", "ppo.seq_len=4"]
    extra += ["total_timesteps=576", "rollout.num_envs=8", "rollout.steps=8"]
    Trainer(config(tmp_path / "run", *extra), Dropout).run()
    logged = metrics(tmp_path / "run")
    assert [m["async/policy_lag"] for m in logged] == [0.0, 1.0, 1.0]
    assert all(np.isfinite(m["loss/policy_loss"]) for m in logged)
    assert logged[-1]["async/abs_log_ratio"] > 0
