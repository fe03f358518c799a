"""``init_from``: start a run from another run's weights and input normalization."""

from __future__ import annotations

from pathlib import Path

from entityrl.env.space_data import space_differences
from entityrl.nn.rogue_net import RogueNet
from entityrl.training.checkpoint import CheckpointError, load_checkpoint, spaces_from_data


def load_initial_weights(net: RogueNet, path: str | Path) -> int:
    """Copy the weights and normalizer statistics of the checkpoint (or run directory) at
    ``path`` into ``net``; returns the steps that run trained. :class:`CheckpointError` (one
    line) if its spaces or network differ from ``net``'s."""
    saved = load_checkpoint(path)
    differences = space_differences(
        spaces_from_data(saved["spaces"]),
        (net.obs_space, net.action_space),
        who=f"the run of init_from={path}",
    )
    if differences:
        raise CheckpointError(f"init_from={path}: " + "; ".join(differences))
    try:
        net.load_state_dict(saved["model"])
    except RuntimeError as err:
        lines = str(err).strip().splitlines()
        reason = lines[1].strip() if len(lines) > 1 else lines[0]
        raise CheckpointError(
            f"init_from={path}: its network differs from this config's net section "
            f"(use the same net.* settings): {reason}"
        ) from None
    return int(saved["step"])
