"""RogueNet: a ragged-batch transformer policy for entity observations.

``VecObs -> per-type embedding -> transformer blocks within rows -> action heads on the actors
(categorical, select-entity) and a value head on each row's mean embedding``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from entityrl.env.spaces import (
    ActionSpace,
    CategoricalActionSpace,
    GlobalCategoricalActionSpace,
    ObsSpace,
    SelectEntityActionSpace,
)
from entityrl.env.vec_obs import VecCategoricalMask, VecObs, VecSelectEntityMask
from entityrl.nn.embedding import EntityEmbedding, TranslationConfig
from entityrl.nn.heads import CategoricalHead, HeadOutput, SelectEntityHead, ValueHead
from entityrl.nn.input_norm import Combine
from entityrl.nn.kernels import max_head_dim
from entityrl.nn.kernels.pointwise import layer_norm
from entityrl.nn.layout import (
    BatchLayout,
    SelectLayout,
    build_layout,
    categorical_inputs,
    select_layout,
)
from entityrl.nn.memory import reuse_large_allocations
from entityrl.nn.precision import Precision, compute_dtype, limit_compiled_product_caches
from entityrl.nn.relpos import RelativePositions, RelposConfig
from entityrl.nn.transformer import AttentionContext, Block, Pooling, attention_context, row_mean
from entityrl.ragged import RaggedArray


@dataclass
class RogueNetConfig:
    """Network hyperparameters."""

    d_model: int = 32
    """Width of entity embeddings."""
    n_layer: int = 2
    """Transformer blocks (0: embeddings go straight to the heads)."""
    n_head: int = 2
    """Attention heads per block."""
    d_qk: int = 16
    """Width of queries and keys in select-entity heads."""
    pooling: Pooling | None = None
    """Replace attention by row pooling ("mean", "max" or "meanmax")."""
    relpos: RelposConfig | None = None
    """Relative-position encoding in attention (None: off)."""
    translation: TranslationConfig | None = None
    """Re-centre positions on a reference entity (None: off)."""
    separate_value: bool = False
    """Give the value function its own embedding and transformer."""
    norm_clip: float = 5.0
    """Normalized input features are clipped to [-norm_clip, norm_clip]."""
    precision: Precision = "auto"
    """Compute precision of the transformer's linear layers: "float32", "bfloat16" (float32
    parameters, bfloat16 products with float32 accumulation) or "auto" (bfloat16 on CPUs with
    bfloat16 matrix instructions, AVX512-BF16 or AMX, else float32). See entityrl.nn.precision."""

    def __post_init__(self) -> None:
        for name in ("d_model", "n_head", "d_qk"):
            if getattr(self, name) < 1:
                raise ValueError(f"net.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_layer < 0:
            raise ValueError(f"net.n_layer must be >= 0, got {self.n_layer}")
        if self.d_model % self.n_head:
            raise ValueError(
                f"net.d_model ({self.d_model}) must be divisible by net.n_head ({self.n_head})"
            )
        if self.pooling not in (None, "mean", "max", "meanmax"):
            raise ValueError(
                f"net.pooling must be one of null, 'mean', 'max', 'meanmax'; got {self.pooling!r}"
            )
        if self.relpos is not None and self.pooling is not None:
            raise ValueError("net.relpos works with attention; it cannot be combined with pooling")
        compute_dtype(self.precision)  # rejects unknown settings


@dataclass
class PreparedBatch:
    """A VecObs turned into the tensors and index metadata the network consumes."""

    obs: VecObs
    layout: BatchLayout
    # Per categorical action: its actors' slots (None: every slot, in order) and legal choices.
    categorical: dict[str, tuple[torch.Tensor | None, torch.Tensor | None]] = field(
        default_factory=dict
    )
    select: dict[str, SelectLayout] = field(default_factory=dict)


@dataclass
class PolicyOutput:
    """Per action name, one entry per actor; one value per row."""

    heads: dict[str, HeadOutput]
    values: torch.Tensor  # (R,)

    def actions(self, obs: VecObs) -> dict[str, RaggedArray]:
        """The chosen actions in the form a VecEnv takes."""
        return {
            name: RaggedArray(
                out.actions.numpy().reshape(-1, 1), obs.action_masks[name].actors.lengths
            )
            for name, out in self.heads.items()
        }


class Encoder(nn.Module):
    """Embedding + transformer blocks: entities of a batch -> flat (N, d_model) embeddings."""

    def __init__(
        self,
        obs_space: ObsSpace,
        config: RogueNetConfig,
        global_token: bool,
    ) -> None:
        super().__init__()
        self.embedding = EntityEmbedding(
            obs_space, config.d_model, global_token, config.translation, config.norm_clip
        )
        d_head = config.d_model // config.n_head
        self.relpos = (
            None
            if config.relpos is None
            else RelativePositions(config.relpos, obs_space, d_head, global_token)
        )
        dtype = compute_dtype(config.precision)
        self.blocks = nn.ModuleList(
            Block(config.d_model, config.n_head, config.pooling, self.relpos, dtype)
            for _ in range(config.n_layer)
        )
        self.ln_out = nn.LayerNorm(config.d_model) if config.n_layer else nn.Identity()

    def forward(self, batch: PreparedBatch, ctx: AttentionContext) -> torch.Tensor:
        raw = self.embedding.raw_features(batch.obs)
        x = self.embedding(raw, batch.layout)
        if self.relpos is not None and self.blocks:
            ctx.relpos = self.relpos.offset_index(raw, batch.layout)
        for block in self.blocks:
            x = block(x, ctx)
        if isinstance(self.ln_out, nn.LayerNorm):  # the kernel; see Block
            return layer_norm(x, self.ln_out.weight, self.ln_out.bias, self.ln_out.eps)
        return x


class RogueNet(nn.Module):
    """Policy and value function over batches of entity observations.

    Use :meth:`act` during rollouts (samples actions) and :meth:`evaluate` during training
    (scores given actions). Input normalization statistics change only through
    :meth:`update_normalizers`.
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        config: RogueNetConfig | None = None,
    ) -> None:
        super().__init__()
        reuse_large_allocations()
        limit_compiled_product_caches()
        self.config = config or RogueNetConfig()
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.entity_names = list(obs_space.entities)
        self.global_token = any(
            isinstance(s, GlobalCategoricalActionSpace) for s in self.action_space.values()
        )
        self.encoder = Encoder(obs_space, self.config, self.global_token)
        self.value_encoder = (
            Encoder(obs_space, self.config, self.global_token)
            if self.config.separate_value
            else None
        )
        heads: dict[str, nn.Module] = {}
        for name, space in self.action_space.items():
            if isinstance(space, (CategoricalActionSpace, GlobalCategoricalActionSpace)):
                heads[name] = CategoricalHead(self.config.d_model, len(space))
            elif isinstance(space, SelectEntityActionSpace):
                heads[name] = SelectEntityHead(self.config.d_model, self.config.d_qk)
            else:
                raise TypeError(f"action {name!r}: unsupported action space {space!r}")
        self.heads = nn.ModuleDict({_key(n): h for n, h in heads.items()})
        self.value_head = ValueHead(self.config.d_model)
        # Torch's attention needs padded grids; the ragged kernel (when it is built and takes
        # heads this wide) and row pooling do not.
        self.grid_layout = (
            self.config.n_layer > 0
            and self.config.pooling is None
            and (
                self.config.relpos is not None
                or max_head_dim() < self.config.d_model // self.config.n_head
            )
        )

    # ------------------------------------------------------------------ batches
    def prepare(self, obs: VecObs) -> PreparedBatch:
        """Compute the index metadata of a batch (numpy; no gradients involved)."""
        self._check_obs(obs)
        layout = build_layout(obs, self.entity_names, self.global_token, self.grid_layout)
        batch = PreparedBatch(obs, layout)
        for name, mask in obs.action_masks.items():
            if isinstance(mask, VecSelectEntityMask):
                batch.select[name] = select_layout(mask, layout.row_slot)
            else:
                assert isinstance(mask, VecCategoricalMask)
                batch.categorical[name] = categorical_inputs(
                    mask, layout.row_slot, layout.num_slots
                )
        return batch

    def _check_obs(self, obs: VecObs) -> None:
        missing = [n for n in self.entity_names if n not in obs.features]
        if missing:
            raise ValueError(f"observation lacks entity types {missing} of the network's space")
        for name in self.entity_names:
            want = len(self.obs_space.entities[name].features)
            got = obs.features[name].features
            if got != want:
                raise ValueError(
                    f"entity type {name!r}: the network expects {want} features, got {got}"
                )
        if obs.global_features.shape[1] != len(self.obs_space.global_features):
            raise ValueError(
                f"the network expects {len(self.obs_space.global_features)} global features, "
                f"got {obs.global_features.shape[1]}"
            )

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        batch: PreparedBatch,
        actions: Mapping[str, torch.Tensor] | None = None,
        deterministic: bool = False,
    ) -> PolicyOutput:
        """Score ``actions`` (per action name, one int64 per actor) or sample new ones."""
        ctx = attention_context(batch.layout)
        x = self.encoder(batch, ctx)
        heads: dict[str, HeadOutput] = {}
        for name in self.action_space:
            chosen = None if actions is None else actions[name]
            head = self.heads[_key(name)]
            if name in batch.select:
                layout = batch.select[name]
                if layout.actor_flat.shape[0] == 0:
                    heads[name] = _no_actors()
                    continue
                heads[name] = head(x, layout, chosen, deterministic)
            else:
                actors, legal = batch.categorical[name]
                if actors is not None and actors.shape[0] == 0:
                    heads[name] = _no_actors()
                    continue
                heads[name] = head(x, actors, legal, chosen, deterministic)
        value_x = x if self.value_encoder is None else self.value_encoder(batch, ctx)
        values = self.value_head(row_mean(value_x, batch.layout))
        return PolicyOutput(heads, values)

    @torch.inference_mode()
    def act(self, obs: VecObs, deterministic: bool = False) -> PolicyOutput:
        """Sample actions for a batch of observations (no gradients)."""
        return self(self.prepare(obs), deterministic=deterministic)

    @torch.inference_mode()
    def values(self, obs: VecObs) -> torch.Tensor:
        """State values of a batch of observations (no actions, no gradients)."""
        batch = self.prepare(obs)
        ctx = attention_context(batch.layout)
        encoder = self.encoder if self.value_encoder is None else self.value_encoder
        return self.value_head(row_mean(encoder(batch, ctx), batch.layout))

    def evaluate(self, obs: VecObs, actions: Mapping[str, RaggedArray]) -> PolicyOutput:
        """Log-probabilities and entropies of given actions, and values (with gradients)."""
        chosen = {name: torch.from_numpy(a.data[:, 0]) for name, a in actions.items()}
        return self(self.prepare(obs), chosen)

    @torch.no_grad()
    def update_normalizers(self, obs: VecObs, combine: Combine | None = None) -> None:
        """Fold a batch of observations into the running input statistics (``combine`` sums
        the statistics over the processes of a data-parallel run)."""
        self.encoder.embedding.update_normalizers(obs, combine)
        if self.value_encoder is not None:
            self.value_encoder.embedding.update_normalizers(obs, combine)


def _no_actors() -> HeadOutput:
    empty = torch.zeros(0)
    return HeadOutput(torch.zeros(0, dtype=torch.int64), empty, empty)


def _key(name: str) -> str:
    """ModuleDict keys may not contain dots; action names may."""
    return name.replace(".", "\u2024")
