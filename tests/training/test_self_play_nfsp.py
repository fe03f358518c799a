"""Self-play with neural fictitious self-play's average policy (selfplay.mode=nfsp)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from env.player_envs import Bigger
from stop_after import StopAfter

from entityrl.algorithms.common.optimizer import OptimConfig
from entityrl.algorithms.self_play.nfsp import AveragePolicy, Reservoir
from entityrl.env.vec_obs import VecObs
from entityrl.envs import make_vec
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.ragged import RaggedArray
from entityrl.training import Trainer, load_agent, load_config
from entityrl.training.checkpoint import load_checkpoint
from entityrl.training.config import ConfigError

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
NFSP = [
    "algo=selfplay", "selfplay.mode=nfsp", "rollout.num_envs=32", "rollout.steps=8",
    "optim.bs=128", "selfplay.nfsp_bs=64", "selfplay.nfsp_reservoir=300", *QUIET,
]  # fmt: skip


def config(run_dir: Path, *extra: str):  # type: ignore[no-untyped-def]
    return load_config(None, [*NFSP, f"log.run_dir={run_dir}", *extra], check_env=False)


def matrix_rows(n: int) -> VecObs:
    """``n`` observations of the matrix game (every one the same single decision)."""
    return make_vec("MatrixGame", 1, seed=0, game=1).reset().take(np.zeros(n, np.int64))


def choices(values: np.ndarray) -> dict[str, RaggedArray]:
    """One actor per row choosing ``values[row]``."""
    return {"choice": RaggedArray(values.reshape(-1, 1), np.ones(len(values), np.int64))}


def test_the_reservoir_keeps_a_uniform_sample_of_everything_offered() -> None:
    reservoir = Reservoir(500, {"choice": 3})
    rng = np.random.default_rng(0)
    # 40 batches of 250 rows; each row's "choice" is its order of arrival.
    for start in range(0, 10_000, 250):
        reservoir.add(matrix_rows(250), choices(np.arange(start, start + 250)), rng)
    assert len(reservoir) == 500 and reservoir.seen == 10_000
    kept = reservoir.actions["choice"].data[:, 0]
    assert len(np.unique(kept)) == 500  # no row twice
    # Uniform over the whole stream: each tenth of it holds ~50 of the 500 (a FIFO buffer
    # would hold only the last tenth). Binomial(500, 0.1) lies in [25, 75] with p > 0.9999.
    per_tenth = np.bincount(kept // 1000, minlength=10)
    assert per_tenth.min() >= 25 and per_tenth.max() <= 75, per_tenth


def test_with_recency_the_reservoir_weighs_rows_by_their_age() -> None:
    reservoir = Reservoir(500, {"choice": 3}, recency=1.0)
    rng = np.random.default_rng(0)
    for start in range(0, 10_000, 250):
        reservoir.add(matrix_rows(250), choices(np.arange(start, start + 250)), rng)
    kept = reservoir.actions["choice"].data[:, 0]
    assert len(reservoir) == 500 and len(np.unique(kept)) == 500
    # Linear weights: the j-th tenth of the stream holds (2j + 1) / 100 of the sample, 5 rows
    # of 500 in the first tenth and 95 in the last (uniform: 50 in each).
    per_tenth = np.bincount(kept // 1000, minlength=10)
    expected = 5 * (2 * np.arange(10) + 1)
    assert np.abs(per_tenth - expected).max() <= 20, per_tenth


def test_the_reservoir_fills_before_it_replaces() -> None:
    reservoir = Reservoir(100, {"choice": 3})
    reservoir.add(matrix_rows(60), choices(np.arange(60)), np.random.default_rng(0))
    reservoir.add(matrix_rows(30), choices(np.arange(60, 90)), np.random.default_rng(0))
    assert reservoir.actions["choice"].data[:, 0].tolist() == list(range(90))


def test_the_average_policy_converges_to_the_mixture_of_the_actions_it_is_shown() -> None:
    env = make_vec("MatrixGame", 1, seed=0, game=1)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_layer=1))
    average = AveragePolicy(net, OptimConfig(), 0.003, env.choices, 5000, 1, 1024)
    rng = np.random.default_rng(0)
    mixture = np.array([0.6, 0.3, 0.1])
    shown = rng.choice(3, size=5000, p=mixture)
    average.reservoir.add(matrix_rows(5000), choices(shown), rng)
    for _ in range(400):
        average.fit(net, rng)
    obs = matrix_rows(3)
    with torch.no_grad():
        out = average.net.evaluate(obs, choices(np.arange(3)))
    probs = out.heads["choice"].logprob.exp().cpu().numpy().reshape(-1)
    # The mixture shown, not the best response's single action: within sampling noise of it
    # (the 5,000 actions shown are themselves ~0.007 from it).
    assert np.abs(probs - np.bincount(shown, minlength=3) / 5000).max() < 0.03, probs


def test_the_polyak_average_starts_at_the_first_fit_and_then_follows_the_fits() -> None:
    env = make_vec("MatrixGame", 1, seed=0, game=1)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_layer=1))
    average = AveragePolicy(net, OptimConfig(), 0.01, env.choices, 500, 2, 64, polyak=0.25)
    rng = np.random.default_rng(0)
    average.reservoir.add(matrix_rows(500), choices(rng.integers(3, size=500)), rng)
    average.fit(net, rng)
    for name, value in average.net.state_dict().items():  # the initial network is left out
        assert average.agent.state_dict()[name].equal(value), name
    before = {k: v.clone() for k, v in average.agent.state_dict().items()}
    average.fit(net, rng)
    fitted = dict(average.net.named_parameters())
    moved = 0
    for name, value in average.agent.named_parameters():
        torch.testing.assert_close(value, 0.75 * before[name] + 0.25 * fitted[name])
        moved += not value.equal(fitted[name])  # a quarter of the way, not all of it
    assert moved


def test_the_run_ends_with_the_average_policy_as_its_agent(tmp_path: Path) -> None:
    Trainer(config(tmp_path / "run", "total_timesteps=2048"), Bigger).run()
    saved = load_checkpoint(tmp_path / "run")
    average, learner = saved["owned"][0]["nfsp"]["net"], saved["selfplay"][0]["learner"]
    for name, value in saved["model"].items():
        torch.testing.assert_close(value, average[name])
    assert any(not learner[k].equal(average[k]) for k in learner)
    assert saved["owned"][0]["nfsp"]["reservoir"]["seen"] > 300  # full, replacing
    agent = load_agent(tmp_path / "run")
    for name, value in agent.net.state_dict().items():
        torch.testing.assert_close(value, average[name].to(value.device))


def test_with_nfsp_polyak_the_agent_is_the_average_networks_polyak_average(
    tmp_path: Path,
) -> None:
    extra = ["total_timesteps=2048", "selfplay.nfsp_polyak=0.3"]
    Trainer(config(tmp_path / "run", *extra), Bigger).run()
    saved = load_checkpoint(tmp_path / "run")
    nfsp = saved["owned"][0]["nfsp"]
    assert nfsp["smoothed_fits"] == 2048 // (32 * 8)
    for name, value in saved["model"].items():
        torch.testing.assert_close(value, nfsp["smoothed"][name])
    assert any(not nfsp["net"][k].equal(nfsp["smoothed"][k]) for k in nfsp["net"])


@pytest.mark.parametrize(
    "extra",
    [[], ["selfplay.nfsp_polyak=0.3", "selfplay.nfsp_recency=1"]],
    ids=["fitted", "polyak-recency"],
)
def test_a_resumed_nfsp_run_continues_exactly(tmp_path: Path, extra: list[str]) -> None:
    extra = ["total_timesteps=2048", *extra]
    Trainer(config(tmp_path / "whole", *extra), Bigger).run()
    # Stopped early: the checkpoint keeps the reservoir, the average network and its
    # optimizer, and each row's draw between best response and average.
    Trainer(config(tmp_path / "parts", *extra), Bigger, callbacks=[StopAfter(3)]).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    assert a["step"] == b["step"] == 2048
    assert ("smoothed" in a["owned"][0]["nfsp"]) == bool(extra[1:])
    x, y = a["owned"][0]["nfsp"], b["owned"][0]["nfsp"]
    assert_same(x["reservoir"], y["reservoir"])
    for one, other in [
        (a["model"], b["model"]),
        (x["net"], y["net"]),
        (x.get("smoothed", {}), y.get("smoothed", {})),
        (a["selfplay"][0]["learner"], b["selfplay"][0]["learner"]),
    ]:
        for name, value in one.items():
            assert value.allclose(other[name], atol=1e-6), name


def assert_same(x: object, y: object) -> None:
    """Plain checkpoint data (dicts, lists, tensors, numbers, strings) equal throughout."""
    if isinstance(x, dict):
        assert isinstance(y, dict) and x.keys() == y.keys()
        for key in x:
            assert_same(x[key], y[key])
    elif isinstance(x, torch.Tensor):
        assert isinstance(y, torch.Tensor) and x.equal(y)
    else:
        assert x == y


@pytest.mark.parametrize(
    ("extra", "error", "message"),
    [
        (["net.memory=true"], ConfigError, "selfplay.mode=nfsp .* set net.memory=false"),
        (
            ["selfplay.opponent=random"],
            ConfigError,
            "selfplay.opponent must be empty, got 'random'",
        ),
        (
            ["selfplay.average_rate=0.1"],
            ValueError,
            r"its average policy: a Polyak average \(selfplay.average_rate\) would replace it; set 0, got 0.1",
        ),
        (["selfplay.nfsp_eta=1.5"], ValueError, r"nfsp_eta must be in \[0, 1\], got 1.5"),
        (["selfplay.nfsp_reservoir=0"], ValueError, "nfsp_reservoir must be >= 1, got 0"),
        (["selfplay.nfsp_lr=0"], ValueError, "nfsp_lr must be > 0, got 0"),
        (["selfplay.nfsp_recency=-1"], ValueError, r"nfsp_recency must be >= 0 .*got -1"),
        (["selfplay.nfsp_polyak=1.5"], ValueError, r"nfsp_polyak must be in \[0, 1\] .*got 1.5"),
    ],
)
def test_what_nfsp_does_not_support_is_refused_in_one_line(
    tmp_path: Path, extra: list[str], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        Trainer(config(tmp_path, *extra), Bigger)
    assert "\n" not in str(caught.value)
