"""Self-play's Polyak average of the learner's parameters (selfplay.average_rate)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from env.player_envs import Bigger
from stop_after import StopAfter

from entityrl.algorithms.self_play.average import ParameterAverage
from entityrl.envs import make_vec
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.training import Trainer, load_agent, load_config
from entityrl.training.checkpoint import load_checkpoint

QUIET = ["log.tensorboard=false", "log.progress=false", "torch_threads=1"]
SELFPLAY = [
    "algo=selfplay", "rollout.num_envs=32", "rollout.steps=8", "optim.bs=128", *QUIET,
]  # fmt: skip


def config(run_dir: Path, *extra: str):  # type: ignore[no-untyped-def]
    return load_config(None, [*SELFPLAY, f"log.run_dir={run_dir}", *extra], check_env=False)


def network() -> RogueNet:
    env = make_vec("MatrixGame", 4, seed=0, game=1)
    torch.manual_seed(0)
    return RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16, n_layer=1))


def shifted(net: RogueNet) -> None:
    with torch.no_grad():
        net.heads["choice"].proj.bias.add_(torch.tensor([4.0, 0.0, 0.0]))


@pytest.mark.parametrize("rate", [1.0, 0.25])
def test_the_average_moves_its_rate_of_the_way_to_the_parameters(rate: float) -> None:
    net = network()
    average = ParameterAverage(net, rate)
    before = {k: v.clone() for k, v in average.state_dict().items()}
    shifted(net)
    average.follow(net)
    for name, value in average.net.named_parameters():
        expected = before[name] + rate * (dict(net.named_parameters())[name] - before[name])
        torch.testing.assert_close(value, expected)
    if rate == 1.0:  # at rate 1 the average is the parameters
        for name, value in net.state_dict().items():
            torch.testing.assert_close(average.state_dict()[name], value)
    else:  # repeated, it closes the gap geometrically: (1 - rate)^n of it is left
        for _ in range(3):
            average.follow(net)
        bias = average.net.heads["choice"].proj.bias - net.heads["choice"].proj.bias
        torch.testing.assert_close(bias[0], torch.tensor(-4.0 * 0.75**4))
    for _ in range(200):
        average.follow(net)
    for name, value in net.state_dict().items():
        torch.testing.assert_close(average.state_dict()[name], value)


AVERAGED = ["total_timesteps=2048", "selfplay.mode=magnet", "selfplay.average_rate=0.3"]


def test_the_run_ends_with_the_average_as_its_agent_and_the_learner_kept(tmp_path: Path) -> None:
    Trainer(config(tmp_path / "run", *AVERAGED), Bigger).run()
    saved = load_checkpoint(tmp_path / "run")
    average, learner = saved["owned"][0]["average"], saved["selfplay"][0]["learner"]
    assert average.keys() == saved["model"].keys() == learner.keys()
    for name, value in saved["model"].items():
        torch.testing.assert_close(value, average[name])
    assert any(not learner[k].equal(average[k]) for k in learner)  # 8 updates, rate 0.3
    agent = load_agent(tmp_path / "run")
    for name, value in agent.net.state_dict().items():
        torch.testing.assert_close(value, average[name].to(value.device))


def test_without_an_average_nothing_changes(tmp_path: Path) -> None:
    Trainer(config(tmp_path / "run", "total_timesteps=512", "selfplay.mode=magnet"), Bigger).run()
    saved = load_checkpoint(tmp_path / "run")
    assert "average" not in saved["owned"][0]
    assert saved["selfplay"][0]["learner"] is None


@pytest.mark.parametrize("start", [0, 1024])
def test_a_resumed_averaged_run_continues_exactly(tmp_path: Path, start: int) -> None:
    extra = [*AVERAGED, f"selfplay.average_start={start}"]
    Trainer(config(tmp_path / "whole", *extra), Bigger).run()
    # Stopped early, the network of the checkpoint is the average of then; resumed, the
    # learner's last iterate is back in the network and goes on training.
    Trainer(config(tmp_path / "parts", *extra), Bigger, callbacks=[StopAfter(3)]).run()
    Trainer(config(tmp_path / "parts", *extra), Bigger, resume=tmp_path / "parts").run()
    a, b = load_checkpoint(tmp_path / "whole"), load_checkpoint(tmp_path / "parts")
    assert a["step"] == b["step"] == 2048
    for part in (a["model"], a["owned"][0]["average"], a["selfplay"][0]["learner"]):
        assert part is not None
    pairs = [
        (a["model"], b["model"]),
        (a["owned"][0]["average"], b["owned"][0]["average"]),
        (a["owned"][0]["magnet"], b["owned"][0]["magnet"]),
        (a["selfplay"][0]["learner"], b["selfplay"][0]["learner"]),
    ]
    for x, y in pairs:
        for name, value in x.items():
            assert value.allclose(y[name], atol=1e-6), name


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["selfplay.average_rate=1.5"], r"average_rate must be in \[0, 1\] \(0: off\), got 1.5"),
        (["selfplay.average_start=-1"], "average_start must be >= 0, got -1"),
    ],
)
def test_average_settings_out_of_range_are_named(tmp_path: Path, extra, message) -> None:
    with pytest.raises((ValueError,), match=message):
        Trainer(config(tmp_path, *extra), Bigger)
