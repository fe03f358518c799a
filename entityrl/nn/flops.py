"""Parameter and compute estimates of RogueNet (the formulas of the ENN blog's appendix B).

With D = d_model, L = layers, F_i the features and S_i the entity count of type i,
S = sum S_i: ``params = 12 L D^2 + D sum F_i`` and
``flops = 12 L D^2 S + L D S^2 + D sum F_i S_i`` (multiply-adds), ignoring biases, layer
norms, activations and the heads.
"""

from __future__ import annotations

from collections.abc import Sequence


def param_count(d_model: int, n_layer: int, features: Sequence[int]) -> int:
    """Weights of the embedding matrices and transformer blocks."""
    return 12 * n_layer * d_model**2 + d_model * sum(features)


def flops(d_model: int, n_layer: int, features: Sequence[int], entities: Sequence[int]) -> int:
    """Multiply-adds of one forward pass over one observation."""
    if len(features) != len(entities):
        raise ValueError(
            f"need one entity count per entity type: {len(features)} feature counts, "
            f"{len(entities)} entity counts"
        )
    s = sum(entities)
    embed = d_model * sum(f * n for f, n in zip(features, entities, strict=True))
    return 12 * n_layer * d_model**2 * s + n_layer * d_model * s**2 + embed
