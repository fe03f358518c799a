"""Run an exported policy with onnxruntime: Observations in, the environment's Actions out.

numpy and onnxruntime only: no torch, no training code. Observations are turned into the
model's inputs by the same :class:`~entityrl.env.Batcher` the trainer's environments use, and
the chosen indices (or values, for continuous actions) back into actions naming entity ids,
so the policy sees exactly what it was trained on; a single observation takes a direct path
with the same semantics (:mod:`entityrl.inference.single`), without the batcher's general
bookkeeping. A policy with memory (``net.memory``) carries each episode's state from one call
to the next, as the trained agent does; a policy trained on stacked observations
(``env.stack``) takes raw observations and stacks each episode's history itself, as the
trainer's :class:`~entityrl.env.stacking.StackedVecEnv` does.
"""

from __future__ import annotations

import base64
import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from entityrl.env.batching import Batcher
from entityrl.env.observation import Action, Observation
from entityrl.env.space_data import spaces_from_data
from entityrl.env.spaces import ActionSpace
from entityrl.env.stacking import StackHistory, stack_onto, unstacked_space
from entityrl.env.validator import validate_observation
from entityrl.env.vec_obs import VecCategoricalMask, VecObs, VecSelectEntityMask
from entityrl.inference import signature
from entityrl.inference.single import Prepared, SingleObservation, applies
from entityrl.ragged import RaggedArray

_GLOBAL = (signature.Layout.GLOBAL, signature.Layout.GLOBAL_VALUES)
"""The layouts decided once per observation, offered or not."""


class PolicyFileError(ValueError):
    """A file is not a policy this runtime can run."""


@dataclass
class Decision:
    """What the policy makes of one observation: per discrete action, one row of
    probabilities per actor (over the choices, or over the candidates of a select-entity
    action); per continuous action the Gaussian its actors' values are drawn from, each
    actor's ``mean`` (actors, components) and the ``std`` (components,) they share; and the
    value."""

    probs: dict[str, npt.NDArray[np.float32]]
    value: float
    mean: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    std: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)


class OnnxPolicy:
    """An exported policy in an onnxruntime session (see :func:`load`).

    :meth:`act` samples each actor's action from the policy with the policy's own random
    generator (:meth:`seed`), or with ``deterministic`` takes the most probable one (the mean,
    for a continuous action).

    A policy with memory (:attr:`state_size` not None) or trained on stacked observations
    (:attr:`stack` not None) keeps, after every :meth:`decide`, :meth:`act` or
    :meth:`act_batch`, what each episode it decided for carries on with (the state,
    :attr:`state`, one row per observation of the call; the stacked history) and starts the
    next call of as many observations from it: every call is one step of the same episodes,
    in the same order. An episode starts afresh (from a zero state, with no history): the first
    call, every call after :meth:`reset`, and the observations flagged ``new_episode``. Any
    other policy ignores all of this.
    """

    def __init__(
        self,
        model: str | Path | bytes,
        *,
        deterministic: bool = False,
        seed: int | None = None,
        threads: int = 1,
        check: bool = True,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.where = where = "the model" if isinstance(model, bytes) else str(model)
        try:
            self.session = self._session(model if isinstance(model, bytes) else str(model))
        except Exception as err:  # onnxruntime raises its own exception types
            raise PolicyFileError(
                f"{where}: not an ONNX model onnxruntime can load ({err})"
            ) from None
        self.run_options = _run_options()
        self.batched: tuple[Any, set[str]] | None = None
        """The session of the batched model and its inputs (:meth:`_batched_session`), once
        made."""
        meta = self.metadata = self.session.get_modelmeta().custom_metadata_map
        if meta.get(signature.FORMAT_KEY) != signature.FORMAT:
            raise PolicyFileError(
                f"{where}: not an entityrl policy "
                f"(expected metadata {signature.FORMAT_KEY}={signature.FORMAT!r}, got "
                f"{meta.get(signature.FORMAT_KEY)!r}); export one with `entityrl export RUN_DIR`"
            )
        model_space, self.action_space = spaces_from_data(json.loads(meta[signature.SPACES_KEY]))
        try:
            self.layouts = {
                name: signature.action_layout(name, space)
                for name, space in self.action_space.items()
            }
            self.state_size = signature.state_size(meta)
            self.stack = signature.stack_steps(meta)
            # The observations fed: those the model takes, or with stacking the raw ones.
            self.obs_space = (
                model_space if self.stack is None else unstacked_space(model_space, self.stack)
            )
        except ValueError as err:
            raise PolicyFileError(f"{where}: {err}") from None
        self.env: dict[str, Any] = json.loads(meta.get(signature.ENV_KEY, "{}"))
        self.version = meta.get(signature.VERSION_KEY, "")
        self.deterministic = deterministic
        self.check = check
        self.batcher = Batcher(self.obs_space, self.action_space)
        self.batcher.entity_keys = self.stack is not None  # stacking follows entities by id
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.output_names = [o.name for o in self.session.get_outputs()]
        if self.state_size is not None and not (
            signature.STATE in self.input_names and signature.NEXT_STATE in self.output_names
        ):
            raise PolicyFileError(
                f"{where}: its metadata declares a state ({signature.STATE_KEY}), but the model "
                f"lacks the input {signature.STATE!r} or the output {signature.NEXT_STATE!r} "
                f"(inputs {sorted(self.input_names)}, outputs {self.output_names})"
            )
        self.single: SingleObservation | None = None
        """The direct path of single decisions (:mod:`entityrl.inference.single`): for every
        policy but a stacked one (stacking works on batches) whose actions are all of the
        built-in kinds. Set it to None to decide single observations through the batcher."""
        self.unpadded_session: Any = None
        """The session of the model for the common observation (:data:`signature.UNPADDED_KEY`),
        which :attr:`single` decides the observations it applies to with; None where the file
        has none (exported by an earlier entityrl) or there is no :attr:`single`."""
        if self.stack is None and applies(self.action_space):
            unpadded = None
            encoded = meta.get(signature.UNPADDED_KEY)
            if encoded is not None:
                self.unpadded_session = self._session(base64.b64decode(encoded))
                unpadded = {i.name for i in self.unpadded_session.get_inputs()}
            self.single = SingleObservation(
                self.obs_space, self.action_space, self.input_names, unpadded
            )
        self.state: npt.NDArray[np.float32] | None = None
        """With memory: per episode of the last call, the state to continue it from (None:
        every episode starts afresh)."""
        self.history: StackHistory | None = None
        """With stacking: what the episodes of the last call stack their next step onto."""
        self.episodes: int | None = None
        """The number of episodes the next call continues (None: it starts new ones); only
        for a policy with memory or stacking."""
        self.seed(seed)

    def _session(self, model: str | bytes) -> Any:
        """An onnxruntime session of ``model`` (a path or the serialized model) on the CPU,
        on :attr:`threads` threads, its nodes run one after another (onnxruntime's graph
        optimizations at their default, all: fastest, see benchmarks/inference.py)."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    def seed(self, seed: int | None) -> None:
        """Make sampled actions reproducible (None: seed from the operating system)."""
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        """Forget every episode's state (memory) and history (stacking): the next call starts
        new episodes."""
        self.state, self.history, self.episodes = None, None, None

    # ------------------------------------------------------------------ one observation
    def decide(self, obs: Observation, *, new_episode: bool = False) -> Decision:
        """The action probabilities and value of ``obs``; ``new_episode``: ``obs`` is the
        first observation of an episode (with memory: start it from zeros)."""
        if self.single is None:
            return self.decide_batch([obs], new_episode=new_episode)[0]
        return self._decide_one(obs, new_episode)

    def act(self, obs: Observation, *, new_episode: bool = False) -> dict[str, Action]:
        """One action per actor, for every action the observation offers (``new_episode``
        as for :meth:`decide`)."""
        if self.single is None:
            return self.act_batch([obs], new_episode=new_episode)[0]
        return self._act_one(obs, new_episode)

    # ------------------------------------------------------------------ many observations
    def decide_batch(
        self,
        observations: Sequence[Observation],
        *,
        new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_] = False,
    ) -> list[Decision]:
        """:meth:`decide` for each observation, in one model call, each of its own episode
        (``new_episode`` as for :meth:`act_batch`)."""
        if len(observations) == 1 and self.single is not None:
            return [self._decide_one(observations[0], new_episode)]
        batch, outputs = self._run(observations, new_episode)
        return [self._decision(outputs, batch, row) for row in range(batch.num_rows)]

    def act_batch(
        self,
        observations: Sequence[Observation],
        *,
        new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_] = False,
    ) -> list[dict[str, Action]]:
        """:meth:`act` for each observation (one conversion, one model call), each of its own
        episode; ``new_episode``: one flag for all, or one per observation."""
        if len(observations) == 1 and self.single is not None:
            return [self._act_one(observations[0], new_episode)]
        batch, outputs = self._run(observations, new_episode)
        return self._actions(batch, outputs, observations)

    # ------------------------------------------------------------------ internals
    def _actions(
        self, batch: VecObs, outputs: dict[str, Any], observations: Sequence[Observation]
    ) -> list[dict[str, Action]]:
        """Each observation's actions, chosen from the model's outputs for ``batch``."""
        if not observations:  # nothing ran
            return []
        ragged = {}
        for name, layout in self.layouts.items():
            actors = batch.action_masks[name].actors.lengths
            # A global action has a row per observation, offered or not.
            offered = actors > 0 if layout in _GLOBAL else slice(None)
            if layout.gaussian:
                mean = outputs[signature.mean_output(name)][offered]
                picks = self._sample(mean, outputs[signature.std_output(name)])
            else:
                picks = self._choose(outputs[signature.probs_output(name)][offered])[:, None]
            ragged[name] = RaggedArray(picks, actors)
        return self.batcher.unbatch(ragged, observations)

    def _run(
        self,
        observations: Sequence[Observation],
        new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_],
    ) -> tuple[VecObs, dict[str, npt.NDArray[Any]]]:
        """The batch the model saw (stacked, with stacking) and the model's outputs for all its
        rows, each from its episode's state and history, in one call: of the one-observation
        model for one row, of the batched model for more (outputs as the batched model lays
        them out). Keeps the new states and histories."""
        rows = len(observations)
        fresh = self._fresh(rows, new_episode)
        if self.check:
            for obs in observations:
                validate_observation(obs, self.obs_space, self.action_space, "observation")
        batch = self.batcher.batch(observations)
        # Rows of the last call carry on where not fresh (all fresh: the last call may have had
        # another number of rows).
        history = None
        if self.stack is not None:
            carried = None if fresh.all() else self.history
            batch, history = stack_onto(batch, carried, fresh, self.stack)
        if rows == 0:  # no step of any episode: nothing to run, nothing kept
            return batch, {}
        states = None
        if self.state_size is not None:
            states = np.zeros((rows, self.state_size), np.float32)
            if self.state is not None and not fresh.all():
                states = np.where(fresh[:, None], states, self.state)
        if rows == 1:
            session, wanted = self.session, self.input_names
            feeds = model_inputs(batch, 0, self.action_space)
            if states is not None:
                feeds[signature.STATE] = states[0]
        else:
            session, wanted = self._batched_session()
            feeds = batched_inputs(batch, self.action_space)
            if states is not None:
                feeds[signature.STATE] = states
        feeds = {k: v for k, v in feeds.items() if k in wanted}
        values = session.run(self.output_names, feeds, self.run_options)
        outputs = dict(zip(self.output_names, values, strict=True))
        # Kept only once the model has run, so that a failing call leaves the episodes as they
        # were.
        if self.state_size is not None or self.stack is not None:
            if self.state_size is not None:
                self.state = outputs[signature.NEXT_STATE].reshape(rows, self.state_size)
            self.history, self.episodes = history, rows
        return batch, outputs

    def _act_one(
        self, obs: Observation, new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_]
    ) -> dict[str, Action]:
        """:meth:`act` through :attr:`single`."""
        assert self.single is not None
        prepared, outputs = self._run_one(obs, new_episode)
        return self.single.actions_of(obs, prepared, outputs, self._choose, self._sample)

    def _decide_one(
        self, obs: Observation, new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_]
    ) -> Decision:
        """:meth:`decide` through :attr:`single` (:meth:`_decision` for its one row)."""
        prepared, outputs = self._run_one(obs, new_episode)
        decision = Decision({}, float(outputs[signature.VALUE][0]))
        for name, layout in self.layouts.items():
            count = prepared.actors[name]
            if layout.gaussian:
                mean = outputs[signature.mean_output(name)]
                decision.mean[name] = mean[:count] if layout in _GLOBAL else mean
                decision.std[name] = outputs[signature.std_output(name)]
                continue
            probs = outputs[signature.probs_output(name)]
            decision.probs[name] = probs[:count] if layout in _GLOBAL else probs
        return decision

    def _run_one(
        self, obs: Observation, new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_]
    ) -> tuple[Prepared, dict[str, npt.NDArray[Any]]]:
        """:meth:`_run` for one observation through :attr:`single`: its inputs and the
        model's outputs, from its episode's state (kept, as :meth:`_run` keeps it)."""
        assert self.single is not None
        if new_episode is False and self.episodes in (None, 1):  # the common call, checked
            fresh = self.episodes is None
        else:
            fresh = bool(self._fresh(1, new_episode)[0])
        if self.check:
            validate_observation(obs, self.obs_space, self.action_space, "observation")
        prepared = self.single.prepare(obs)
        size = self.state_size
        if size is not None:
            carried = self.state is not None and not fresh
            state = self.state[0] if carried else np.zeros(size, np.float32)  # type: ignore[index]
            prepared.feeds[signature.STATE] = state
        session = self.session if prepared.padded else self.unpadded_session
        values = session.run(self.output_names, prepared.feeds, self.run_options)
        outputs = dict(zip(self.output_names, values, strict=True))
        if size is not None:
            self.state = outputs[signature.NEXT_STATE].reshape(1, size)
            self.history, self.episodes = None, 1
        return prepared, outputs

    def _batched_session(self) -> tuple[Any, set[str]]:
        """The onnxruntime session of the batched model, made on first use (a policy asked for
        one observation at a time never needs it), and its input names."""
        if self.batched is None:
            encoded = self.metadata.get(signature.BATCHED_KEY)
            if encoded is None:
                raise PolicyFileError(
                    f"{self.where}: no batched model (metadata {signature.BATCHED_KEY}): "
                    "exported by an entityrl that decided one observation at a time; export it "
                    "again with `entityrl export RUN_DIR` to decide several in one call"
                )
            session = self._session(base64.b64decode(encoded))
            self.batched = session, {i.name for i in session.get_inputs()}
        return self.batched

    def _decision(self, outputs: dict[str, Any], batch: VecObs, row: int) -> Decision:
        """Row ``row``'s decision from the model's outputs, by name. A global action the
        observation does not offer still gets its row: it is dropped."""
        decision = Decision({}, float(outputs[signature.VALUE][row]))
        for name, layout in self.layouts.items():
            mask = batch.action_masks[name]
            if layout in _GLOBAL:
                lo, hi = row, row + mask.actors.lengths[row]
            else:
                lo, hi = mask.actors.offsets[row], mask.actors.offsets[row + 1]
            if layout.gaussian:
                decision.mean[name] = outputs[signature.mean_output(name)][lo:hi]
                decision.std[name] = outputs[signature.std_output(name)]
                continue
            probs = outputs[signature.probs_output(name)][lo:hi]
            if layout is signature.Layout.CANDIDATES:
                assert isinstance(mask, VecSelectEntityMask)  # the batched mask of that kind
                probs = probs[:, : mask.actees.lengths[row]]  # the row's own candidates
            decision.probs[name] = probs
        return decision

    def _fresh(
        self, rows: int, new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.bool_]:
        """Per row, whether its episode starts afresh in this call: flagged, or no episode to
        continue. Raises ValueError for flags that are not one per row, and for a call that
        continues episodes of a call of another number of rows."""
        fresh = np.asarray(new_episode, dtype=np.bool_)
        if fresh.ndim == 0:
            fresh = np.full(rows, bool(fresh))
        elif fresh.shape != (rows,):
            raise ValueError(
                f"new_episode: expected one flag, or one per observation ({rows}), got "
                f"{fresh.size} flags of shape {fresh.shape}"
            )
        if self.episodes is None:
            return np.ones(rows, np.bool_)
        if self.episodes != rows and not fresh.all():
            raise ValueError(
                f"{rows} observation(s) given, but the policy carries the states of "
                f"{self.episodes} episode(s) from its last call; expected one observation "
                "per episode, in the same order, or new episodes: call reset() or pass "
                "new_episode=True"
            )
        return fresh

    def _sample(
        self, mean: npt.NDArray[np.float32], std: npt.NDArray[np.float32]
    ) -> npt.NDArray[np.float32]:
        """Each row's values: the mean, or drawn from the Gaussian (the environment gets them
        clipped to the bounds, as the trained agent's)."""
        if self.deterministic:
            return mean
        return (mean + std * self.rng.standard_normal(mean.shape)).astype(np.float32)

    def _choose(self, probs: npt.NDArray[np.float32]) -> npt.NDArray[np.int64]:
        """Each row's most probable index, or one drawn from it."""
        if probs.shape[0] == 0:
            return np.zeros(0, dtype=np.int64)
        if self.deterministic:
            return probs.argmax(axis=1).astype(np.int64)
        if probs.shape[0] == 1 and probs.shape[1]:
            return draw_one(probs[0], self.rng)
        return draw_rows(probs, self.rng)

    def __repr__(self) -> str:
        env = self.env.get("id", "an unknown environment")
        return f"<OnnxPolicy for {env}, entityrl {self.version}>"


def _run_options() -> Any:
    """onnxruntime's options for every call: the models run on the CPU only, so the wait for
    the execution providers to synchronize at the end of a call is skipped (about 2 us of a
    60 us single decision; benchmarks/RESULTS.md)."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.add_run_config_entry("disable_synchronize_execution_providers", "1")
    return options


def draw_rows(probs: npt.NDArray[np.float32], rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """An index drawn from each row of ``probs`` (rows, at least one column), with one draw of
    ``rng`` per row."""
    cumulative = np.cumsum(probs, axis=1, dtype=np.float64)
    # In (0, total]: a choice of probability 0 adds no width, so it is never drawn.
    draw = (1.0 - rng.random(probs.shape[0])) * cumulative[:, -1]
    picks = (cumulative < draw[:, None]).sum(axis=1)
    return np.minimum(picks, probs.shape[1] - 1).astype(np.int64)


def draw_one(row: npt.NDArray[np.float32], rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """:func:`draw_rows` of one row (not empty), the same pick for the same draw, in plain
    Python, cheaper than numpy on a few numbers (a single decision's): the sums are float64,
    in order, as np.cumsum's, and the entries below the draw are counted by bisection (the
    sums never decrease)."""
    cumulative = list(accumulate(row.tolist()))
    draw = (1.0 - rng.random()) * cumulative[-1]
    return np.array([min(bisect_left(cumulative, draw), len(cumulative) - 1)], dtype=np.int64)


def model_inputs(
    batch: VecObs, row: int, action_space: Mapping[str, ActionSpace]
) -> dict[str, npt.NDArray[Any]]:
    """The model inputs (:mod:`entityrl.inference.signature`) of one row of ``batch``."""
    feeds: dict[str, npt.NDArray[Any]] = {}
    visible = []
    for name, feats in batch.features.items():
        lo, hi = feats.offsets[row], feats.offsets[row + 1]
        feeds[signature.features_input(name)] = feats.data[lo:hi]
        flags = batch.visible.get(name)
        visible.append(np.ones(hi - lo, np.bool_) if flags is None else flags.data[lo:hi, 0])
    if batch.global_features.shape[1]:
        feeds[signature.GLOBAL_FEATURES] = batch.global_features[row]
    for name, pixels in batch.images.items():
        feeds[signature.image_input(name)] = pixels[row : row + 1]
    feeds[signature.VISIBLE] = np.concatenate(visible) if visible else np.zeros(0, np.bool_)
    for name, space in action_space.items():
        mask = batch.action_masks[name]
        layout = signature.action_layout(name, space)
        if layout is signature.Layout.GLOBAL_VALUES:
            continue  # decided for the whole observation, with nothing to say who acts
        actors = _row(mask.actors, row)[:, 0]
        if layout is signature.Layout.VALUES:
            feeds[signature.actors_input(name)] = actors
            continue
        if layout is signature.Layout.CANDIDATES:
            assert isinstance(mask, VecSelectEntityMask)  # the batched mask of that kind
            actees = _row(mask.actees, row)[:, 0]
            shape = (actors.shape[0], actees.shape[0])
            legal = np.ones(shape, np.bool_) if mask.mask is None else _row(mask.mask, row)
            feeds[signature.actors_input(name)] = actors
            feeds[signature.actees_input(name)] = actees
            feeds[signature.mask_input(name)] = legal.reshape(shape)
            continue
        assert isinstance(mask, VecCategoricalMask)  # the batched mask of both choice kinds
        shape = (actors.shape[0], signature.choices(space))
        legal = np.ones(shape, np.bool_) if mask.mask is None else _row(mask.mask, row)
        if layout is signature.Layout.GLOBAL:
            # The model decides for the whole observation whether or not it is asked to.
            feeds[signature.mask_input(name)] = (
                legal if shape[0] else np.ones((1, shape[1]), np.bool_)
            )
        else:
            feeds[signature.actors_input(name)] = actors
            feeds[signature.mask_input(name)] = legal
    return feeds


def batched_inputs(
    batch: VecObs, action_space: Mapping[str, ActionSpace]
) -> dict[str, npt.NDArray[Any]]:
    """The batched model's inputs (:func:`signature.batched_input_specs`) of every row of
    ``batch``, in numpy without a loop over rows."""
    rows = batch.num_rows
    feeds: dict[str, npt.NDArray[Any]] = {}
    visible, entity_rows, columns = [], [], []
    within = np.zeros(rows, np.int64)  # per row, its entities of the types so far
    for name, feats in batch.features.items():
        feeds[signature.features_input(name)] = feats.data
        flags = batch.visible.get(name)
        visible.append(np.ones(len(feats.data), np.bool_) if flags is None else flags.data[:, 0])
        row = np.repeat(np.arange(rows), feats.lengths)
        entity_rows.append(row)
        # Entity j of a row's entities of this type comes after its entities of earlier types.
        columns.append(np.arange(len(row)) - feats.offsets[row] + within[row])
        within += feats.lengths
    none = np.zeros(0, np.int64)  # for spaces without entity types
    row_of = np.concatenate([*entity_rows, none])
    width = max(int(within.max(initial=0)), 1)
    slots = np.full((rows, width), len(row_of), np.int64)
    slots[row_of, np.concatenate([*columns, none])] = np.arange(len(row_of))
    feeds[signature.SLOTS] = slots
    feeds[signature.ENTITY_ROWS] = row_of
    feeds[signature.VISIBLE] = np.concatenate([*visible, np.zeros(0, np.bool_)])
    if batch.global_features.shape[1]:
        feeds[signature.GLOBAL_FEATURES] = batch.global_features
    for name, pixels in batch.images.items():
        feeds[signature.image_input(name)] = pixels
    first = np.arange(rows) * (width + 2)  # each row's first grid position
    for name, space in action_space.items():
        mask = batch.action_masks[name]
        layout = signature.action_layout(name, space)
        if layout is signature.Layout.GLOBAL_VALUES:
            continue  # decided for every observation, with nothing to say who acts
        if layout is signature.Layout.GLOBAL:
            assert isinstance(mask, VecCategoricalMask)  # the batched mask of both choice kinds
            # Every row gets a mask: all legal where the action is not offered.
            table = np.ones((rows, signature.choices(space)), np.bool_)
            if mask.mask is not None:
                table[mask.actors.lengths > 0] = mask.mask.data.reshape(-1, table.shape[1])
            feeds[signature.mask_input(name)] = table
            continue
        actors = mask.actors.data[:, 0] + np.repeat(first, mask.actors.lengths)
        feeds[signature.actors_input(name)] = actors
        if layout is signature.Layout.CANDIDATES:
            assert isinstance(mask, VecSelectEntityMask)  # the batched mask of that kind
            candidates, legal = _candidates(mask, first)
            feeds[signature.actees_input(name)] = candidates
            feeds[signature.mask_input(name)] = legal
        elif layout is signature.Layout.CHOICES:
            assert isinstance(mask, VecCategoricalMask)
            shape = (len(actors), signature.choices(space))
            legal = np.ones(shape, np.bool_) if mask.mask is None else mask.mask.data
            feeds[signature.mask_input(name)] = legal.reshape(shape)
    return feeds


def _candidates(
    mask: VecSelectEntityMask, first: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Each actor's candidates as grid positions ``(actors, most candidates, at least 1)``,
    padded with position 0, and its mask, False at the padding."""
    actors, actees = mask.actors, mask.actees
    actor_row = np.repeat(np.arange(len(actors.lengths)), actors.lengths)
    counts = actees.lengths[actor_row]
    within = np.arange(max(int(counts.max(initial=0)), 1))
    inside = within < counts[:, None]
    # Appended: what the padding reads (position 0; not legal).
    positions = np.append(actees.data[:, 0] + np.repeat(first, actees.lengths), 0)
    starts = actees.offsets[actor_row][:, None]
    candidates = positions[np.where(inside, starts + within, len(positions) - 1)]
    if mask.mask is None:
        return candidates, inside
    # A row's mask is actor after actor, each over the row's candidates.
    legal = np.append(mask.mask.data.reshape(-1), False)
    own = (np.arange(len(actor_row)) - actors.offsets[actor_row]) * counts
    cells = (mask.mask.offsets[actor_row] + own)[:, None] + within
    return candidates, legal[np.where(inside, cells, len(legal) - 1)]


def _row(array: RaggedArray, row: int) -> npt.NDArray[Any]:
    return array.data[array.offsets[row] : array.offsets[row + 1]]
