"""Per-entity-type embedding into one flat ``(N, d_model)`` tensor, with optional translation."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from entityrl.env.spaces import ObsSpace
from entityrl.env.vec_obs import VecObs
from entityrl.nn.input_norm import Combine, RunningNorm
from entityrl.nn.inputs import EntityInputs
from entityrl.nn.kernels import embedding as kernel
from entityrl.nn.kernels.pointwise import layer_norm
from entityrl.nn.layout import BatchLayout


@dataclass
class TranslationConfig:
    """Re-centre position features on a reference entity (and optionally rotate them).

    Every entity type that has all ``position_features`` (other than the reference type itself)
    sees its positions relative to the first ``reference_entity`` of its row; with
    ``rotation_angle_feature`` (an angle in radians of the reference entity) positions are also
    rotated so that the reference faces the +x axis.
    """

    reference_entity: str
    """Entity type placed at the origin."""
    position_features: list[str]
    """Names of the position features, e.g. ["x", "y"]."""
    rotation_angle_feature: str | None = None
    """Feature of the reference entity giving its heading in radians (None: no rotation)."""


class Translation:
    """Applies a :class:`TranslationConfig` to raw feature tensors (numpy-side indexing)."""

    def __init__(self, config: TranslationConfig, obs_space: ObsSpace) -> None:
        ref = obs_space.entities.get(config.reference_entity)
        if ref is None:
            raise ValueError(
                f"translation.reference_entity: unknown entity type {config.reference_entity!r}; "
                f"entity types: {list(obs_space.entities)}"
            )
        missing = [f for f in config.position_features if f not in ref.features]
        if missing:
            raise ValueError(
                f"translation.position_features: {missing} are not features of "
                f"{config.reference_entity!r} (its features: {list(ref.features)})"
            )
        self.reference = config.reference_entity
        self.ref_columns = [ref.features.index(f) for f in config.position_features]
        self.angle_column = (
            None
            if config.rotation_angle_feature is None
            else _feature_index(ref.features, config.rotation_angle_feature, "translation")
        )
        self.columns = {
            name: [entity.features.index(f) for f in config.position_features]
            for name, entity in obs_space.entities.items()
            if name != self.reference
            and all(f in entity.features for f in config.position_features)
        }

    def apply(self, inputs: EntityInputs, raw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``raw`` with the positions of every translated type made relative to the reference
        (``inputs`` must hold the reference's first entities and the translated types' rows)."""
        first, ref_rows = inputs.first_entity[self.reference]
        ref_feats = raw[self.reference][first]
        device = ref_feats.device
        origin = torch.zeros(inputs.num_rows, len(self.ref_columns), device=device)
        origin[ref_rows] = ref_feats[:, self.ref_columns]
        if self.angle_column is not None:
            angle = torch.zeros(inputs.num_rows, device=device)
            angle[ref_rows] = ref_feats[:, self.angle_column]
            cos, sin = torch.cos(angle), torch.sin(angle)
        out = dict(raw)
        for name, cols in self.columns.items():
            feats = raw[name]
            if feats.shape[0] == 0:
                continue
            item_rows = inputs.entity_rows[name]
            rel = feats[:, cols] - origin[item_rows]
            if self.angle_column is not None:
                c, s = cos[item_rows], sin[item_rows]
                x, y = rel[:, 0], rel[:, 1]
                rel = torch.stack([x * c + y * s, -x * s + y * c], dim=1)
            feats = feats.clone()
            feats[:, cols] = rel
            out[name] = feats
        return out


def _feature_index(features: tuple[str, ...] | list[str], name: str, where: str) -> int:
    if name not in features:
        raise ValueError(f"{where}: unknown feature {name!r}; features: {list(features)}")
    return list(features).index(name)


class EntityEmbedding(nn.Module):
    """Normalize, project (Linear, ReLU, LayerNorm) and flatten the entities of every type.

    Global features are appended to every entity's features, so they reach every entity.
    With ``global_token``, each row also gets one extra entity built from the global features
    alone (the actor of global categorical actions). With ``split_goal``, the space's goal
    features are left out of them (:attr:`EntityInputs.goal`, for the conditioning).

    The forward runs one kernel call per entity type (:mod:`entityrl.nn.kernels.embedding`:
    normalization, projection and placement in the slots at once) where the kernel serves
    (float32 parameters and features on the CPU), else the modules one by one.
    """

    def __init__(
        self,
        obs_space: ObsSpace,
        d_model: int,
        global_token: bool,
        translation: TranslationConfig | None = None,
        norm_clip: float = 5.0,
        split_goal: bool = False,
    ) -> None:
        super().__init__()
        self.entity_names = list(obs_space.entities)
        globals_ = obs_space.global_features
        self.goal_columns = (
            tuple(globals_.index(name) for name in obs_space.goal_features) if split_goal else ()
        )
        self.num_global = len(globals_) - len(self.goal_columns)
        self.global_token = global_token
        widths = {name: len(e.features) for name, e in obs_space.entities.items()}
        if global_token:
            widths["__global__"] = 0
        self.translation = None if translation is None else Translation(translation, obs_space)
        self.norms = nn.ModuleDict()
        self.projections = nn.ModuleDict()
        for name, width in widths.items():
            key = _module_key(name)
            total = width + self.num_global
            if total == 0:
                self.projections[key] = _Constant(d_model)
                continue
            self.norms[key] = RunningNorm(total, norm_clip)
            self.projections[key] = _Projection(
                nn.Linear(total, d_model), nn.ReLU(), nn.LayerNorm(d_model)
            )
        self.d_model = d_model

    def inputs(self, obs: VecObs) -> EntityInputs:
        """What :meth:`raw_features` reads from ``obs``, as tensors on the CPU."""
        rows_of: list[str] = []
        if self.num_global:
            rows_of = self.entity_names
        elif self.translation is not None:
            rows_of = list(self.translation.columns)
        first_of = [] if self.translation is None else [self.translation.reference]
        return EntityInputs.from_obs(obs, self.entity_names, rows_of, first_of, self.goal_columns)

    def raw_features(self, inputs: EntityInputs) -> dict[str, torch.Tensor]:
        """Per type, the input features (own + global), translated; before normalization."""
        raw = dict(inputs.features)
        if self.translation is not None:
            raw = self.translation.apply(inputs, raw)
        globals_ = inputs.global_features
        if self.num_global:
            for name in self.entity_names:
                raw[name] = torch.cat([raw[name], globals_[inputs.entity_rows[name]]], dim=1)
        if self.global_token:
            raw["__global__"] = globals_
        return raw

    @torch.no_grad()
    def update_normalizers(self, inputs: EntityInputs, combine: Combine | None = None) -> None:
        for name, feats in self.raw_features(inputs).items():
            key = _module_key(name)
            if key in self.norms:
                self.norms[key].update(feats, combine)

    def forward(self, raw: dict[str, torch.Tensor], layout: BatchLayout) -> torch.Tensor:
        x = self._fused(raw, layout)
        if x is not None:
            return x
        embedded = {}
        for name, feats in raw.items():
            key = _module_key(name)
            if key in self.norms:
                feats = self.norms[key](feats)
            embedded[name] = self.projections[key](feats)
        if layout.sole_type:  # already in slot order: no copy
            (x,) = embedded.values()
            return x.contiguous()  # (a featureless type's embedding is an expanded view)
        # The dtype follows the projections' parameters (float32 unless the caller converts).
        dtype = next(iter(embedded.values())).dtype if embedded else torch.float32
        # Padding slots stay zero (finite through every later layer; never read).
        make = torch.zeros if layout.padded else torch.empty
        x = make(layout.num_slots, self.d_model, dtype=dtype, device=layout.slot_row.device)
        for name, emb in embedded.items():
            x.index_copy_(0, layout.type_positions[name], emb.to(dtype))
        return x

    def _fused(self, raw: dict[str, torch.Tensor], layout: BatchLayout) -> torch.Tensor | None:
        """The forward by the kernel, or None where it does not serve."""
        types: list[kernel.Projected | kernel.Placed] = []
        for name, feats in raw.items():
            key = _module_key(name)
            positions = layout.type_positions[name]
            projection = self.projections[key]
            if isinstance(projection, _Constant):
                types.append(kernel.Placed(projection(feats), positions))
                continue
            norm = self.norms[key]
            linear, _, ln = projection
            types.append(
                kernel.Projected(
                    feats,
                    positions,
                    norm.scale_mean,
                    norm.scale_inv_std,
                    norm.clip,
                    linear.weight,
                    linear.bias,
                    ln.weight,
                    ln.bias,
                    ln.eps,
                )
            )
        return kernel.embed(types, layout.num_slots, self.d_model, layout.padded)


class _Projection(nn.Sequential):
    """Linear, ReLU, LayerNorm: the parameters the embedding kernel uses and, where it does not
    serve, the torch path, with the layer norm run by the pointwise kernel
    (:mod:`entityrl.nn.kernels.pointwise`); a Sequential, so parameter names stay
    ``<index>.weight``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linear, relu, norm = self
        # linear(x) as addmm with a contiguous copy of the transposed weight: autograd then
        # computes the weight's gradient as x^T dy, (features, entities) x (entities, d_model),
        # instead of linear's dy^T x, whose few output columns (one per input feature) run
        # about 4x slower over tens of thousands of entities.
        projected = torch.addmm(linear.bias, x, linear.weight.t().contiguous())
        return layer_norm(relu(projected), norm.weight, norm.bias, norm.eps)


class _Constant(nn.Module):
    """A learned embedding for entities that have no features at all."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.embedding = nn.Parameter(torch.randn(d_model) * 0.02)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.embedding.expand(feats.shape[0], -1)


def _module_key(name: str) -> str:
    """ModuleDict keys may not contain dots; entity names may."""
    return name.replace(".", "\u2024")
