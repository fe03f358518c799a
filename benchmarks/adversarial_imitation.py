"""Adversarial imitation with no environment reward: GAIL (fixed), GAIL without its fixes, DAC.

For each environment, record its scripted expert (entityrl.envs.experts, seed 0), train with
the algorithm on the recording alone (the environment's reward weighs 0), then evaluate the
agent and the expert on the same 400 fresh episodes (environment seed 12345, sampled actions).
Each row carries the load average of the machine when the run ended (other jobs share it).

Environments, chosen for how their episodes end (sizes that train in minutes on a loaded
machine):

* TreasureHunt with 2 treasures: the expert ends episodes early by collecting every treasure;
* CherryPick: every episode has the same length (select-entity actions too);
* MultiSnake (two snakes of length 4): several actors act at every step;
* PickMatchingBalls (8 balls): select-entity actions, episodes end at the first wrong pick.

GAIL before issue #30 is measured by running this script from an export of that commit
(``git archive 1f5fda8 entityrl | tar -x -C /tmp/head``, then ``PYTHONPATH=/tmp/head`` from
``/tmp/head``) with ``--algos gail``; ``gail-plain`` here is today's discriminator with the
fixes turned off, which is not the same network. ``gail-bc`` is GAIL with behaviour cloning on
the same recording alongside (``bc.strength=1 bc.batches=16``), not adversarial imitation
alone. ``gail-structured`` and ``dac-structured`` use the structured discriminator
(``log q - log pi``), GAIL at ``ppo.gamma=0.9``; ``gail-sharp`` is ``gail-structured`` with
``gail.entropy=0.25`` (reward ``log q - 0.25 log pi``); ``gail-sharp-q`` sharpens ``q`` itself
(``gail.entropy=0.5 gail.sharpen_q=true``, reward ``0.5 (log q' - log pi)``), at ``ppo.gamma=0.99``.

MultiSnake has settings of its own for every algorithm (``CASE_SETTINGS``: the policy's network
with relative positions, width 64 and 4 heads, the discriminator's with relative positions);
``--plain`` leaves them out, as every MultiSnake figure before them was taken.

usage: python benchmarks/adversarial_imitation.py [--only ENV ...] [--algos gail dac ...]
                                                  [--seeds 1 2 3] [--threads 1]
                                                  [--set KEY=VALUE ...] [--steps N]
                                                  [--kwargs JSON] [--episodes N] [--plain]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from entityrl.env import VecEnv
from entityrl.envs import make_vec
from entityrl.envs.experts import EXPERTS
from entityrl.recording import record
from entityrl.training import evaluate, load_agent, make_eval_env, train

try:
    from entityrl.envs.experts import FUNCTION_EXPERTS
    from entityrl.recording import FunctionExpert
except ImportError:  # the library before issue #30 (GAIL's old figures): no function experts
    FUNCTION_EXPERTS = {}

EPISODES = 400
EVAL_SEED = 12345
# Per environment: its arguments, expert episodes recorded, environment steps of training.
CASES: dict[str, tuple[dict, int, int]] = {
    "TreasureHunt": ({"num_treasures": 2}, 1000, 200_000),
    "CherryPick": ({}, 200, 61_440),
    "MultiSnake": ({"num_snakes": 2, "max_snake_length": 4}, 500, 200_000),
    "PickMatchingBalls": ({"one_hot": True, "max_balls": 8}, 1000, 150_000),
}
# Relative positions within two cells (a snake's neighbours exactly, farther ones by direction).
RELPOS = "{position_features: [x, y], extent: [2, 2], per_entity_values: true}"
# Per environment, settings of its own for every algorithm ("{d}": the discriminator's section,
# gail or dac); --plain leaves them out (the figures before them). MultiSnake: PPO on its own
# reward reached 0.47 of the expert with the shipped network and 0.98 with this one (relative
# positions, width 64, 4 heads; benchmarks/multisnake_ppo.py), and the discriminator's q needs
# the relative positions as much (docs/imitation.md, "Several actors per step").
CASE_SETTINGS: dict[str, list[str]] = {
    "MultiSnake": [
        f"net.relpos={RELPOS}",
        "net.d_model=64",
        "net.n_head=4",
        f"{{d}}.relpos={RELPOS}",
    ],
}
# Per algorithm: its overrides. gail-plain is GAIL with the fixes of issue #30 turned off.
ALGOS: dict[str, list[str]] = {
    "gail": ["algo=gail", "gail.env_reward=0"],
    "gail-plain": ["algo=gail", "gail.env_reward=0", "gail.absorbing=false", "gail.grad_penalty=0"],
    # The absorbing state carries its ending, weighted by the horizon (measured worse).
    "gail-ending": [
        "algo=gail",
        "gail.env_reward=0",
        "gail.ending=true",
        "gail.absorbing_weight=null",
    ],
    "dac": ["algo=dac"],
    # The structured discriminator, log q - log pi (at a shorter discount for GAIL).
    "gail-structured": [
        "algo=gail",
        "gail.env_reward=0",
        "gail.structured=true",
        "ppo.gamma=0.9",
    ],
    "dac-structured": ["algo=dac", "dac.structured=true"],
    # The same, its reward keeping a quarter of the -log pi (the policy's optimum sharper than
    # q; docs/imitation.md, "Several actors per step").
    "gail-sharp": [
        "algo=gail",
        "gail.env_reward=0",
        "gail.structured=true",
        "ppo.gamma=0.9",
        "gail.entropy=0.25",
    ],
    # The structured discriminator with q itself sharpened by 1 / entropy (reward entropy *
    # (log q' - log pi)): no cost per step, so ending early does not pay; at gamma 0.99
    # (measured on MultiSnake only: docs/imitation.md, "Several actors per step").
    "gail-sharp-q": [
        "algo=gail",
        "gail.env_reward=0",
        "gail.structured=true",
        "ppo.gamma=0.99",
        "gail.entropy=0.5",
        "gail.sharpen_q=true",
    ],
    # Behaviour cloning on the same recording alongside (not adversarial imitation alone): 16
    # minibatch steps of it after each PPO update.
    "gail-bc": ["algo=gail", "gail.env_reward=0", "bc.strength=1", "bc.batches=16"],
}


def expert(name: str, env: VecEnv) -> object:
    """The scripted expert of ``name``, acting on ``env``'s batches."""
    if name in FUNCTION_EXPERTS:
        return FunctionExpert(FUNCTION_EXPERTS[name], env)
    return EXPERTS[name]()


def run(
    name: str, algo: str, seed: int, threads: int, tmp: Path, args: argparse.Namespace
) -> dict[str, object]:
    kwargs, episodes, steps = CASES[name]
    kwargs = json.loads(args.kwargs) if args.kwargs is not None else kwargs
    steps = args.steps or steps
    episodes = args.episodes or episodes
    section = "dac" if algo.startswith("dac") else "gail"
    own = [] if args.plain else [x.replace("{d}", section) for x in CASE_SETTINGS.get(name, [])]
    extra = [*own, *args.set]
    demos = tmp / f"{name}-{episodes}.arrow"
    if not demos.exists():
        env = make_vec(name, 16, seed=0, **kwargs)
        record(expert(name, env), env, demos, episodes, env_id=name, env_kwargs=kwargs)
    started = time.time()
    result = train(
        name,
        overrides=[
            *ALGOS[algo], *extra, f"bc.demos=[{demos}]", f"env.kwargs={kwargs}", f"seed={seed}",
            f"total_timesteps={steps}", f"log.run_dir={tmp}/{name}-{algo}-{seed}",
            "log.tensorboard=false", "log.progress=false", f"torch_threads={threads}",
        ],
    )  # fmt: skip
    seconds = time.time() - started
    agent = load_agent(result.run_dir, seed=0)
    with make_eval_env(agent, num_envs=16, seed=EVAL_SEED) as env:
        agent_return = evaluate(agent, env, EPISODES).mean()
    with make_vec(name, 16, seed=EVAL_SEED, **kwargs) as env:
        expert_return = evaluate(expert(name, env), env, EPISODES).mean()
    return {"env": name, "algo": algo, "seed": seed, "steps": result.steps,
            "expert": round(float(expert_return), 3), "agent": round(float(agent_return), 3),
            "ratio": round(float(agent_return / expert_return), 3), "seconds": round(seconds),
            "load": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=list(CASES), help="environment names")
    parser.add_argument("--algos", nargs="*", default=["gail", "dac"], choices=list(ALGOS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--set", nargs="*", default=[], help="more overrides (gail.lr=0.0001)")
    parser.add_argument("--steps", type=int, help="environment steps instead of the case's")
    parser.add_argument("--kwargs", help="environment arguments (JSON) instead of the case's")
    parser.add_argument("--episodes", type=int, help="expert episodes instead of the case's")
    parser.add_argument("--plain", action="store_true", help="without the cases' own settings")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only:
            for algo in args.algos:
                for seed in args.seeds:
                    rows.append(run(name, algo, seed, args.threads, Path(tmp), args))
                    print(json.dumps(rows[-1]), flush=True)
    print("| env | algorithm | agent / expert (median) | runs (agent / expert) | load average |")
    print("|---|---|---|---|---|")
    for name in args.only:
        for algo in args.algos:
            mine = [r for r in rows if r["env"] == name and r["algo"] == algo]
            ratios = [float(r["ratio"]) for r in mine]  # type: ignore[arg-type]
            loads = ", ".join(str(r["load"][0]) for r in mine)  # type: ignore[index]
            print(f"| {name} | {algo} | {statistics.median(ratios):.3f} | "
                  f"{', '.join(f'{x:.3f}' for x in ratios)} | {loads} |")  # fmt: skip


if __name__ == "__main__":
    main()
