"""Run an exported policy with onnxruntime: Observations in, the environment's Actions out.

numpy and onnxruntime only: no torch, no training code. The observation is turned into the
model's inputs by the same :class:`~entityrl.env.Batcher` the trainer's environments use, and
the chosen indices (or values, for continuous actions) back into actions naming entity ids,
so the policy sees exactly what it was trained on. A policy with memory (``net.memory``)
carries each episode's state from one call to the next, as the trained agent does; a policy
trained on stacked observations (``env.stack``) takes raw observations and stacks each
episode's history itself, as the trainer's :class:`~entityrl.env.stacking.StackedVecEnv` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
from entityrl.ragged import RaggedArray


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
        import onnxruntime as ort

        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        where = "the model" if isinstance(model, bytes) else str(model)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3  # warnings about unused initializers are noise here
        source = model if isinstance(model, bytes) else str(model)
        try:
            self.session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own exception types
            raise PolicyFileError(
                f"{where}: not an ONNX model onnxruntime can load ({err})"
            ) from None
        meta = self.session.get_modelmeta().custom_metadata_map
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
        self.state: npt.NDArray[np.float32] | None = None
        """With memory: per episode of the last call, the state to continue it from (None:
        every episode starts afresh)."""
        self.history: StackHistory | None = None
        """With stacking: what the episodes of the last call stack their next step onto."""
        self.episodes: int | None = None
        """The number of episodes the next call continues (None: it starts new ones); only
        for a policy with memory or stacking."""
        self.seed(seed)

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
        return self._decide_all([obs], new_episode)[1][0]

    def act(self, obs: Observation, *, new_episode: bool = False) -> dict[str, Action]:
        """One action per actor, for every action the observation offers (``new_episode``
        as for :meth:`decide`)."""
        return self.act_batch([obs], new_episode=new_episode)[0]

    # ------------------------------------------------------------------ many observations
    def act_batch(
        self,
        observations: Sequence[Observation],
        *,
        new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_] = False,
    ) -> list[dict[str, Action]]:
        """:meth:`act` for each observation (batched conversions, one model call each), each
        of its own episode; ``new_episode``: one flag for all, or one per observation."""
        batch, decisions = self._decide_all(observations, new_episode)
        chosen: dict[str, list[npt.NDArray[Any]]] = {n: [] for n in self.action_space}
        for decision in decisions:
            for name, probs in decision.probs.items():
                chosen[name].append(self._choose(probs)[:, None])
            for name, mean in decision.mean.items():
                chosen[name].append(self._sample(mean, decision.std[name]))
        ragged = {
            name: RaggedArray(np.concatenate(picks), batch.action_masks[name].actors.lengths)
            for name, picks in chosen.items()
        }
        return self.batcher.unbatch(ragged, observations)

    # ------------------------------------------------------------------ internals
    def _decide_all(
        self,
        observations: Sequence[Observation],
        new_episode: bool | Sequence[bool] | npt.NDArray[np.bool_],
    ) -> tuple[VecObs, list[Decision]]:
        """The batch the model saw (stacked, with stacking) and the decision of every row, each
        from its episode's state and history; keeps the new ones."""
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
        states = None
        if self.state_size is not None:
            states = np.zeros((rows, self.state_size), np.float32)
            if self.state is not None and not fresh.all():
                states = np.where(fresh[:, None], states, self.state)
        decisions = []
        next_states = []
        for row in range(rows):
            feeds = model_inputs(batch, row, self.action_space)
            if states is not None:
                feeds[signature.STATE] = states[row]
            outputs = self.session.run(
                self.output_names, {k: v for k, v in feeds.items() if k in self.input_names}
            )
            named = dict(zip(self.output_names, outputs, strict=True))
            decisions.append(self._decision(named, batch, row))
            if states is not None:
                next_states.append(named[signature.NEXT_STATE])
        # Kept only once every row has run, so that a failing call leaves the episodes as they
        # were (and so does a call without observations: it is no step of any episode).
        if rows and (self.state_size is not None or self.stack is not None):
            self.state = np.stack(next_states) if next_states else None
            self.history, self.episodes = history, rows
        return batch, decisions

    def _decision(self, named: dict[str, Any], batch: VecObs, row: int) -> Decision:
        """Row ``row``'s decision from the model's outputs, by name. A global action the
        observation does not offer still gets its row: it is dropped."""
        decision = Decision({}, float(named[signature.VALUE][0]))
        for name, layout in self.layouts.items():
            actors = batch.action_masks[name].actors.lengths[row]
            if layout.gaussian:
                decision.mean[name] = named[signature.mean_output(name)][:actors]
                decision.std[name] = named[signature.std_output(name)]
            else:
                decision.probs[name] = named[signature.probs_output(name)][:actors]
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
        cumulative = np.cumsum(probs, axis=1, dtype=np.float64)
        # In (0, total]: a choice of probability 0 adds no width, so it is never drawn.
        draw = (1.0 - self.rng.random(probs.shape[0])) * cumulative[:, -1]
        picks = (cumulative < draw[:, None]).sum(axis=1)
        return np.minimum(picks, probs.shape[1] - 1).astype(np.int64)

    def __repr__(self) -> str:
        env = self.env.get("id", "an unknown environment")
        return f"<OnnxPolicy for {env}, entityrl {self.version}>"


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


def _row(array: RaggedArray, row: int) -> npt.NDArray[Any]:
    return array.data[array.offsets[row] : array.offsets[row + 1]]
