"""Trains enn-trainer 0.1.16 on one entity-gym example and times its training loop (the peer
half of benchmarks/throughput.py).

Runs under the reference stack's interpreter; prints one JSON line. The loop is timed from the
start of the first rollout to the end of the last iteration (after its logging), as on the
entityrl side: imports, environment and network construction are left out.
usage: python throughput_peer.py ENV PROCESSES TOTAL_TIMESTEPS SEED DATA_DIR [CUDA (0/1)]
"""

import json
import sys
import time

from enn_trainer.config import EnvConfig, OptimizerConfig, PPOConfig, RolloutConfig, TrainConfig
from enn_trainer.rollout import Rollout
from enn_trainer.train import State, init_train_state, train
from entity_gym.examples import ENV_REGISTRY
from hyperstate import StateManager
from rogue_net.rogue_net import RogueNetConfig


def main() -> None:
    name, processes, total, seed, data_dir = sys.argv[1:6]
    cuda = len(sys.argv) > 6 and sys.argv[6] == "1"
    config = TrainConfig(
        env=EnvConfig(id=name, validate=False),
        net=RogueNetConfig(d_model=32, n_layer=2, n_head=2),
        optim=OptimizerConfig(lr=0.001, bs=1024, update_epochs=3, max_grad_norm=2.0),
        ppo=PPOConfig(
            gamma=0.99,
            gae_lambda=0.95,
            norm_adv=True,
            clip_coef=0.2,
            clip_vloss=True,
            ent_coef=0.1,
            anneal_entropy=True,
            vf_coef=0.5,
        ),
        rollout=RolloutConfig(num_envs=128, steps=16, processes=int(processes)),
        total_timesteps=int(total),
        seed=int(seed),
        cuda=cuda,
        track=False,
        data_dir=data_dir,
    )
    manager = StateManager(TrainConfig, State, init_train_state, None)
    manager._config = config  # as enn-trainer's own tests configure a run in code

    marks: dict[str, float] = {}
    returns: list[float] = []
    collect = Rollout.run

    def timed_collect(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        marks.setdefault("first_rollout", time.perf_counter())
        result = collect(self, *args, **kwargs)
        episodic = result[2].get("episodic_reward")
        if episodic is not None and episodic.count:
            returns.append(episodic.mean)
        return result

    step = manager.step

    def timed_step() -> None:  # called once at the end of every iteration
        marks["last_iteration"] = time.perf_counter()
        step()

    Rollout.run = timed_collect
    manager.step = timed_step
    train(manager, ENV_REGISTRY[name])
    seconds = marks["last_iteration"] - marks["first_rollout"]
    steps = manager.state.step
    print(
        json.dumps(
            {
                "steps": steps,
                "seconds": seconds,
                "sps": steps / seconds,
                "last_return": returns[-1] if returns else None,
            }
        )
    )


if __name__ == "__main__":
    main()
