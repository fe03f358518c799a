"""The discriminator's network options: the relative-position encoding (``gail.relpos``,
``dac.relpos``), with which its ``q`` can learn an expert whose choices only relative positions
show, and its attention heads (``gail.n_head``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from entityrl.algorithms.common.optimizer import OptimConfig
from entityrl.algorithms.gail.discriminator import Discriminator, GAILConfig, Steps
from entityrl.env import VecEnv
from entityrl.envs import make_vec
from entityrl.envs.floor_is_lava import DIRECTIONS
from entityrl.nn.relpos import RelposConfig
from entityrl.nn.rogue_net import RogueNet, RogueNetConfig
from entityrl.ragged import RaggedArray
from entityrl.training.config import load_config

NEIGHBOURS = RelposConfig(["x", "y"], [1, 1], per_entity_values=True)


def _steps(rows: int, seed: int, expert: bool) -> tuple[VecEnv, Steps]:
    """One FloorIsLava step per row: the expert steps onto the high ground, the other player
    picks any of the 8 moves."""
    env = make_vec("FloorIsLava", rows, seed=seed)
    obs = env.reset()
    if expert:
        offsets = [tuple((e.high_ground - e.player).tolist()) for e in env.envs]  # type: ignore[attr-defined]
        choices = np.array([DIRECTIONS.index(o) for o in offsets], np.int64)
    else:
        choices = np.random.default_rng(seed).integers(0, len(DIRECTIONS), rows)
    actions = {"move": RaggedArray(choices.reshape(-1, 1), np.ones(rows, np.int64))}
    return env, Steps(obs, actions, np.zeros(rows, np.bool_))


@pytest.mark.parametrize(("relpos", "least", "most"), [(NEIGHBOURS, 0.9, 1.0), (None, 0.0, 0.3)])
def test_q_learns_an_expert_that_only_relative_positions_show(
    relpos: RelposConfig | None, least: float, most: float
) -> None:
    """FloorIsLava's positions are random up to +-1000: without the encoding ``q`` stays near
    the uniform 1/8 on the expert's move (measured 0.18), with it near 1 (0.98)."""
    env, expert = _steps(256, seed=0, expert=True)
    _, policy = _steps(256, seed=1, expert=False)
    torch.manual_seed(0)
    learner = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16))
    settings = GAILConfig(structured=True, relpos=relpos, lr=0.01, absorbing=False)
    discriminator = Discriminator(
        env.obs_space, env.action_space, settings, "gail", OptimConfig(), torch.device("cpu"),
        policy=learner,
    )  # fmt: skip
    assert (discriminator.net.encoder.relpos is not None) == (relpos is not None)
    discriminator.net.update_normalizers(expert.obs)
    discriminator.update(policy, expert, np.random.default_rng(0), batches=100, bs=64, gamma=0.9)
    _, held_out = _steps(256, seed=2, expert=True)
    with torch.no_grad():
        out = discriminator.net.evaluate(held_out.obs, held_out.actions)
    q = float(out.heads["move"].logprob.exp().mean())
    assert least <= q <= most


@pytest.mark.parametrize("section", ["gail", "dac"])
def test_the_setting_is_read_from_the_config(section: str) -> None:
    config = load_config(
        "MultiSnake",
        [
            f"algo={section}",
            "bc.demos=[unused.arrow]",
            f"{section}.relpos={{position_features: [x, y], extent: [2, 2]}}",
        ],
    )
    assert getattr(config, section).relpos == RelposConfig(["x", "y"], [2, 2])
    assert (
        load_config("MultiSnake", [f"algo={section}", "bc.demos=[unused.arrow]"]).gail.relpos
        is None
    )


def test_the_heads_are_the_setting_and_must_divide_the_width() -> None:
    env = make_vec("FloorIsLava", 1, seed=0)
    settings = GAILConfig(d_model=64, n_head=4, relpos=NEIGHBOURS)
    discriminator = Discriminator(
        env.obs_space, env.action_space, settings, "gail", OptimConfig(), torch.device("cpu")
    )
    assert discriminator.net.config.n_head == 4
    assert discriminator.net.encoder.relpos is not None
    assert discriminator.net.encoder.relpos.keys.shape[1] == 64 // 4  # one head's width
    with pytest.raises(
        ValueError, match=r"gail.d_model \(32\) must be a multiple of gail.n_head \(3\)"
    ):
        GAILConfig(n_head=3)
    with pytest.raises(ValueError, match=r"gail.n_head must be > 0, got 0"):
        GAILConfig(n_head=0)


def test_sharpen_q_rewards_entropy_times_the_log_ratio_of_the_sharpened_q() -> None:
    """``sharpen_q``: the reward is ``entropy * (log q' - log pi)`` less the reference, ``q'``
    = ``q^(1 / entropy)`` normalized; checked against every move scored one at a time."""
    env, steps = _steps(8, seed=0, expert=False)
    torch.manual_seed(0)
    learner = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=16))
    settings = GAILConfig(structured=True, entropy=0.5, sharpen_q=True, relpos=NEIGHBOURS)
    discriminator = Discriminator(
        env.obs_space, env.action_space, settings, "gail", OptimConfig(), torch.device("cpu"),
        policy=learner,
    )  # fmt: skip
    # Away from the near-uniform start, so that sharpening matters.
    with torch.no_grad():
        for p in discriminator.net.parameters():
            p.add_(torch.randn_like(p))
    rewards = discriminator.rewards(steps, gamma=0.9, reference=0.3)
    with torch.no_grad():
        log_q = torch.stack(
            [
                discriminator.net.evaluate(steps.obs, {"move": _every(k, 8)}).heads["move"].logprob
                for k in range(len(DIRECTIONS))
            ],
            dim=1,
        )
        sharp = torch.log_softmax(log_q / 0.5, dim=1)
        chosen = torch.from_numpy(steps.actions["move"].data[:, 0])
        log_pi = learner.evaluate(steps.obs, steps.actions).heads["move"].logprob
    expected = 0.5 * (sharp[torch.arange(8), chosen] - log_pi) - 0.3
    np.testing.assert_allclose(rewards, expected.numpy(), rtol=1e-4, atol=1e-5)
    assert float(sharp.exp().max(1).values.mean()) > float(log_q.exp().max(1).values.mean())
    with pytest.raises(ValueError, match=r"gail.sharpen_q .* needs gail.structured=true"):
        GAILConfig(sharpen_q=True, entropy=1.0)


def _every(choice: int, rows: int) -> RaggedArray:
    return RaggedArray(np.full((rows, 1), choice, np.int64), np.ones(rows, np.int64))
