"""The protocol every kind of action implements, and what per-actor and global kinds share.

An action kind is one class of action space (categorical, select-entity, continuous, ...) and
everything the environment layer does with it: its mask in an observation, the batched mask
in a :class:`~entityrl.env.vec_obs.VecObs`, the values a VecEnv takes for it (one row of
:meth:`ActionKind.width` numbers of :attr:`ActionKind.dtype` per actor), how those values
become the action handed to ``Environment.act`` (and back: :meth:`ActionKind.action_values`),
the checks of all of these, a random choice, what a person may pick from
(:meth:`ActionKind.options`) and how batches of it are stored (:meth:`ActionKind.mask_columns`).
The network's part (head and distribution) is in :mod:`entityrl.nn.heads`, keyed by
the same space class, so that this layer never imports torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from entityrl.env.entities import EntityID, named_entities
from entityrl.ragged import RaggedArray

ActionConstructor = Callable[..., Any]
"""Builds the action handed to an environment, from the arguments of entityrl's own action
class of the kind (in their order)."""


@dataclass(frozen=True)
class Column:
    """How one ragged array of a kind's batched mask or values is stored outside a batch (in
    recordings): numbers of ``dtype``, ``width`` of them per item, or one plain number per item
    when ``width`` is None."""

    dtype: np.dtype
    width: int | None = None


ENTITY_INDICES = Column(np.dtype(np.int64))
"""One entity index (within its row) per item: the actors of every batched mask, the
candidates of a select-entity one."""


@dataclass(frozen=True)
class Options:
    """What the actors of one row may choose, for a person to pick from.

    ``actors``: their entity indices in the row; ``legal``: bool ``(actors, options)``. Option
    ``j`` is the value ``j`` a VecEnv takes. The options are the space's choices, named by
    ``labels``; or, where ``entities`` is given, entities of the row (``entities[j]``, the
    entity index of option ``j``: the candidates of a select-entity action).
    """

    actors: list[int]
    legal: npt.NDArray[np.bool_]
    labels: Sequence[str] = ()
    entities: list[int] | None = None


@dataclass(frozen=True)
class Unbatching:
    """What turning one action's batched values into per-environment actions needs besides
    the values: the observations they answer, the action's name, the entity types in batch
    order, and the constructor of the actions handed to the environments."""

    observations: Sequence[Any]
    name: str
    type_names: Sequence[str]
    make: ActionConstructor


class ActionKind(ABC):
    """One kind of action. Subclasses name their classes and implement the hooks below; the
    batcher, the VecEnvs, the validator, the random policy, the space descriptions of
    checkpoints, recordings, the Gymnasium and PettingZoo adapters and the terminal player
    call nothing else."""

    space: ClassVar[type]
    """The action space class (what ``Environment.action_space()`` returns per action)."""
    mask: ClassVar[type]
    """The class of the mask an observation gives per action (who acts, what is legal)."""
    action: ClassVar[type]
    """The class of the action ``Environment.act`` receives."""
    vec_mask: ClassVar[type]
    """The class of the batched mask in ``VecObs.action_masks``."""
    global_actor: ClassVar[bool] = False
    """Taken once per row, by the row's pseudo-entity (index = number of entities)."""
    dtype: ClassVar[np.dtype] = np.dtype(np.int64)
    """The dtype of the values a VecEnv takes for this kind."""
    discrete: ClassVar[bool] = True
    """Each actor picks one of a list of options (a choice, a candidate entity), which
    :meth:`options` lists; False where the values are numbers (continuous kinds)."""

    def width(self, space: Any) -> int:
        """The number of values per actor a VecEnv takes."""
        return 1

    # ---------------------------------------------------------------- plain data
    def to_data(self, space: Any) -> dict[str, Any]:
        """The space's settings as JSON-compatible data (its kind is added by the caller)."""
        return {"choices": list(getattr(space, "choices", ()))}

    @abstractmethod
    def from_data(self, data: Mapping[str, Any]) -> Any:
        """The inverse of :meth:`to_data`."""

    def choices(self, space: Any) -> Sequence[str] | None:
        """The labels of the fixed list every actor picks from (its value: the index of its
        pick), or None where the options vary by row (candidate entities) or the values are
        numbers."""
        return None

    def options(self, space: Any, mask: Any, row: int) -> Options:
        """What the actors of row ``row`` of the batched ``mask`` may choose (kinds that are
        :attr:`discrete`)."""
        raise NotImplementedError(
            f"{type(self).__name__} is discrete but does not list its options "
            "(ActionKind.options), so nobody can pick from them"
        )

    # ---------------------------------------------------------------- stored batches
    def mask_columns(self, space: Any) -> dict[str, Column]:
        """The ragged arrays a batched mask is stored as (in recordings), by name, in order
        (any name but ``action``, which holds the values)."""
        return {"actors": ENTITY_INDICES}

    def mask_to_columns(self, space: Any, mask: Any) -> dict[str, RaggedArray]:
        """The arrays of :meth:`mask_columns` of a batched mask, every one present (a mask
        that allows everything stored as all true)."""
        return {"actors": mask.actors}

    @abstractmethod
    def mask_from_columns(self, space: Any, columns: Mapping[str, RaggedArray]) -> Any:
        """The inverse of :meth:`mask_to_columns` (a mask that allows everything as None)."""

    def value_column(self, space: Any) -> Column:
        """How the values a VecEnv took are stored: one plain number per actor (the width of
        1 of :meth:`width`), unless the kind says otherwise."""
        return Column(self.dtype)

    # ---------------------------------------------------------------- actions
    def action_values(self, space: Any, action: Any) -> npt.NDArray[Any]:
        """The values of ``action`` (of :attr:`action`, as ``Environment.act`` received it),
        ``(actors, width)`` of :attr:`dtype`, as a VecEnv takes them: the inverse of
        :meth:`unbatch` for one environment (continuous values as :meth:`to_env` clipped
        them). TypeError for an action of another class."""
        if not isinstance(action, self.action):
            raise TypeError(
                f"{type(self).__name__}: expected a {self.action.__name__}, got "
                f"{type(action).__name__}"
            )
        return np.asarray(self.numbers(action), dtype=self.dtype).reshape(-1, self.width(space))

    def numbers(self, action: Any) -> npt.ArrayLike:
        """The numbers ``action`` holds, actor by actor (:meth:`action_values` shapes them).
        Select-entity actions hold entity ids, not numbers, and do not implement it."""
        raise NotImplementedError(
            f"{type(self).__name__} does not say which numbers its actions hold "
            "(ActionKind.numbers)"
        )

    # ---------------------------------------------------------------- batching
    @abstractmethod
    def batch_mask(self, space: Any, specs: Sequence[Any], index: Any) -> Any:
        """The batched mask of ``specs`` (one mask or None per environment); ``index`` (the
        batcher's entity index) turns actor and actee specifications into entity indices."""

    @abstractmethod
    def unbatch(self, space: Any, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, Any]]:
        """``(environment, action)`` for every environment offered the action."""

    def to_env(self, space: Any, values: RaggedArray) -> RaggedArray:
        """The values an environment receives for ``values`` the policy gave (the same, unless
        the kind has a rule such as clipping to bounds)."""
        return values

    def check_values(self, name: str, space: Any, values: RaggedArray, mask: Any) -> None:
        """Reject values a VecEnv was given that are not of this kind or out of range, or that
        the mask forbids; the row count and the actors per row are already checked."""
        if values.features != self.width(space) or values.dtype.kind != self.dtype.kind:
            raise ValueError(
                f"action {name!r}: expected {self.expected(space)}, got "
                f"{values.dtype} with {values.features} features"
            )

    def expected(self, space: Any) -> str:
        """What a VecEnv takes for this kind, for messages."""
        return (
            f"a RaggedArray of {self.dtype} with {self._per_actor(space)} "
            f"(features={self.width(space)})"
        )

    def _per_actor(self, space: Any) -> str:
        return "one value per actor"

    @abstractmethod
    def random(self, space: Any, mask: Any, rng: np.random.Generator) -> npt.NDArray[Any]:
        """A uniformly random legal ``(actors, width)`` choice for every actor of ``mask``."""

    # ---------------------------------------------------------------- validation
    @abstractmethod
    def validate_mask(self, check: Any, field: str, space: Any, spec: Any) -> None:
        """Check one observation's mask (``check``: the validator's observation check)."""

    @abstractmethod
    def validate_vec_mask(self, check: Any, field: str, space: Any, mask: Any) -> None:
        """Check one batched mask (``check``: the validator's batch check)."""

    @abstractmethod
    def validate_action(self, check: Any, space: Any, action: Any, spec: Any) -> None:
        """Check one action given to ``act`` against the mask it answers (``check``: the
        validator's action check)."""

    @abstractmethod
    def offered(self, obs: Any, type_order: Sequence[str], spec: Any) -> int:
        """How many actors ``spec`` offers the action to in ``obs``."""


class PerActorKind(ActionKind):
    """A kind taken by some entities of a row, named by ids or by types (all, by default)."""

    def actors(self, specs: Sequence[Any], index: Any) -> RaggedArray:
        """Each row's actors (entity indices within the row)."""
        return index.select([None if s is None else (s.actor_ids, s.actor_types) for s in specs])  # type: ignore[no-any-return]

    def named_actors(
        self, values: RaggedArray, to: Unbatching
    ) -> Iterator[tuple[int, Any, list[EntityID], int, int]]:
        """For every environment offered the action: ``(environment, its mask, actor ids,
        first item, end item)`` of its row of ``values``."""
        bounds = values.offsets.tolist()
        name, type_names = to.name, to.type_names
        for i, obs in enumerate(to.observations):
            spec = obs.actions.get(name)
            if spec is None:
                continue
            lo, hi = bounds[i], bounds[i + 1]
            # Rows without actors are common (an action offered to nobody this step):
            # naming the actors would be wasted work.
            actors = (
                named_entities(obs, type_names, spec.actor_ids, spec.actor_types) if hi > lo else []
            )
            if len(actors) != hi - lo:  # ids that do not match the entities batched
                raise ValueError(
                    f"row {i}: action {name!r}: {hi - lo} actors were batched, but their "
                    f"ids name {len(actors)}"
                )
            yield i, spec, actors, lo, hi

    def offered(self, obs: Any, type_order: Sequence[str], spec: Any) -> int:
        return len(obs.named_entities(type_order, spec.actor_ids, spec.actor_types))


class GlobalKind(ActionKind):
    """A kind taken once per row, for the whole observation, by the row's pseudo-entity."""

    global_actor = True

    def actors(self, specs: Sequence[Any], index: Any) -> RaggedArray:
        """The pseudo-entity (indexed after all real entities) of every row offered the
        action."""
        present = np.fromiter((s is not None for s in specs), np.bool_, count=len(specs))
        return RaggedArray(index.totals[present].reshape(-1, 1), present.astype(np.int64))

    def offered(self, obs: Any, type_order: Sequence[str], spec: Any) -> int:
        return 1

    def offered_rows(self, values: RaggedArray, to: Unbatching) -> Iterator[tuple[int, int]]:
        """``(environment, its item of values)`` for every environment offered the action."""
        starts = values.offsets.tolist()
        for i, obs in enumerate(to.observations):
            if to.name in obs.actions:
                yield i, starts[i]

    def validate_vec_actors(self, check: Any, field: str, mask: Any) -> None:
        actors = check.ragged(
            f"{field}.actors", mask.actors, np.int64, 1, "one entity index per actor"
        )
        check.global_actor(f"{field}.actors", actors)
