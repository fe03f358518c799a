"""How a MultiSnake player's episodes end, and (for a GAIL run) what its discriminator says per
snake: the diagnosis behind docs/imitation.md, "Several actors per step".

Plays 400 episodes on 16 environments of the evaluation seed (12345) and classifies each
ending by replaying the environment's rules on the state before the last step: which snake
crashed, into what (wall, its own body, the other snake, food of the other color), or success.
With ``--discriminator`` (a run of ``algo=gail gail.structured=true``), also per snake on
300 steps of the player's and of the expert's states: the probability the policy and the
discriminator's ``q`` give the moves that crash, and the logit ``log q - log pi`` per snake.

usage: python benchmarks/multisnake_endings.py RUN_DIR|expert [--greedy] [--discriminator]
"""

from __future__ import annotations

import argparse
import collections
from typing import Any

import numpy as np
import torch

from entityrl.algorithms.common.optimizer import OptimConfig
from entityrl.algorithms.gail.discriminator import Discriminator
from entityrl.envs import make_vec
from entityrl.envs.experts import multi_snake_expert
from entityrl.envs.multi_snake import MOVES, MultiSnake
from entityrl.ragged import RaggedArray
from entityrl.recording import FunctionExpert
from entityrl.training import load_agent
from entityrl.training.config import from_dict

KWARGS = {"num_snakes": 2, "max_snake_length": 4}  # as benchmarks/adversarial_imitation.py
EVAL_SEED = 12345


def crash(env: MultiSnake, color: int, choice: int, snakes: list, food: dict) -> str | None:
    """What snake ``color`` runs into with move ``choice`` (None: nothing)."""
    x, y = snakes[color][-1]
    dx, dy = MOVES[choice]
    head = (x + dx, y + dy)
    if not (0 <= head[0] < env.board_size and 0 <= head[1] < env.board_size):
        return "wall"
    for other, snake in enumerate(snakes):
        if head in snake:
            return "own body" if other == color else "other snake"
    eaten = next((c for c, cell in food.items() if cell == head), None)
    return None if eaten in (None, color) else "other food"


def ending(env: MultiSnake, moves: list[int]) -> str | None:
    """The crash the snakes' ``moves`` (in snake order, as the environment plays them) make
    from the environment's current state, as "snake N: what"; None if none."""
    snakes = [list(s) for s in env.snakes]
    food = dict(env.food)
    for color, choice in enumerate(moves):
        hit = crash(env, color, choice, snakes, food)
        if hit is not None:
            return f"snake {color}: {hit}"
        snake = snakes[color]
        snake.append((snake[-1][0] + MOVES[choice][0], snake[-1][1] + MOVES[choice][1]))
        eaten = next((c for c, cell in food.items() if cell == snake[-1]), None)
        if eaten is not None:
            del food[eaten]
        if eaten is None or len(snake) > env.max_snake_length:
            snake.pop(0)
    return None


def moves_of(actions: dict[str, RaggedArray]) -> list[list[int]]:
    """Per environment, its snakes' moves in snake order."""
    return [np.asarray(row).reshape(-1).tolist() for row in actions["move"].to_list()]


def play(player: Any, episodes: int) -> None:
    env = make_vec("MultiSnake", 16, seed=EVAL_SEED, **KWARGS)
    obs = env.reset()
    ends: collections.Counter[str] = collections.Counter()
    lengths, returns = [], []
    length, total = np.zeros(16, np.int64), np.zeros(16)
    while len(lengths) < episodes:
        actions = player.act(obs)
        crashes = [ending(e, m) for e, m in zip(env.envs, moves_of(actions), strict=True)]
        obs = env.act(actions)
        length += 1
        total += obs.reward
        for i in np.flatnonzero(obs.done):
            ends[crashes[i] or ("success" if total[i] > 0.99 else "time limit")] += 1
            lengths.append(length[i])
            returns.append(total[i])
            length[i], total[i] = 0, 0.0
    print(f"{len(lengths)} episodes: return {np.mean(returns):.3f}, length {np.mean(lengths):.1f}")
    for what, count in ends.most_common():
        print(f"  {what}: {count}")


def probabilities(net: Any, obs: Any, actions: dict[str, RaggedArray]) -> np.ndarray:
    """(actors, 4): each snake's probability of each move under ``net``."""
    move = actions["move"]
    columns = []
    with torch.no_grad():
        for k in range(len(MOVES)):
            every = RaggedArray.from_flat(np.full_like(move.data, k), move.lengths)
            columns.append(net.evaluate(obs, {"move": every}).heads["move"].logprob.numpy())
    return np.exp(np.stack(columns, 1))


def per_snake(run: str, agent: Any) -> None:
    env = make_vec("MultiSnake", 16, seed=EVAL_SEED, **KWARGS)
    state = torch.load(f"{run}/checkpoint.pt", weights_only=False)
    discriminator = Discriminator(
        env.obs_space, env.action_space, from_dict(state["config"], check_env=False).gail, "gail",
        OptimConfig(), torch.device("cpu"), policy=agent.net,
    )  # fmt: skip
    saved = state["gail"]
    discriminator.load_state_dict(saved[0] if isinstance(saved, list) else saved)
    discriminator.model.eval()
    for name, player in (("policy", agent), ("expert", FunctionExpert(multi_snake_expert, env))):
        obs = env.reset()
        rows = []  # per actor-step: pi(crash), q(crash), logit, length of the snake
        for _ in range(300):
            actions = player.act(obs)
            pi = probabilities(agent.net, obs, actions)
            q = probabilities(discriminator.net, obs, actions)
            k = 0
            for e, moves in zip(env.envs, moves_of(actions), strict=True):
                for color, choice in enumerate(moves):
                    hits = [
                        crash(e, color, m, e.snakes, e.food) is not None for m in range(len(MOVES))
                    ]
                    logit = np.log(q[k, choice]) - np.log(pi[k, choice])
                    rows.append((pi[k][hits].sum(), q[k][hits].sum(), logit, len(e.snakes[color])))
                    k += 1
            obs = env.act(actions)
        table = np.array(rows)
        print(
            f"{name}'s states, {len(table)} actor-steps: mass on moves that crash: policy "
            f"{table[:, 0].mean():.3f}, q {table[:, 1].mean():.3f}, logit per snake "
            f"{table[:, 2].mean():+.3f}"
        )
        for size in range(1, KWARGS["max_snake_length"] + 1):
            part = table[table[:, 3] == size]
            if len(part):
                print(
                    f"  snake of length {size} ({len(part)}): policy {part[:, 0].mean():.3f}, "
                    f"q {part[:, 1].mean():.3f}, logit per snake {part[:, 2].mean():+.3f}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run directory, or 'expert' for the scripted expert")
    parser.add_argument("--greedy", action="store_true", help="the agent's most likely moves")
    parser.add_argument("--discriminator", action="store_true", help="per-snake figures too")
    parser.add_argument("--episodes", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.run == "expert":
        env = make_vec("MultiSnake", 16, seed=EVAL_SEED, **KWARGS)
        play(FunctionExpert(multi_snake_expert, env), args.episodes)
        return
    agent = load_agent(args.run, seed=0, deterministic=args.greedy)
    play(agent, args.episodes)
    if args.discriminator:
        per_snake(args.run, agent)


if __name__ == "__main__":
    main()
