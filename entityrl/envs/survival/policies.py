"""Random linear softmax policies over the fixed-vector observation, in numpy.

Policy information capacity compares returns across policies drawn from a prior; here a
policy is a weight matrix and a bias over the observation's global features (scaled to about
[-1, 1]) that score the ``act`` action's choices; illegal choices are never picked.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from entityrl.env.vec_obs import VecCategoricalMask, VecObs
from entityrl.ragged import RaggedArray


class LinearSoftmaxPolicies:
    """``policies`` random policies, each driving ``copies`` consecutive environment copies.

    Weights are drawn from N(0, 1/features) and biases from N(0, 1), so that logits are of
    order one. Features are divided by their largest magnitude in the first batch seen (at
    least 1), a fixed scale shared by all policies.
    """

    def __init__(
        self,
        policies: int,
        copies: int,
        features: int,
        choices: int,
        rng: np.random.Generator,
    ) -> None:
        self.copies = copies
        self.weights = rng.normal(
            0.0, 1.0 / np.sqrt(max(features, 1)), (policies, features, choices)
        )
        self.bias = rng.normal(0.0, 1.0, (policies, choices))
        self.rng = rng
        self.scale: npt.NDArray[np.float64] | None = None

    def act(self, obs: VecObs) -> dict[str, RaggedArray]:
        mask = obs.action_masks["act"]
        assert isinstance(mask, VecCategoricalMask) and mask.mask is not None
        x = obs.global_features.astype(np.float64)
        if self.scale is None:
            self.scale = np.maximum(np.abs(x).max(axis=0), 1.0)
        policy = np.arange(x.shape[0]) // self.copies
        logits = np.einsum("nf,nfc->nc", x / self.scale, self.weights[policy]) + self.bias[policy]
        # Gumbel-max: the argmax of logits plus Gumbel noise is a softmax sample.
        noisy = logits + self.rng.gumbel(size=logits.shape)
        noisy[~mask.mask.data] = -np.inf
        choice = noisy.argmax(axis=1)
        return {"act": RaggedArray(choice[:, None].astype(np.int64), mask.actors.lengths)}
