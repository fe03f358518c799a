"""Asynchronous sampling (rollout.mode=async), its V-trace correction and the slow simulator."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from entityrl.algorithms.common.gae import gae
from entityrl.env.decisions import Decisions
from entityrl.envs import make, make_vec
from entityrl.envs.slow import Slow
from entityrl.nn.recurrent import Sequences
from entityrl.nn.rogue_net import RogueNet
from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.async_sampler import AsyncSampler, NotReproducibleWarning, check_async
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import CONFIG_DIR, ConfigError, load_config
from entityrl.training.runner import Trainer

pytestmark = pytest.mark.filterwarnings(
    "ignore::entityrl.training.async_sampler.NotReproducibleWarning"
)

SMALL = [
    "rollout.num_envs=8",
    "rollout.steps=8",
    "optim.bs=32",
    "net.d_model=16",
    "total_timesteps=256",  # 4 iterations of 64 samples
    "log.tensorboard=false",
    "log.progress=false",
    "log.checkpoint_interval=64",
    "torch_threads=1",
    "rollout.processes=2",
    "rollout.mode=async",
]


def config(run_dir: Path, *extra: str, env: str = "CherryPick"):
    return load_config(env, [*SMALL, f"log.run_dir={run_dir}", *extra])


def metrics(run_dir: Path) -> list[dict[str, float]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [
        {k: v for k, v in json.loads(line).items() if k != "time" and not k.startswith("perf/")}
        for line in lines
    ]


# ---------------------------------------------------------------------------- slow simulator
def test_slow_waits_before_each_step_and_plays_the_wrapped_game() -> None:
    slow = Slow("CherryPick", step_ms=20.0, kwargs={"num_cherries": 8})
    plain = make("CherryPick", num_cherries=8)
    slow.seed(3)
    plain.seed(3)
    np.testing.assert_array_equal(slow.reset().features["Cherry"], plain.reset().features["Cherry"])
    started = time.perf_counter()
    for _ in range(4):  # no pick: the bowl stays as it is
        slow_obs, plain_obs = slow.act({}), plain.act({})
    assert time.perf_counter() - started >= 4 * 0.020
    assert slow_obs.done and plain_obs.done
    np.testing.assert_array_equal(slow_obs.features["Cherry"], plain_obs.features["Cherry"])


def test_slow_is_registered() -> None:
    with make_vec("Slow", 2, seed=0, validate=True, step_ms=0.0) as env:
        assert env.reset().num_rows == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"step_ms": -1.0}, "step_ms must be >= 0 milliseconds, got -1.0"),
        ({"env": "NoSuchEnv"}, "env must name a registered single-player environment"),
        ({"env": "CoinDuel"}, "env must be a single-player Environment; 'CoinDuel' is a"),
        ({"kwargs": {"colour": 1}}, "unknown argument 'colour'"),
    ],
)
def test_slow_refuses_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Slow(**kwargs)


# ---------------------------------------------------------------------------- V-trace
def vtrace_by_definition(rewards, values, dones, next_values, gamma, lam, ratios):
    """V-trace targets as IMPALA's sum (with the lambda trace), and their errors."""
    steps, envs = rewards.shape
    following = np.concatenate([values[1:], next_values[None]])
    alive = 1.0 - dones
    delta = rewards + gamma * alive * following - values
    targets = np.array(values, dtype=np.float64)
    for e in range(envs):
        for s in range(steps):
            trace = 1.0
            for t in range(s, steps):
                targets[s, e] += gamma ** (t - s) * trace * ratios[t, e] * delta[t, e]
                trace *= lam * ratios[t, e] * alive[t, e]
    return targets - values, targets


def test_gae_with_ratios_is_v_trace_and_with_ratios_one_is_gae() -> None:
    rng = np.random.default_rng(0)
    steps, envs = 6, 3
    rewards = rng.normal(size=(steps, envs)).astype(np.float32)
    values = rng.normal(size=(steps, envs)).astype(np.float32)
    dones = rng.random((steps, envs)) < 0.3
    next_values = rng.normal(size=envs).astype(np.float32)
    ratios = np.minimum(rng.uniform(0.2, 2.0, size=(steps, envs)), 1.0).astype(np.float32)
    args = (rewards, values, dones, next_values, 0.9, 0.8)

    advantages, returns = gae(*args, ratios)
    expected_advantages, expected_returns = vtrace_by_definition(*args, ratios)
    np.testing.assert_allclose(advantages, expected_advantages, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(returns, expected_returns, rtol=1e-5, atol=1e-5)
    assert not np.allclose(returns, gae(*args)[1], atol=1e-3)  # the ratios matter

    ones = np.ones((steps, envs), dtype=np.float32)
    for corrected, plain in zip(gae(*args, ones), gae(*args), strict=True):
        np.testing.assert_array_equal(corrected, plain)


# ---------------------------------------------------------------------------- worker calls
def _steps_taken(envs, context, steps: int) -> int:
    """In a worker: count calls, after waiting a little (the workers are busy)."""
    time.sleep(0.05)
    context["calls"] = context.get("calls", 0) + steps
    return context["calls"]


def test_a_started_call_finishes_later_and_blocks_other_requests() -> None:
    with make_vec("CherryPick", 4, seed=0, processes=2) as env:
        env.reset()
        env.start_call(_steps_taken, [(1,), (1,)])
        with pytest.raises(RuntimeError, match=r"still running '_steps_taken'.*finish_call"):
            env.reset()
        assert env.finish_call() == [1, 1]
        with pytest.raises(RuntimeError, match="no call is running"):
            env.finish_call()
        assert env.call(_steps_taken, [(2,), (3,)]) == [3, 4]


# ---------------------------------------------------------------------------- training
def test_an_async_run_measures_its_lag_and_repeats_from_its_seed(tmp_path: Path) -> None:
    with pytest.warns(NotReproducibleWarning, match="resumed from a checkpoint is not bit-repro"):
        Trainer(config(tmp_path / "a")).run()
    Trainer(config(tmp_path / "b")).run()
    first = metrics(tmp_path / "a")
    assert [m["async/policy_lag"] for m in first] == [0.0, 1.0, 1.0, 1.0]
    assert all(m["async/abs_log_ratio"] > 0 for m in first[1:])
    assert "async/abs_log_ratio" not in first[0]  # collected by the learner's own policy
    # The lag is one update, whatever the timing: the same seed gives the same run.
    assert first == metrics(tmp_path / "b")


def interrupt_after(iterations: int):
    """An on_iteration hook that delivers a real Ctrl-C (SIGINT) after some iterations."""
    seen = []

    def hook(metrics: dict) -> None:
        seen.append(metrics)
        if len(seen) == iterations:
            os.kill(os.getpid(), signal.SIGINT)

    return hook


def test_an_async_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = Trainer(config(run), on_iteration=interrupt_after(2)).run()
    assert first.interrupted and first.steps == 128
    resumed = Trainer(config(run), resume=run).run()
    assert resumed.steps == 256 and not resumed.interrupted
    # After resuming, the first rollout is collected afresh by the learner's policy.
    assert [m["async/policy_lag"] for m in metrics(run)] == [0.0, 1.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("extra", "env", "unsupported"),
    [
        (["algo=dqn"], "CherryPick", "algo=dqn"),
        (["world_size=2"], "CherryPick", "world_size=2"),
        (["env.decisions.period=2"], "CoinDuel", "env.decisions in a multi-player game"),
        (["rollout.processes=1"], "CherryPick", "rollout.processes=1"),
    ],
)
def test_async_refuses_what_it_does_not_support(
    tmp_path: Path, extra: list[str], env: str, unsupported: str
) -> None:
    with pytest.raises(
        ConfigError, match=re.escape(f"rollout.mode=async does not support {unsupported}")
    ):
        Trainer(config(tmp_path / "run", *extra, env=env))


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        (ConfigError, ValueError), match=r"rollout\.mode must be 'sync' or 'async', got 'fast'"
    ):
        config(tmp_path, "rollout.mode=fast")


def test_async_ppo_learns(tmp_path: Path) -> None:
    overrides = ["log.tensorboard=false", "log.progress=false", "seed=1", "torch_threads=1"]
    overrides += ["rollout.processes=2", "rollout.mode=async", f"log.run_dir={tmp_path}"]
    Trainer(load_config(CONFIG_DIR / "multi_armed_bandit.yaml", overrides)).run()
    agent = load_agent(tmp_path, seed=0)
    with make_eval_env(agent, num_envs=16, seed=12345) as env:
        assert evaluate(agent, env, 100).mean() >= 0.95


def test_a_lagged_rollout_reaches_the_learner_with_its_view_and_truncated_ratios() -> None:
    net_config = load_config("CherryPick", ["net.d_model=16"]).net
    with make_vec("CherryPick", 4, seed=0, processes=2) as env:
        net = RogueNet(env.obs_space, env.action_space, net_config, device="cpu")
        sampler = AsyncSampler(env, net, steps=4, rng=np.random.default_rng(0), eval_rows=5)
        assert sampler.collect().ratios is None  # acted by the learner itself
        acting = copy.deepcopy(net)  # the parameters the next rollout is being collected with
        with torch.no_grad():  # stands for the learner's update
            for p in net.parameters():
                p.add_(0.1 * torch.randn_like(p))
        assert sampler.after_update()["async/policy_lag"] == 0.0
        lagged = sampler.collect()
        sampler.after_update()
    with torch.no_grad():
        learner = net.evaluate(lagged.obs, lagged.actions)
        behaviour = acting.evaluate(lagged.obs, lagged.actions)
    logprob, acted = learner.heads["Pick Cherry"].logprob, behaviour.heads["Pick Cherry"].logprob
    np.testing.assert_allclose(lagged.logprobs["Pick Cherry"].data[:, 0], logprob, atol=1e-5)
    np.testing.assert_allclose(lagged.values, learner.values, atol=1e-5)
    # One actor per row here: a row's ratio is its one action's.
    ratios = np.minimum(np.exp((logprob - acted).numpy()), 1.0)
    np.testing.assert_allclose(lagged.ratios.reshape(-1), ratios, rtol=1e-4)
    assert 0 < lagged.ratios.min() < 0.99 and lagged.ratios.max() == 1.0


# ---------------------------------------------------------------------------- memory
class RecordingSampler(AsyncSampler):
    """Keeps what the acting policy stored of the last rollout it received, before the
    learner's view replaces it."""

    acted: tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]

    def _correct(self, rollout, lag: int) -> dict[str, float]:
        logprobs = {name: lp.data[:, 0].copy() for name, lp in rollout.logprobs.items()}
        self.acted = (logprobs, rollout.values.copy(), rollout.next_values.copy())
        return super()._correct(rollout, lag)


def test_with_memory_the_learner_replays_each_environment_from_its_stored_state() -> None:
    """With the acting policy's parameters, the learner's replay (whole environments, from the
    state stored at the rollout's first step, reset after episode ends, in batches of whole
    environments) gives the acting policy's log-probabilities and values: ratios 1."""
    net_config = load_config("Recall", ["net.d_model=16"]).net
    assert net_config.memory
    steps, envs = 7, 6  # rollouts start mid-episode (Recall's episodes last 5 steps)
    with make_vec("Recall", envs, seed=0, processes=2) as env:
        torch.manual_seed(0)
        net = RogueNet(env.obs_space, env.action_space, net_config, device="cpu")
        # 16 rows: two environments per batch, the last batch one.
        sampler = RecordingSampler(env, net, steps, rng=np.random.default_rng(0), eval_rows=16)
        sampler.collect()
        sampler.after_update()  # no update: the next rollout was acted by these parameters
        acted_logprobs, acted_values, acted_next_values = sampler.acted
        rollout = sampler.collect()
        sampler.after_update()
    # The states were carried over from the first rollout; episodes end within this one.
    first_states = rollout.states[:envs]
    assert (np.abs(first_states).max(axis=1) > 0).sum() >= envs // 2
    assert rollout.dones.any() and not rollout.dones.all()
    for name, logprob in acted_logprobs.items():
        np.testing.assert_allclose(rollout.logprobs[name].data[:, 0], logprob, atol=1e-5)
    np.testing.assert_allclose(rollout.values, acted_values, atol=1e-5)
    np.testing.assert_allclose(rollout.next_values, acted_next_values, atol=1e-5)
    np.testing.assert_allclose(rollout.ratios, 1.0, atol=1e-5)
    # The states matter: every row replayed afresh gives other values.
    rows = rollout.num_rows
    fresh = Sequences(torch.zeros(rows, net_config.d_model), torch.ones(rows, 1))
    with torch.no_grad():
        afresh = net.evaluate(rollout.obs, rollout.actions, fresh).values.numpy()
    assert np.abs(afresh - acted_values).max() > 1e-3


def test_with_memory_a_lagged_rollout_gets_the_learner_s_replay_and_ratios() -> None:
    net_config = load_config("Recall", ["net.d_model=16"]).net
    with make_vec("Recall", 4, seed=1, processes=2) as env:
        torch.manual_seed(1)
        net = RogueNet(env.obs_space, env.action_space, net_config, device="cpu")
        sampler = AsyncSampler(env, net, steps=6, rng=np.random.default_rng(1), eval_rows=64)
        sampler.collect()
        with torch.no_grad():  # stands for the learner's update
            for p in net.parameters():
                p.add_(0.1 * torch.randn_like(p))
        metrics = sampler.after_update()
        lagged = sampler.collect()
        sampler.after_update()
    assert metrics["async/policy_lag"] == 0.0
    # The learner's replay of each environment's rollout, one environment at a time.
    for e in range(4):
        rows = lagged.environment_rows(np.array([e]))
        assert rows.tolist() == [t * 4 + e for t in range(6)]
        actions = {name: a.take(rows) for name, a in lagged.actions.items()}
        with torch.no_grad():
            out = net.evaluate(lagged.obs.take(rows), actions, lagged.sequences(rows, 6))
        np.testing.assert_allclose(lagged.values[rows], out.values, atol=1e-5)
        logprob = out.heads["answer"].logprob.numpy()
        np.testing.assert_allclose(
            lagged.logprobs["answer"].take(rows).data[:, 0], logprob, atol=1e-5
        )
    assert 0 < lagged.ratios.min() < 0.99


def test_async_ppo_with_memory_learns_recall(tmp_path: Path) -> None:
    overrides = ["log.tensorboard=false", "log.progress=false", "seed=1", "torch_threads=1"]
    overrides += ["rollout.processes=2", "rollout.mode=async", f"log.run_dir={tmp_path}"]
    Trainer(load_config("Recall", overrides)).run()
    lags = [m["async/policy_lag"] for m in metrics(tmp_path)]
    assert lags[0] == 0.0 and set(lags[1:]) == {1.0}
    agent = load_agent(tmp_path, seed=0)
    with make_eval_env(agent, num_envs=16, seed=123) as env:
        # Without memory no policy expects more than 0.5.
        assert evaluate(agent, env, 400).mean() >= 0.9


def test_an_async_memory_run_resumes_with_its_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    memory = ["net.memory=true", "ppo.seq_len=4"]
    first = Trainer(config(run, *memory), on_iteration=interrupt_after(2)).run()
    assert first.interrupted and first.steps == 128
    saved = load_checkpoint(run)["memory"][0]
    assert saved.shape == (8, 16) and saved.abs().sum() > 0

    sent: list[torch.Tensor] = []
    requests = AsyncSampler._requests

    def recording(self: AsyncSampler) -> list:
        sent.append(self.state.clone())
        return requests(self)

    monkeypatch.setattr(AsyncSampler, "_requests", recording)
    resumed = Trainer(config(run, *memory), resume=run).run()
    assert resumed.steps == 256 and not resumed.interrupted
    # The environments continue their episodes, and the policy its memory of them.
    assert torch.equal(sent[0], saved)
    assert [m["async/policy_lag"] for m in metrics(run)] == [0.0, 1.0, 0.0, 1.0]


# ---------------------------------------------------------------------------- decisions
def test_async_sampling_with_decisions_is_accepted() -> None:
    from entityrl.algorithms.ppo.algorithm import PPO

    config = load_config("CherryPick", ["env.decisions.period=2", *SMALL[-2:]])
    PPO.check(config)
    check_async(config, PPO)


@pytest.mark.parametrize("memory", [False, True], ids=["plain", "memory"])
def test_with_decisions_rows_without_one_have_ratio_one_and_decisions_weigh_theirs(
    memory: bool,
) -> None:
    net_config = load_config("CherryPick", ["net.d_model=16", f"net.memory={memory}"]).net
    decisions = Decisions(period=3, offset=1)
    with make_vec("CherryPick", 4, seed=0, processes=2, decisions=decisions) as env:
        torch.manual_seed(0)
        net = RogueNet(env.obs_space, env.action_space, net_config, device="cpu")
        sampler = AsyncSampler(
            env, net, steps=6, rng=np.random.default_rng(0), eval_rows=12, decisions=True
        )
        sampler.collect()
        with torch.no_grad():  # stands for the learner's update
            for p in net.parameters():
                p.add_(0.1 * torch.randn_like(p))
        sampler.after_update()
        lagged = sampler.collect()
        sampler.after_update()
    assert lagged.decisions and (lagged.states is not None) == memory
    deciding = lagged.actions["Pick Cherry"].lengths.reshape(6, 4) > 0
    assert deciding.any() and not deciding.all()
    assert (lagged.ratios[~deciding] == 1.0).all()
    assert lagged.ratios[deciding].min() < 0.99
    lagged.estimate_advantages(lagged.rewards, 0.9, 0.8)
    corrected = lagged.advantages.copy()
    lagged.ratios = None
    lagged.estimate_advantages(lagged.rewards, 0.9, 0.8)
    # Only decisions are samples, and their ratios changed their advantages.
    assert lagged.samples is not None and not (lagged.samples & ~deciding).any()
    assert not np.allclose(corrected, lagged.advantages, atol=1e-4)
    np.testing.assert_array_equal(corrected[~lagged.samples.reshape(-1)], 0.0)


def test_async_ppo_with_decisions_learns(tmp_path: Path) -> None:
    """MoveToOrigin with a decision every other step (the thrust repeated between): an
    untrained policy scores about -0.3, the optimum is 1."""
    overrides = ["log.tensorboard=false", "log.progress=false", "seed=1", "torch_threads=1"]
    overrides += ["rollout.processes=2", "rollout.mode=async", f"log.run_dir={tmp_path}"]
    overrides += ["env.decisions.period=2", "total_timesteps=51200"]
    Trainer(load_config("MoveToOrigin", overrides)).run()
    logged = metrics(tmp_path)
    assert [m["async/policy_lag"] for m in logged[:2]] == [0.0, 1.0]
    assert all(m["async/abs_log_ratio"] > 0 for m in logged[1:])
    agent = load_agent(tmp_path, seed=0)
    with make_eval_env(agent, num_envs=16, seed=123) as env:
        assert evaluate(agent, env, 200).mean() >= 0.8
