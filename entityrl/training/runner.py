"""The training loop every algorithm shares: iterate, log, evaluate, checkpoint; repeat.

What one iteration does is the algorithm's (:mod:`entityrl.algorithms`, chosen by the
config's ``algo``): for PPO, ``rollout.num_envs * rollout.steps`` environment steps followed by
``ppo.update_epochs`` passes of minibatch updates; for behaviour cloning, one epoch over the
recordings. The loop stops once the algorithm's budget of samples is spent (``total_timesteps``
for PPO), when the algorithm, a callback or ``eval.stop_at_target`` asks, or after the current
iteration when interrupted with Ctrl-C (a second Ctrl-C aborts at once); either way it writes
a final checkpoint.
"""

from __future__ import annotations

import collections
import gc
import os
import signal
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import torch

from entityrl.algorithms.base import Context
from entityrl.algorithms.common.optimizer import adam
from entityrl.algorithms.common.reduce import Reducer
from entityrl.env.environment import Environment
from entityrl.env.multiplayer_vec import MultiPlayerSettingError
from entityrl.env.stacking import stacking
from entityrl.env.validator import EnvValidationError
from entityrl.env.vec_env import EnvFactory, VecEnv
from entityrl.nn.device import resolve_device
from entityrl.nn.rogue_net import RogueNet
from entityrl.training import checkpoint as ckpt
from entityrl.training import run_dir as run_dirs
from entityrl.training.async_sampler import check_async
from entityrl.training.callbacks import Callback
from entityrl.training.config import ConfigError, TrainConfig, load_config, to_dict, to_yaml
from entityrl.training.init_from import load_initial_weights
from entityrl.training.periodic_eval import BEST_FILE, PeriodicEvaluator
from entityrl.training.progress import ProgressReporter
from entityrl.training.run_log import RunLog
from entityrl.training.stuck import StuckDetector
from entityrl.training.threads import training_threads

EnvSource = str | EnvFactory | type[Environment]


@dataclass
class TrainResult:
    """What a finished (or interrupted) run leaves behind."""

    run_dir: Path
    checkpoint: Path
    steps: int
    mean_return: float | None
    """Mean return of the last (up to) 100 episodes."""
    seconds: float
    interrupted: bool
    """Stopped by Ctrl-C."""
    stop_reason: str | None = None
    """Why the run ended before its budget, when the algorithm (early stopping), a callback or
    eval.stop_at_target ended it."""
    eval_return: float | None = None
    """Mean return of the last periodic evaluation (``eval.interval``; None: none ran)."""


def make_env(
    config: TrainConfig,
    env: EnvSource | None = None,
    num_envs: int | None = None,
    seed_offset: int = 0,
) -> VecEnv:
    """The vectorized environment of a config (or of a custom environment class/factory).

    Environment ``i`` is seeded with ``config.seed + seed_offset + i``.
    """
    from entityrl.envs import make_vec, vectorize

    n = num_envs or config.rollout.num_envs
    seed = config.seed + seed_offset
    wrap = stacking(config.env.stack)
    if env is None or isinstance(env, str):
        return make_vec(
            env or config.env.id,
            n,
            seed=seed,
            processes=config.rollout.processes,
            validate=config.env.validate,
            wrap=wrap,
            answer_timeout=config.rollout.worker_timeout,
            backend=config.rollout.backend,
            ray_address=config.rollout.ray_address,
            decisions=config.env.decisions,
            **config.env.kwargs,
        )
    return vectorize(  # a class or a zero-argument callable
        env,
        n,
        seed,
        processes=config.rollout.processes,
        validate=config.env.validate,
        wrap=wrap,
        answer_timeout=config.rollout.worker_timeout,
        backend=config.rollout.backend,
        ray_address=config.rollout.ray_address,
        decisions=config.env.decisions,
    )


def make_local_env(
    config: TrainConfig, env: EnvSource | None, num_envs: int, seed_offset: int
) -> VecEnv:
    """Environments of the config's game (or of a custom one) stepping in this process,
    whatever the training's worker processes (for evaluation beside the training)."""
    serial = replace(config, rollout=replace(config.rollout, processes=1, backend="local"))
    return make_env(serial, env, num_envs, seed_offset)


def default_run_dir(config: TrainConfig) -> Path:
    return run_dirs.default_run_dir(config.env.id)


class _StopFlag:
    """First Ctrl-C: finish the current iteration and stop. Second: abort."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> _StopFlag:
        self._previous = signal.getsignal(signal.SIGINT)
        try:
            signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not in the main thread: keep default behaviour
            self._previous = None
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


class Trainer:
    """Owns the pieces of a run: environments, network, optimizer, the algorithm, log."""

    def __init__(
        self,
        config: TrainConfig,
        env: EnvSource | None = None,
        resume: str | Path | None = None,
        on_iteration: Callable[[dict[str, float]], None] | None = None,
        reducer: Reducer | None = None,
        callbacks: Sequence[Callback] = (),
    ) -> None:
        self.config = config
        self.on_iteration = on_iteration
        self.callbacks = list(callbacks)
        self.stop_reason: str | None = None
        self._warned_env_state = False
        # With several processes (see entityrl.training.distributed) each steps its share of
        # the environments; the reducer combines what they compute. Rank 0 logs and saves.
        self.reducer = reducer or Reducer()
        self.rank = self.reducer.rank
        self.run_dir = (
            Path(resume) if resume else Path(config.log.run_dir or default_run_dir(config))
        )
        # One trainer at a time in a run directory: rank 0 holds its lock until the run ends.
        self.lock = run_dirs.RunLock(self.run_dir) if self.rank == 0 else None
        # The run sets torch's threads for itself; the caller gets its own back at the end.
        self.caller_threads = torch.get_num_threads()
        if self.rank == 0:  # what a killed checkpoint write left behind
            ckpt.remove_stale_temp_files(self.run_dir)
        try:
            self._set_up(env, resume)
        except BaseException:
            self._release()
            raise

    def _set_up(self, env: EnvSource | None, resume: str | Path | None) -> None:
        """The run's pieces (environments, network, algorithm, log), restored from the
        checkpoint when resuming."""
        config = self.config
        if not resume and self.rank == 0:
            run_dirs.refuse_existing_run(self.run_dir)
        saved = ckpt.load_checkpoint(self.run_dir) if resume else None
        if saved is not None:
            _check_resumable(saved, config)
        # The cores are shared by the training processes of this machine (a launcher says how
        # many there are; world_size=N starts all N here).
        processes = int(os.environ.get("LOCAL_WORLD_SIZE", config.world_size))
        threads = training_threads(config.torch_threads, processes)
        if threads is not None:
            torch.set_num_threads(threads)
        self.device = resolve_device(config.device)
        torch.manual_seed(config.seed)  # the same initial network in every process
        self.rng = np.random.default_rng(config.seed + self.rank)
        from entityrl.algorithms import lookup

        algorithm = lookup(config.algo)
        algorithm.check(config)
        check_async(config, algorithm)
        per_rank = algorithm.num_envs(config) // self.reducer.world_size
        # Environment i of rank r is seeded like environment r * per_rank + i of one process.
        try:
            self.env = make_env(config, env, num_envs=per_rank, seed_offset=self.rank * per_rank)
        except MultiPlayerSettingError as err:
            raise ConfigError(str(err)) from None
        except (ValueError, TypeError) as err:
            # A constructor refusing the user's arguments (a bug in it keeps its traceback).
            if not config.env.kwargs or isinstance(err, EnvValidationError):
                raise
            raise ConfigError(f"env.kwargs: {err}") from None
        try:
            self.net = RogueNet(
                self.env.obs_space, self.env.action_space, config.net, device=self.device
            )
            # Each rank samples its own actions, from a generator of its own (on the device).
            self.generator = torch.Generator(self.device)
            self.generator.manual_seed(int(self.rng.integers(2**63)))
            self.optimizer = adam(self.net, config.optim)
            context = Context(
                config,
                self.env,
                self.net,
                self.optimizer,
                self.rng,
                self.generator,
                self.reducer,
                partial(make_local_env, config, env),
            )
            self.algorithm = algorithm(context)
        except BaseException:
            self.env.close()
            raise
        self.budget = self.algorithm.budget()
        if self.rank == 0 and self.algorithm.learns_from_episodes:
            self.callbacks.append(
                StuckDetector(config.stuck, self.budget, self.algorithm.discount())
            )
        self.step = 0
        self.iteration = 0
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=100)
        self.eval_return: float | None = None
        if saved is not None:
            self._restore(saved)
        elif config.init_from:
            # Weights and input normalization of an earlier run (e.g. behaviour cloning).
            load_initial_weights(self.net, config.init_from)
        self.algorithm.begin(resumed=saved is not None, pretrained=bool(config.init_from))
        self.log: RunLog | None = None
        # Evaluation runs in rank 0; every rank knows when, to take part in saving best.pt.
        self.evaluator: PeriodicEvaluator | None = None
        if config.eval.interval:
            self.next_eval = (self.step // config.eval.interval + 1) * config.eval.interval
            if self.rank == 0:
                self.evaluator = PeriodicEvaluator(config, env)
        if self.rank == 0:
            self.log = RunLog(
                self.run_dir,
                tensorboard=config.log.tensorboard,
                wandb_project=config.log.wandb_project,
                config=to_dict(config),
                resume_step=self.step if saved is not None else None,
            )
            ckpt.atomic_write(self.run_dir / "config.yaml", lambda f: f.write(to_yaml(config)), "w")

    def _release(self) -> None:
        torch.set_num_threads(self.caller_threads)
        if self.lock is not None:
            self.lock.release()

    # ------------------------------------------------------------------ state
    def state(self) -> dict[str, Any]:
        return {
            "config": to_dict(self.config),
            "model": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "iteration": self.iteration,
            # One entry per process: each samples actions and minibatches with its own RNGs.
            "rng": self.reducer.gather(
                {
                    "torch": torch.get_rng_state(),
                    "sampling": self.generator.get_state(),
                    "numpy": _jsonable(self.rng.bit_generator.state),
                }
            ),
            "spaces": ckpt.spaces_to_data(self.env.obs_space, self.env.action_space),
            "recent_returns": list(self.recent_returns),
            # One entry per process of each of the algorithm's keys.
            **{
                key: self.reducer.gather(value)
                for key, value in self.algorithm.state_dict().items()
            },
        }

    def save(self) -> Path:
        env_state, why = None, ""
        try:
            env_state = self.env.get_state(self.config.env.pickle_state)
        except NotImplementedError as err:  # resumed, such environments start new episodes
            why = str(err)
        states = self.reducer.gather(env_state)
        state = self.state()
        path = self.run_dir / ckpt.CHECKPOINT_FILE
        if self.rank == 0:
            saved_envs = None if any(s is None for s in states) else states
            if saved_envs is None and not self._warned_env_state:
                self._warned_env_state = True
                why = why or "another training process could not save its share"
                warnings.warn(
                    f"the environments' state is not saved in checkpoints ({why}); a resumed "
                    "run starts new episodes. With env.pickle_state=true it is pickled instead "
                    "(resuming then unpickles it: only for run directories that you write and "
                    "resume yourself)",
                    ckpt.EnvStateWarning,
                    stacklevel=2,
                )
            path = ckpt.save_checkpoint(self.run_dir, state, saved_envs)
        self.reducer.gather(None)  # no process runs ahead of a checkpoint being written
        return path

    def _restore(self, saved: dict[str, Any]) -> None:
        self.net.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.step = int(saved["step"])
        self.iteration = int(saved["iteration"])
        rng = saved["rng"][self.rank]
        torch.set_rng_state(rng["torch"])
        if "sampling" in rng:  # checkpoints of older versions sampled with torch's own
            self.generator.set_state(rng["sampling"])
        self.rng.bit_generator.state = rng["numpy"]
        self.recent_returns.extend(saved.get("recent_returns", []))
        keys = self.algorithm.state_dict()
        self.algorithm.load_state_dict({key: saved[key][self.rank] for key in keys})
        allow_pickle = self.config.env.pickle_state
        env_states = ckpt.load_env_states(self.run_dir, saved, allow_pickle=allow_pickle)
        if env_states is not None:
            try:
                obs = self.env.set_state(env_states[self.rank], allow_pickle)
            except ValueError as err:
                raise ckpt.CheckpointError(
                    f"{self.run_dir}: cannot restore the environments: {err}"
                ) from None
            self.algorithm.restore_environments(obs)

    # ------------------------------------------------------------------ loop
    def learning_rate(self) -> float:
        """The learning rate of the coming iteration."""
        optim = self.config.optim
        lr = optim.lr * (1.0 - self.step / self.budget if optim.anneal_lr else 1.0)
        if optim.warmup_steps:
            lr *= min(1.0, (self.step + self.config.batch_size) / optim.warmup_steps)
        return lr

    def train_iteration(self) -> dict[str, float]:
        """One iteration of the algorithm; the metrics to log."""
        lr = self.learning_rate()
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        started = time.perf_counter()
        iteration = self.algorithm.iterate(self.step, lr)
        seconds = time.perf_counter() - started
        samples = iteration.samples * self.reducer.world_size
        self.step += samples
        self.iteration += 1
        metrics = dict(iteration.metrics)
        episodes = _merge_metrics(self.reducer.gather(iteration.episodes))
        returns = episodes.get("episode_return")
        if returns is not None and returns.size:
            self.recent_returns.extend(returns.tolist())
        for key, values in episodes.items():
            metrics[f"episode/{key}"] = float(values.mean())
        metrics["episodes"] = float(returns.size if returns is not None else 0)
        metrics["schedule/lr"] = lr
        metrics["perf/sps"] = samples / seconds
        return metrics

    def _check_in_sync(self) -> None:
        """The processes of a data-parallel run must hold identical parameters."""
        if self.reducer.world_size == 1:
            return
        checksum = float(
            sum(
                p.detach().double().sum()
                for module in self.algorithm.replicated()
                for p in module.parameters()
            )
        )
        sums = self.reducer.gather(checksum)
        if len(set(sums)) > 1:
            raise RuntimeError(f"training processes diverged: parameter checksums {sums}")

    @property
    def mean_return(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def run(self) -> TrainResult:
        cfg = self.config
        started = time.time()
        next_checkpoint = (
            self.step // cfg.log.checkpoint_interval + 1
        ) * cfg.log.checkpoint_interval
        progress = ProgressReporter(
            self.budget, self.step, enabled=cfg.log.progress and self.rank == 0
        )
        interrupted = False
        # The networks, environments and imported modules live as long as the run: moved out
        # of the collector's reach, full collections no longer scan them (each cost about
        # 0.2 s, every few iterations).
        gc.collect()
        gc.freeze()
        try:
            with _StopFlag() as stop, progress:
                while self.step < self.budget:
                    metrics = self.train_iteration()
                    if self.log is not None:
                        self.log.log(self.step, metrics)
                    progress.update(self.step, metrics["perf/sps"], self.mean_return)
                    if self.on_iteration is not None:
                        self.on_iteration(metrics)
                    for callback in self.callbacks:
                        callback.on_iteration(self, metrics)
                    if cfg.eval.interval and self.step >= self.next_eval:
                        self.evaluate()
                    if self.step >= next_checkpoint:
                        self.save()
                        next_checkpoint += cfg.log.checkpoint_interval
                    reason = self.algorithm.stop_reason()
                    if reason is not None:
                        self.request_stop(reason)
                    # Every process stops after the same iteration, whichever saw the Ctrl-C
                    # or was asked to stop.
                    ctrl_c, asked = self.reducer.sum([stop.requested, self.stop_reason is not None])
                    if ctrl_c > 0:
                        interrupted = True
                    if ctrl_c > 0 or asked > 0:
                        break
            self.algorithm.finish()
            path = self.save()
            self._check_in_sync()
        finally:
            # Collect what became garbage while frozen now, while the process group and the
            # environments still exist: left to interpreter exit, a data-parallel rank
            # sometimes aborted in teardown (std::terminate).
            gc.unfreeze()
            gc.collect()
            if self.log is not None:
                self.log.close()
            if self.evaluator is not None:
                self.evaluator.close()
            self.env.close()
            self._release()
        return TrainResult(self.run_dir, path, self.step, self.mean_return,
                           time.time() - started, interrupted, self.stop_reason,
                           self.eval_return)  # fmt: skip

    def request_stop(self, reason: str) -> None:
        """End the run after the current iteration (from a callback, say); the final
        checkpoint is written and the result's ``stop_reason`` is ``reason``."""
        self.stop_reason = reason

    def evaluate(self) -> None:
        """The periodic evaluation: rank 0 plays, logs eval/* and says whether it is the best
        so far; then every rank takes part in writing best.pt."""
        while self.next_eval <= self.step:
            self.next_eval += self.config.eval.interval
        improved = False
        if self.evaluator is not None:
            evaluation, improved = self.evaluator.run(self.net)
            self.eval_return = evaluation.mean()
            metrics = {f"eval/{name}": evaluation.mean(name) for name in evaluation.metrics}
            metrics["eval/best_return"] = self.evaluator.best
            if self.log is not None:
                self.log.log(self.step, metrics)
            for callback in self.callbacks:
                callback.on_eval(self, evaluation)
            if self.evaluator.reached_target(evaluation):
                self.request_stop(
                    f"evaluation mean return {evaluation.mean():.3f} reached target_return "
                    f"{self.config.target_return}"
                )
        if self.reducer.sum([improved])[0] > 0:
            state = self.state()
            if self.rank == 0:
                ckpt.save_checkpoint(self.run_dir, state, None, name=BEST_FILE)


def _merge_metrics(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The episode metrics of all processes, concatenated per name."""
    merged: dict[str, list[np.ndarray]] = {}
    for part in parts:
        for key, values in part.items():
            merged.setdefault(key, []).append(values)
    return {key: np.concatenate(values) for key, values in merged.items()}


def _check_resumable(saved: dict[str, Any], config: TrainConfig) -> None:
    """Refuse to continue a run under a different configuration."""
    # total_timesteps may grow (to train longer); log settings, the device (a run may
    # continue on another machine) and whether pickled environment state may load change freely.
    mutable = {"total_timesteps", "log", "device", "env.pickle_state"}
    ours, theirs = _without(to_dict(config), mutable), _without(saved["config"], mutable)
    # A setting added since the run was written counts as the same at its default value.
    defaults = to_dict(type(config)())
    diffs = [
        key
        for key in ckpt.config_differences(theirs, ours)
        if _at(theirs, key) is not _MISSING or _at(ours, key) != _at(defaults, key)
    ]
    if diffs:
        raise ckpt.CheckpointError(
            "the checkpoint was written with a different configuration; differing keys: "
            + ", ".join(diffs)
            + " (resume with the run's own config.yaml, changing only total_timesteps or log.*)"
        )


_MISSING = object()


def _at(config: dict[str, Any], dotted: str) -> Any:
    """The value of the dotted key in a nested config dict, or ``_MISSING``."""
    value: Any = config
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _without(config: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    """``config`` less the dotted ``keys``."""
    kept = {}
    for key, value in config.items():
        inner = {k.partition(".")[2] for k in keys if k.startswith(f"{key}.")}
        if key not in keys:
            kept[key] = _without(value, inner) if inner and isinstance(value, dict) else value
    return kept


def _jsonable(state: dict[str, Any]) -> dict[str, Any]:
    """numpy's bit generator state, with Python ints (loads with weights_only=True)."""
    return {k: _jsonable(v) if isinstance(v, dict) else (int(v) if isinstance(v, np.integer) else v)
            for k, v in state.items()}  # fmt: skip


def _env_name(env: EnvFactory | type[Environment]) -> str:
    """How a run records a custom environment: the registry id a factory gives as ``env_id``
    (``from_entity_gym``'s), or ``module:Class`` when it can be imported again (so
    ``entityrl eval`` and ``entityrl play`` can rebuild it), else the bare name."""
    registered = getattr(env, "env_id", None)
    if isinstance(registered, str):
        return registered
    name = getattr(env, "__qualname__", None) or type(env).__name__
    module = getattr(env, "__module__", None)
    if isinstance(env, type) and module and module != "__main__" and "<locals>" not in name:
        return f"{module}:{name}"
    return name


def train(
    env: EnvSource | None = None,
    config: TrainConfig | str | Path | None = None,
    overrides: Sequence[str] = (),
    resume: str | Path | None = None,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Train a RogueNet policy with the config's algorithm (PPO by default).

    ``env``: a registered environment name, or an :class:`~entityrl.env.Environment` subclass or
    zero-argument factory (your own simulator). ``config``: a :class:`TrainConfig`, a YAML path,
    or None for the environment's shipped config (or the defaults). ``overrides``: strings like
    ``"ppo.gamma=0.9"``. ``resume``: a run directory to continue. ``callbacks``:
    :class:`~entityrl.training.callbacks.Callback` instances (run in this process, rank 0).
    """
    if isinstance(config, TrainConfig):
        if overrides:
            from omegaconf import OmegaConf

            from entityrl.training.config import from_layers

            config = from_layers(
                [OmegaConf.structured(config), OmegaConf.from_dotlist(list(overrides))]
            )
    else:
        source = config if config is not None else (env if isinstance(env, str) else None)
        custom = env is not None and not isinstance(env, str)
        config = load_config(source, list(overrides), check_env=not custom)
    if env is not None and not isinstance(env, str):
        config.env.id = _env_name(env)
        config.env.kwargs.update(getattr(env, "env_kwargs", {}))  # rebuild it with these
    elif isinstance(env, str):
        config.env.id = env
    from entityrl.training import distributed

    if distributed.launched():
        return distributed.join_launcher(config, env, resume, callbacks)
    if config.world_size > 1:
        return distributed.launch(config, env, resume, callbacks)
    return Trainer(config, env, resume, callbacks=callbacks).run()


__all__ = ["TrainResult", "Trainer", "make_env", "train"]
