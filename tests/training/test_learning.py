"""Learning: with fixed seeds, each shipped config trains an agent that reaches a threshold
near its environment's optimum (the budget is shortened where the full one is slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from entityrl.nn.kernels.build import torch_path
from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.config import CONFIG_DIR, load_config
from entityrl.training.runner import Trainer

QUIET = ["log.tensorboard=false", "log.progress=false", "seed=1"]

# (config, extra overrides, evaluation episodes, lowest mean return accepted)
CASES = [
    ("xor", [], 400, 0.95),
    # Seeds 1-8 of the shipped config: 0.94-1.0 with PPO's torch loss (the numpy copy it
    # replaced: 0.33-1.0, one seed stalled); a lone seed moves by a few hundredths.
    ("count", [], 400, 0.9),
    ("multi_armed_bandit", [], 100, 0.95),
    ("not_hotdog", [], 400, 0.99),
    ("rock_paper_scissors", [], 2000, 0.9),
    ("rock_paper_scissors", ["env.kwargs.cheat=true"], 400, 1.95),
    ("floor_is_lava", [], 400, 0.95),
    ("move_to_origin", ["total_timesteps=65536"], 100, 0.85),
    ("continuous_move_to_origin", ["total_timesteps=65536"], 100, 0.85),
    ("cherry_pick", ["total_timesteps=40960"], 200, 0.85),
    ("cherry_pick_batched", ["total_timesteps=40960"], 200, 0.85),
    ("mine_sweeper", ["total_timesteps=81920"], 200, 0.85),
    # Smaller instances than the shipped configs train on, to fit the time of a test.
    ("pick_matching_balls", ["total_timesteps=61440", "env.kwargs.max_balls=8"], 200, 0.95),
    # Without traps and with a larger entropy bonus, every seed tried (1-8) reaches 5.0 within
    # 307,200 steps (about 20 s); at half that budget 3 of 7 stalled at one or two treasures,
    # and with the shipped 0.02 about half of them do.
    (
        "treasure_hunt",
        ["total_timesteps=307200", "env.kwargs.num_traps=0", "ppo.ent_coef=0.05"],
        100,
        4.5,
    ),
    ("minefield", [], 200, 0.8),
    (
        "multi_snake",
        ["total_timesteps=81920", "env.kwargs.max_snake_length=3", "env.kwargs.board_size=6"],
        200,
        0.7,
    ),
]


def trained_return(tmp_path: Path, name: str, overrides: list[str], episodes: int) -> float:
    config = load_config(
        CONFIG_DIR / f"{name}.yaml", [*QUIET, f"log.run_dir={tmp_path}", *overrides]
    )
    Trainer(config).run()
    agent = load_agent(tmp_path, seed=0)
    with make_eval_env(agent, num_envs=16, seed=12345) as env:
        return evaluate(agent, env, episodes).mean()


@pytest.mark.parametrize(
    ("name", "overrides", "episodes", "threshold"),
    CASES,
    ids=[f"{c[0]}{'-' + '-'.join(c[1]) if c[1] else ''}" for c in CASES],
)
def test_reaches_threshold(
    tmp_path: Path, name: str, overrides: list[str], episodes: int, threshold: float
) -> None:
    assert trained_return(tmp_path, name, overrides, episodes) >= threshold


@pytest.mark.parametrize(
    ("name", "overrides", "episodes", "threshold"),
    CASES,
    ids=[f"{c[0]}{'-' + '-'.join(c[1]) if c[1] else ''}" for c in CASES],
)
def test_torch_path_reaches_threshold(
    tmp_path: Path, name: str, overrides: list[str], episodes: int, threshold: float
) -> None:
    # What runs on a GPU, or on a CPU without a compiler: no C++ kernel.
    with torch_path():
        assert trained_return(tmp_path, name, overrides, episodes) >= threshold


def test_floor_is_lava_needs_relative_positions(tmp_path: Path) -> None:
    assert trained_return(tmp_path, "floor_is_lava", ["net.relpos=null"], 400) < 0.3
