"""Where the time of random play goes: cProfile's own time per function, as shares."""

from __future__ import annotations

import cProfile
import pstats

from entityrl.env import RandomPolicy, VecEnv

FunctionKey = tuple[str, int, str]
"""cProfile's name of a function: (file, line, function name)."""


def own_time_shares(env: VecEnv, steps: int) -> dict[FunctionKey, float]:
    """Reset ``env`` and play ``steps`` steps of random legal actions under cProfile; each
    function's share of the total own time (the shares sum to 1)."""
    policy = RandomPolicy(env.action_space, seed=0)
    obs = env.reset()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        obs = env.act(policy.act(obs))
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())
    return {key: entry[2] / total for key, entry in stats.items()}
