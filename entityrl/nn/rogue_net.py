"""RogueNet: a ragged-batch transformer policy for entity observations.

``VecObs -> per-type embedding -> transformer blocks within rows -> action heads on the actors
(one per action, by kind: categorical, select-entity, Gaussian for continuous; see
entityrl.nn.heads) and a value head on each row's mean embedding``; with ``net.memory`` a GRU
state per row joins the embeddings before the heads (:mod:`entityrl.nn.recurrent`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from entityrl.env.actions import kind_of
from entityrl.env.spaces import ActionSpace, ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.conditioning import CONDITIONINGS, Conditioning, goal_conditioning
from entityrl.nn.embedding import EntityEmbedding, TranslationConfig
from entityrl.nn.heads import ChoiceScores, HeadOutput, ValueHead, head_for
from entityrl.nn.images import IMAGE_ENCODERS, ImageEncoderName, ImageTokens
from entityrl.nn.input_norm import Combine
from entityrl.nn.inputs import EntityInputs
from entityrl.nn.kernels import max_head_dim
from entityrl.nn.kernels.pointwise import layer_norm
from entityrl.nn.layout import BatchLayout, build_layout
from entityrl.nn.memory import reuse_large_allocations
from entityrl.nn.precision import Precision, compute_dtype, limit_compiled_product_caches
from entityrl.nn.recurrent import RowMemory, Sequences
from entityrl.nn.relpos import RelativePositions, RelposConfig
from entityrl.nn.transformer import AttentionContext, Block, Pooling, attention_context, row_mean
from entityrl.ragged import RaggedArray


class ObservationTooLargeError(ValueError):
    """An observation holds more entities than ``net.max_entities`` lets the network take."""


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
    memory: bool = False
    """Give every row (environment) a GRU state that carries over its steps, reset at episode
    ends (see entityrl.nn.recurrent); PPO then trains on chunks of ppo.seq_len steps."""
    norm_clip: float = 5.0
    """Normalized input features are clipped to [-norm_clip, norm_clip]."""
    conditioning: Conditioning = "hyper"
    """How the goal signal (the observation space's goal_features) reaches the network:
    "hyper", a hypernetwork turns each row's goal into a linear layer that every entity
    embedding passes through; "film", a per-channel scale and shift of the embeddings from the
    goal, after the embedding and after each block; "none", the goal features are plain global
    features. Spaces without goal features ignore it. See entityrl.nn.conditioning and
    docs/goals.md."""
    precision: Precision = "auto"
    """Compute precision of the transformer's linear layers: "float32", "bfloat16" (float32
    parameters, bfloat16 products with float32 accumulation) or "auto" (bfloat16 on CPUs with
    bfloat16 matrix instructions, AVX512-BF16 or AMX, else float32). See entityrl.nn.precision."""
    max_entities: int = 4096
    """Most entities one observation (a row of a batch) may hold; a larger one is refused at
    once, with an error naming this setting (0: no limit). Attention costs the square of a
    row's entities, in time and memory: on 2 cores of an AMD EPYC, the default network acts
    on a row of 4,096 entities in 0.2 s and trains on it (forward and backward) in 0.7 s; at
    16,384 entities, 1.1 s and 10 s with 2.4 GB (benchmarks/RESULTS.md, "Rows of many
    entities")."""
    image_encoder: ImageEncoderName = "small"
    """The CNN that turns each image of the observation into tokens beside the entities:
    "small" (stride-2 convolutions down to at most 8x8 cells) or "impala" (IMPALA's residual
    encoder); see entityrl.nn.images. Unused by spaces without images."""

    def __post_init__(self) -> None:
        if self.image_encoder not in IMAGE_ENCODERS:
            raise ValueError(
                f"net.image_encoder must be one of {list(IMAGE_ENCODERS)}, "
                f"got {self.image_encoder!r}"
            )
        for name in ("d_model", "n_head", "d_qk"):
            if getattr(self, name) < 1:
                raise ValueError(f"net.{name} must be >= 1, got {getattr(self, name)}")
        if self.max_entities < 0:
            raise ValueError(f"net.max_entities must be >= 0, got {self.max_entities}")
        if self.memory and self.separate_value:
            raise ValueError(
                "net.memory and net.separate_value cannot be combined (the memory feeds the "
                "shared embeddings the value head reads); set one of them to false"
            )
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
        if self.conditioning not in CONDITIONINGS:
            raise ValueError(
                f"net.conditioning must be one of {', '.join(CONDITIONINGS)}; "
                f"got {self.conditioning!r}"
            )


@dataclass
class PreparedBatch:
    """A VecObs turned into the tensors and index metadata the network consumes.

    :meth:`RogueNet.prepare` builds it on the CPU from numpy (zero-copy); :meth:`to` moves it
    to the network's device in one step.
    """

    inputs: EntityInputs
    layout: BatchLayout
    # Per action, its head's inputs (see ActionHead.prepare).
    heads: dict[str, Any] = field(default_factory=dict)

    def to(self, device: torch.device) -> PreparedBatch:
        """The same batch with every tensor on ``device`` (itself on the CPU)."""
        if device.type == "cpu":
            return self

        return PreparedBatch(
            self.inputs.to(device),
            self.layout.to(device),
            {name: inputs.to(device) for name, inputs in self.heads.items()},
        )


@dataclass
class PolicyOutput:
    """Per action name, one entry per actor; one value per row."""

    heads: dict[str, HeadOutput]
    values: torch.Tensor  # (R,)
    state: torch.Tensor | None = None  # (R, memory): each row's state after it (net.memory)

    def cpu(self) -> PolicyOutput:
        """The outputs on the CPU (itself if they are there), where environments read them."""
        if self.values.is_cpu:
            return self
        return PolicyOutput(
            {
                name: HeadOutput(h.actions.cpu(), h.logprob.cpu(), h.entropy.cpu())
                for name, h in self.heads.items()
            },
            self.values.cpu(),
            None if self.state is None else self.state.cpu(),
        )

    def actions(self, obs: VecObs) -> dict[str, RaggedArray]:
        """The chosen actions in the form a VecEnv takes: one row per actor, of one index or
        of a continuous action's values."""
        actions: dict[str, RaggedArray] = {}
        for name, out in self.heads.items():
            chosen = out.actions.numpy()
            actions[name] = RaggedArray(
                chosen.reshape(-1, 1) if chosen.ndim == 1 else chosen,
                obs.action_masks[name].actors.lengths,
            )
        return actions


class Encoder(nn.Module):
    """Embedding + transformer blocks: entities of a batch -> flat (N, d_model) embeddings."""

    def __init__(
        self,
        obs_space: ObsSpace,
        config: RogueNetConfig,
        global_token: bool,
        dtype: torch.dtype,
    ) -> None:
        super().__init__()
        self.conditioning = goal_conditioning(
            config.conditioning, obs_space, config.d_model, config.n_layer, config.norm_clip
        )
        self.embedding = EntityEmbedding(
            obs_space,
            config.d_model,
            global_token,
            config.translation,
            config.norm_clip,
            split_goal=self.conditioning is not None,
        )
        d_head = config.d_model // config.n_head
        self.relpos = (
            None
            if config.relpos is None
            else RelativePositions(config.relpos, obs_space, d_head, global_token)
        )
        self.blocks = nn.ModuleList(
            Block(config.d_model, config.n_head, config.pooling, self.relpos, dtype)
            for _ in range(config.n_layer)
        )
        self.ln_out = nn.LayerNorm(config.d_model) if config.n_layer else nn.Identity()
        self.images = (
            ImageTokens(obs_space.images, config.d_model, config.image_encoder)
            if obs_space.images
            else None
        )

    def forward(self, batch: PreparedBatch, ctx: AttentionContext) -> torch.Tensor:
        raw = self.embedding.raw_features(batch.inputs)
        x = self.embedding(raw, batch.layout)
        if self.images is not None:
            x = self.images(batch.inputs.images, x, batch.layout)
        if self.relpos is not None and self.blocks:
            ctx.relpos = self.relpos.offset_index(raw, batch.layout)
        if self.conditioning is None:
            for block in self.blocks:
                x = block(x, ctx)
        else:
            goal = batch.inputs.goal
            assert goal is not None  # the embedding splits it off when conditioning
            context = self.conditioning.context(goal, batch.layout)
            x = self.conditioning(x, context, 0)
            for site, block in enumerate(self.blocks, 1):
                x = self.conditioning(block(x, ctx), context, site)
        if isinstance(self.ln_out, nn.LayerNorm):  # the kernel; see Block
            return layer_norm(x, self.ln_out.weight, self.ln_out.bias, self.ln_out.eps)
        return x

    @torch.no_grad()
    def update_normalizers(self, inputs: EntityInputs, combine: Combine | None = None) -> None:
        self.embedding.update_normalizers(inputs, combine)
        if self.conditioning is not None:
            assert inputs.goal is not None
            self.conditioning.update_normalizer(inputs.goal, combine)


class RogueNet(nn.Module):
    """Policy and value function over batches of entity observations.

    Use :meth:`act` during rollouts (samples actions) and :meth:`evaluate` during training
    (scores given actions). Input normalization statistics change only through
    :meth:`update_normalizers`.

    The network lives on ``device`` (its compute precision is chosen for it, see
    :func:`~entityrl.nn.precision.compute_dtype`); observations and actions are numpy on the
    CPU. :meth:`act` and :meth:`values` return their outputs on the CPU; :meth:`evaluate`
    returns them on the device, for the loss. On the CPU the C++ kernels serve; on any other
    device the plain torch path runs.
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        action_space: Mapping[str, ActionSpace],
        config: RogueNetConfig | None = None,
        device: torch.device | str = "cpu",
    ) -> None:
        super().__init__()
        reuse_large_allocations()
        limit_compiled_product_caches()
        self.config = config or RogueNetConfig()
        dtype = compute_dtype(self.config.precision, device)
        self.obs_space = obs_space
        self.action_space = dict(action_space)
        self.entity_names = list(obs_space.entities)
        self.global_token = any(kind_of(s).global_actor for s in self.action_space.values())
        self.encoder = Encoder(obs_space, self.config, self.global_token, dtype)
        self.value_encoder = (
            Encoder(obs_space, self.config, self.global_token, dtype)
            if self.config.separate_value
            else None
        )
        self.heads = nn.ModuleDict(
            {
                _key(name): head_for(name, space, self.config.d_model, self.config.d_qk)
                for name, space in self.action_space.items()
            }
        )
        self.value_head = ValueHead(self.config.d_model)
        self.memory = RowMemory(self.config.d_model) if self.config.memory else None
        self.uses_attention = self.config.n_layer > 0 and self.config.pooling is None
        self.grid_layout = False
        self.to(device)

    def _apply(self, fn: Any, recurse: bool = True) -> RogueNet:
        # Every move (.to, .cuda, .cpu) passes here: keep the device and layout in step.
        super()._apply(fn, recurse)
        self.device = self.value_head.proj.weight.device
        # Torch's attention needs padded grids; the ragged kernel (on the CPU, when it is built
        # and takes heads this wide) and row pooling do not. The kernel is asked for (which
        # builds it on first use) only on the CPU: elsewhere it would be compiled for nothing.
        self.grid_layout = self.uses_attention and (
            self.device.type != "cpu"
            or self.config.relpos is not None
            or max_head_dim() < self.config.d_model // self.config.n_head
        )
        return self

    # ------------------------------------------------------------------ batches
    def prepare(self, obs: VecObs) -> PreparedBatch:
        """Compute the index metadata of a batch (numpy; no gradients involved), on the CPU."""
        self._check_obs(obs)
        images = self.encoder.images
        layout = build_layout(
            obs,
            self.entity_names,
            self.global_token,
            self.grid_layout,
            None if images is None else images.cells,
        )
        heads = {
            name: self.heads[_key(name)].prepare(mask, layout)
            for name, mask in obs.action_masks.items()
        }
        return PreparedBatch(self.encoder.embedding.inputs(obs), layout, heads)

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
        for name, image in self.obs_space.images.items():
            pixels = obs.images.get(name)
            if pixels is None or pixels.shape[1:] != image.shape:
                got = "none" if pixels is None else f"shape {pixels.shape[1:]}"
                raise ValueError(
                    f"image {name!r}: the network expects {image.shape} per row, got {got}"
                )
        self._check_size(obs)

    def _check_size(self, obs: VecObs) -> None:
        """Refuse, before any work, rows whose quadratic cost would exhaust memory or stall
        for minutes without a word (see ``net.max_entities``)."""
        limit = self.config.max_entities
        if not limit or not obs.num_rows:
            return
        counts = np.zeros(obs.num_rows, dtype=np.int64)
        for name in self.entity_names:
            counts += obs.features[name].lengths
        row = int(counts.argmax())
        if counts[row] > limit:
            raise ObservationTooLargeError(
                f"an observation holds {counts[row]:,} entities (row {row} of the batch), more "
                f"than net.max_entities={limit:,}: attention costs the square of an "
                "observation's entities in time and memory; raise net.max_entities (0: no "
                "limit) to take it anyway, or give the policy fewer entities per observation"
            )

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        batch: PreparedBatch,
        actions: Mapping[str, torch.Tensor] | None = None,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        state: torch.Tensor | None = None,
        sequences: Sequences | None = None,
    ) -> PolicyOutput:
        """Score ``actions`` (per action name, one row per actor: an int64 index, or a
        continuous action's values) or sample new ones (with
        ``generator``, torch's default one if None). ``batch`` must be on the network's
        device. With ``net.memory``: ``state`` (rows, memory) is each row's state before this
        step (None: fresh episodes), or ``sequences`` says how the rows form chunks of steps."""
        ctx = attention_context(batch.layout)
        x = self.encoder(batch, ctx)
        x, state = self._remember(x, batch.layout, state, sequences)
        heads: dict[str, HeadOutput] = {}
        for name in self.action_space:
            chosen = None if actions is None else actions[name]
            head = self.heads[_key(name)]
            heads[name] = head(x, batch.heads[name], chosen, deterministic, generator)
        value_x = x if self.value_encoder is None else self.value_encoder(batch, ctx)
        values = self.value_head(row_mean(value_x, batch.layout))
        return PolicyOutput(heads, values, state)

    def _remember(
        self,
        x: torch.Tensor,
        layout: BatchLayout,
        state: torch.Tensor | None,
        sequences: Sequences | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """With net.memory: the rows' new states, and ``x`` with them added."""
        if self.memory is None:
            if state is not None or sequences is not None:
                raise ValueError("a state was given to a network without net.memory")
            return x, None
        pooled = row_mean(x, layout).float()
        if sequences is not None:
            new_state = self.memory.sequence(pooled, sequences)
        else:
            if state is None:
                state = self.memory.initial_state(layout.num_rows, x.device)
            new_state = self.memory.step(pooled, state)
        return self.memory.broadcast(x, new_state, layout), new_state

    def initial_state(self, rows: int) -> torch.Tensor | None:
        """The state of rows starting an episode (on the CPU); None without net.memory."""
        return None if self.memory is None else self.memory.initial_state(rows)

    @torch.inference_mode()
    def act(
        self,
        obs: VecObs,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        state: torch.Tensor | None = None,
    ) -> PolicyOutput:
        """Sample actions for a batch of observations (no gradients; outputs on the CPU).
        ``generator`` (on the network's device) draws the samples; None: torch's default.
        ``state``: with net.memory, the rows' states (None: fresh episodes); the output's
        ``state`` is the one to pass with the next observation."""
        batch = self.prepare(obs).to(self.device)
        state = None if state is None else state.to(self.device)
        return self(batch, deterministic=deterministic, generator=generator, state=state).cpu()

    @torch.inference_mode()
    def values(self, obs: VecObs, state: torch.Tensor | None = None) -> torch.Tensor:
        """State values of a batch of observations (no actions, no gradients; on the CPU);
        ``state`` as for :meth:`act`."""
        batch = self.prepare(obs).to(self.device)
        ctx = attention_context(batch.layout)
        encoder = self.encoder if self.value_encoder is None else self.value_encoder
        x = encoder(batch, ctx)
        state = None if state is None else state.to(self.device)
        x, _ = self._remember(x, batch.layout, state, None)
        return self.value_head(row_mean(x, batch.layout)).cpu()

    def choice_scores(
        self, obs: VecObs, state: torch.Tensor | None = None
    ) -> dict[str, ChoiceScores]:
        """Per discrete action, every choice's score for every actor (with gradients, on the
        network's device): the policy's logits, or the Q-values of a value-based method that
        trains the heads as such. ``state`` as for :meth:`act`. Continuous actions have no
        choices and are left out."""
        batch = self.prepare(obs).to(self.device)
        x = self.encoder(batch, attention_context(batch.layout))
        state = None if state is None else state.to(self.device)
        x, _ = self._remember(x, batch.layout, state, None)
        scores: dict[str, ChoiceScores] = {}
        for name in self.action_space:
            head = self.heads[_key(name)]
            if hasattr(head, "scores"):
                scores[name] = head.scores(x, batch.heads[name])
        return scores

    def embed(self, obs: VecObs) -> torch.Tensor:
        """Each row's pooled embedding (rows, d_model) from the value's encoder, with
        gradients: what another model (a group critic) builds on."""
        batch = self.prepare(obs).to(self.device)
        encoder = self.encoder if self.value_encoder is None else self.value_encoder
        return row_mean(encoder(batch, attention_context(batch.layout)), batch.layout)

    def evaluate(
        self,
        obs: VecObs,
        actions: Mapping[str, RaggedArray],
        sequences: Sequences | None = None,
    ) -> PolicyOutput:
        """Log-probabilities and entropies of given actions, and values (with gradients, on
        the network's device); with net.memory, ``sequences`` says how the rows form chunks
        of consecutive steps."""
        device = self.device
        chosen = {name: self.heads[_key(name)].chosen(a).to(device) for name, a in actions.items()}
        sequences = None if sequences is None else sequences.to(device)
        return self(self.prepare(obs).to(device), chosen, sequences=sequences)

    @torch.no_grad()
    def update_normalizers(self, obs: VecObs, combine: Combine | None = None) -> None:
        """Fold a batch of observations into the running input statistics (``combine`` sums
        the statistics over the processes of a data-parallel run)."""
        inputs = self.encoder.embedding.inputs(obs).to(self.device)
        self.encoder.update_normalizers(inputs, combine)
        if self.value_encoder is not None:
            self.value_encoder.update_normalizers(inputs, combine)


def _key(name: str) -> str:
    """ModuleDict keys may not contain dots; action names may."""
    return name.replace(".", "\u2024")
