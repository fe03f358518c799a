"""One policy with every kind of action learns its continuous part (fixed seed, real
threshold): the Mixed environment rewards each moving robot's ``move`` for being near a target
shown in the global features, while categorical, select-entity and global actions are taken
alongside in the same network."""

from __future__ import annotations

from pathlib import Path

from entityrl.training import evaluate, load_agent, make_eval_env
from entityrl.training.config import load_config
from entityrl.training.runner import Trainer

# A random policy returns about -11.2 per episode (two robots, two components, four steps);
# taking the centre of the bounds every time, -8.
SETTINGS = [
    "env.id=mixed_actions:Mixed", "total_timesteps=40960", "seed=1", "torch_threads=1",
    "ppo.gamma=0", "ppo.ent_coef=0", "ppo.update_epochs=8", "optim.bs=512", "optim.lr=0.002",
    "net.precision=float32", "log.tensorboard=false", "log.progress=false",
]  # fmt: skip


def test_a_policy_mixing_every_kind_of_action_learns_its_continuous_action(
    tmp_path: Path,
) -> None:
    config = load_config(None, [*SETTINGS, f"log.run_dir={tmp_path}"], check_env=False)
    Trainer(config).run()
    agent = load_agent(tmp_path, seed=0)
    with make_eval_env(agent, num_envs=16, seed=12345) as env:
        assert evaluate(agent, env, 200).mean() > -6.0
