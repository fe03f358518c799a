"""Training configuration: typed dataclasses, YAML files, ``key.sub=value`` overrides.

A run is described by one :class:`TrainConfig`. Values come from, in order: the defaults
below, a YAML file (``entityrl/configs/<env>.yaml`` for a registered environment name, or any
path), then command-line overrides such as ``ppo.gamma=0.9``. OmegaConf merges and type-checks
them; unknown keys and values of the wrong type are rejected before anything runs, with the
key's full path, and every dataclass checks its own ranges in ``__post_init__``.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import itertools
import re
import textwrap
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from entityrl.algorithms import registry as algorithm_registry
from entityrl.algorithms.bc.loss import BCConfig
from entityrl.algorithms.common.checks import require_positive
from entityrl.algorithms.common.optimizer import OptimConfig
from entityrl.algorithms.gail.discriminator import GAILConfig
from entityrl.algorithms.icm import ICMConfig
from entityrl.algorithms.poca.critic import POCAConfig
from entityrl.algorithms.ppo.loss import PPOConfig
from entityrl.algorithms.rnd import RNDConfig
from entityrl.algorithms.self_play.pool import SelfPlayConfig
from entityrl.env.decisions import Decisions
from entityrl.nn.device import check_device_setting
from entityrl.nn.rogue_net import RogueNetConfig
from entityrl.training.stuck import StuckConfig

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


class ConfigError(ValueError):
    """A configuration value or key is not acceptable."""


@dataclass
class EnvConfig:
    """Which environment to train on."""

    id: str = "CherryPick"
    """Registered environment name (`entityrl.envs.names()`)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the environment's constructor."""
    validate: bool = False
    """Check every observation against the declared spaces (slower; for developing envs)."""
    stack: int = 1
    """Observation stacking: each entity's (and the global) features of the last ``stack``
    steps, matched by entity id (1: the current step only; see docs/stacking.md)."""
    decisions: Decisions = field(default_factory=Decisions)
    """When agents decide: periods, staggering offsets, on request (docs/decisions.md)."""
    pickle_state: bool = False
    """Let checkpoints pickle the parts of the environments' state that are not plain data
    (see docs/environments.md), so that a resumed run continues their episodes. Resuming then
    unpickles them, which runs any code the run directory names: they are signed with your key
    and load only in run directories written by you on this machine, with this still on."""

    def __post_init__(self) -> None:
        if self.stack < 1:
            raise ValueError(
                f"env.stack must be >= 1 (steps of features stacked), got {self.stack}"
            )


@dataclass
class RolloutConfig:
    """How experience is collected."""

    num_envs: int = 128
    """Environments stepped together (algo=ppo: 16 unless set; docs/troubleshooting.md)."""
    steps: int = 16
    """Steps per environment per rollout; a rollout has num_envs * steps samples (algo=ppo:
    128 unless set)."""
    processes: int = 1
    """Worker processes stepping the environments, each running a copy of the policy on its
    share of them (1: step them in the training process). Multi-player games are split a
    whole game at a time, and their players' policies run in the training process (with
    mode=async, in the workers)."""
    worker_timeout: float = 600.0
    """Seconds a worker process may take to answer (a whole rollout of its share) before it
    is taken for stopped or stuck, killed, and the run stopped with a line naming it."""
    mode: str = "sync"
    """sync: the workers wait while the learner updates (bit-exact on resume). async: they
    collect the next rollout meanwhile, with the parameters of one update earlier (corrected
    by V-trace); needs rollout.processes >= 2, world_size=1 and an on-policy algorithm (in
    multi-player games: selfplay in pool mode, poca or ppo, without env.decisions). See
    docs/scaling.md."""
    backend: str = "local"
    """Where the rollout.processes workers run. local: processes on this machine. ray: Ray
    actors anywhere in a Ray cluster (pip install 'entityrl[ray]'; see docs/scaling.md)."""
    ray_address: str | None = None
    """With backend=ray, the cluster to join (host:port of its head, or auto); null: the
    RAY_ADDRESS environment variable, else a Ray instance started on this machine for the run."""

    def __post_init__(self) -> None:
        if self.mode not in ("sync", "async"):
            raise ValueError(f"rollout.mode must be 'sync' or 'async', got {self.mode!r}")
        if self.backend not in ("local", "ray"):
            raise ValueError(f"rollout.backend must be 'local' or 'ray', got {self.backend!r}")
        require_positive(
            "rollout",
            num_envs=self.num_envs,
            steps=self.steps,
            processes=self.processes,
            worker_timeout=self.worker_timeout,
        )


@dataclass
class LogConfig:
    """Where and how a run reports."""

    run_dir: str | None = None
    """Directory of the run (default: runs/<env>-<date>-<time>)."""
    checkpoint_interval: int = 100_000
    """Environment steps between checkpoints (one is always written at the end)."""
    tensorboard: bool | None = None
    """Write TensorBoard event files (null: when the tensorboard package is installed; true
    without it is an error: pip install 'entityrl[tensorboard]')."""
    wandb_project: str | None = None
    """Also log to this Weights & Biases project (needs `pip install wandb`)."""
    progress: bool = True
    """Show a live progress bar."""

    def __post_init__(self) -> None:
        require_positive("log", checkpoint_interval=self.checkpoint_interval)


@dataclass
class EvalConfig:
    """Evaluation during training, on environments of its own (seeded apart from training's)."""

    interval: int = 0
    """Environment steps between evaluations (0: none). Each logs eval/* metrics and keeps the
    best agent so far in best.pt of the run directory."""
    episodes: int = 32
    """Episodes per evaluation."""
    num_envs: int = 8
    """Environments the evaluation plays at once."""
    deterministic: bool = False
    """Evaluate the most probable action of every actor instead of sampled ones."""
    stop_at_target: bool = False
    """End the run once an evaluation's mean return reaches target_return."""

    def __post_init__(self) -> None:
        if self.interval < 0:
            raise ConfigError(f"eval.interval must be >= 0 (0: no evaluation), got {self.interval}")
        require_positive("eval", episodes=self.episodes, num_envs=self.num_envs)


@dataclass
class TrainConfig:
    """Everything that defines a training run."""

    env: EnvConfig = field(default_factory=EnvConfig)
    net: RogueNetConfig = field(default_factory=RogueNetConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    log: LogConfig = field(default_factory=LogConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    stuck: StuckConfig = field(default_factory=StuckConfig)
    rnd: RNDConfig = field(default_factory=RNDConfig)
    icm: ICMConfig = field(default_factory=ICMConfig)
    total_timesteps: int = 200_000
    """Environment steps to train for."""
    seed: int = 1
    """Seed of environments, network initialization and sampling."""
    device: str = "auto"
    """Where the network trains: auto (the first CUDA GPU if there is one, else the CPU), cpu,
    cuda, cuda:N or mps. Environments always run on the CPU. For mixed precision on a GPU set
    net.precision=bfloat16."""
    torch_threads: int = 0
    """Threads torch may use, training and evaluating (0: OMP_NUM_THREADS if set, else the
    cores free of other load when the run starts, shared by the training processes; one for
    evaluation)."""
    world_size: int = 1
    """Training processes (data-parallel): each steps num_envs / world_size environments and
    takes its share of every minibatch; gradients are summed, so all take the same steps.
    Under a launcher (torchrun) leave it at 1: the launcher's world size is used."""
    distributed_timeout: float = 300.0
    """Seconds a training process of a data-parallel run waits for the others (a gradient sum,
    a checkpoint) before it stops with an error: a peer that died or hangs never blocks it."""
    target_return: float | None = None
    """The mean episode return this configuration is known to reach within total_timesteps."""
    algo: str = "ppo"
    """The algorithm, by name or as module:Class for your own (docs/algorithms.md; its
    settings are then the section named by its ``name``): ppo (reinforcement learning in the environment), bc (behaviour cloning
    from the recordings in bc.demos; `entityrl bc`), gail (PPO on a reward learned from the
    recordings in bc.demos), selfplay (PPO in a multi-player game against snapshots of the
    learner) or poca (MA-POCA: PPO for a cooperative group with a centralized critic and
    per-agent counterfactual baselines). ppo on a multi-player game plays every seat with the
    one policy (independent learners)."""
    bc: BCConfig = field(default_factory=BCConfig)
    gail: GAILConfig = field(default_factory=GAILConfig)
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    poca: POCAConfig = field(default_factory=POCAConfig)
    init_from: str | None = None
    """Start from the weights (and input normalization) of this run directory or checkpoint,
    e.g. a behaviour-cloning run; its network config and spaces must match."""

    def __post_init__(self) -> None:
        require_positive("", total_timesteps=self.total_timesteps)
        if not algorithm_registry.is_known(self.algo):
            try:
                algorithm_registry.lookup(self.algo)  # raises, naming the algorithms there are
            except algorithm_registry.UnknownAlgorithmError as err:
                raise ConfigError(str(err)) from None
        imitating = {"gail": "GAIL needs", "dac": "DAC learns its reward from"}
        if (self.algo in ("bc", *imitating) or self.bc.strength) and not self.bc.demos:
            needs = imitating.get(self.algo, "behaviour cloning needs")
            raise ConfigError(f"bc.demos is empty: {needs} recordings (bc.demos=[FILE, ...])")
        check_device_setting(self.device)
        if self.torch_threads < 0:
            raise ConfigError(f"torch_threads must be >= 0, got {self.torch_threads}")
        require_positive("", world_size=self.world_size)
        if not self.distributed_timeout > 0:
            raise ConfigError(
                f"distributed_timeout must be > 0 seconds, got {self.distributed_timeout}"
            )
        if self.eval.stop_at_target and (self.target_return is None or not self.eval.interval):
            raise ConfigError(
                "eval.stop_at_target needs target_return and eval.interval > 0; got "
                f"target_return={self.target_return}, eval.interval={self.eval.interval}"
            )
        if self.net.memory:
            self._check_sequences()
        for key, value in (
            ("rollout.num_envs", self.rollout.num_envs),
            ("optim.bs", self.optim.bs),
            ("optim.micro_bs", self.optim.micro_bs or self.world_size),
        ):
            if value % self.world_size:
                raise ConfigError(
                    f"{key} ({value}) must be a multiple of world_size ({self.world_size})"
                )

    def _check_sequences(self) -> None:
        """With net.memory, minibatches are whole chunks of ppo.seq_len steps."""
        seq_len = self.ppo.seq_len or self.rollout.steps
        if self.rollout.steps % seq_len:
            raise ConfigError(
                f"ppo.seq_len ({seq_len}) must divide rollout.steps ({self.rollout.steps}) "
                "with net.memory (chunks of consecutive steps)"
            )
        for key, value in (
            ("optim.bs", self.optim.bs),
            ("optim.micro_bs", self.optim.micro_bs or self.optim.bs),
        ):
            if (value // self.world_size) % seq_len:
                raise ConfigError(
                    f"{key} ({value}) per process must be a multiple of ppo.seq_len ({seq_len}) "
                    "with net.memory (minibatches of whole chunks)"
                )

    @property
    def batch_size(self) -> int:
        """Samples per rollout."""
        return self.rollout.num_envs * self.rollout.steps


# ---------------------------------------------------------------------------- loading
def config_path_for(env_id: str, algo: str = "ppo") -> Path:
    """The shipped config file of a registered environment (may not exist); another
    library's environment (``gymnasium:CartPole-v1``) in lower case with ``_`` between
    words (``gymnasium_cartpole_v1.yaml``). An algorithm other than PPO gets its own file
    for the environment, ``configs/<algo>/<name>.yaml``, where there is one."""
    if ":" in env_id:
        name = f"{re.sub('[^a-z0-9]+', '_', env_id.lower())}.yaml"
    else:
        name = "".join(f"_{c.lower()}" if c.isupper() else c for c in env_id).lstrip("_") + ".yaml"
    own = CONFIG_DIR / algo / name
    return own if algo != "ppo" and own.exists() else CONFIG_DIR / name


def load_config(
    source: str | Path | None = None,
    overrides: list[str] | None = None,
    check_env: bool = True,
) -> TrainConfig:
    """Build a validated config from a YAML file or environment name plus overrides.

    ``source`` is a path to a YAML file, a registered environment name (its shipped config if
    there is one, the one of the ``algo=`` override's algorithm first, else the defaults for
    that environment), or None (defaults). ``check_env`` checks ``env.id`` and
    ``env.kwargs`` against the registry (off for custom environments).
    """
    layers: list[Any] = []
    if source is not None:
        path = Path(source)
        if path.suffix in (".yaml", ".yml") or path.exists():
            layers.append(_read_yaml(path))
        else:
            from entityrl.envs import lookup

            try:
                lookup(str(source))
            except KeyError as err:
                if ":" in str(source):  # an import path: the error says what is wrong with it
                    raise ConfigError(err.args[0]) from None
                raise ConfigError(
                    f"{source!r} is neither a config file nor a registered environment: "
                    f"{err.args[0]}"
                ) from None
            shipped = config_path_for(str(source), _algo_named_in(overrides or []) or "ppo")
            if shipped.exists():
                layers.append(_read_yaml(shipped))
            layers.append(OmegaConf.create({"env": {"id": str(source)}}))
    for item in overrides or []:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key=value (e.g. ppo.gamma=0.9)")
    if overrides:
        root = _schema_named_in(overrides)
        layers.append(OmegaConf.from_dotlist([_integral_as_int(item, root) for item in overrides]))
    return from_layers(layers, check_env)


def _algo_named_in(overrides: list[str]) -> str | None:
    """The algorithm the last ``algo=`` override names (None without one)."""
    named = [item.partition("=")[2].strip() for item in overrides if item.startswith("algo=")]
    return named[-1] if named else None


def _schema_named_in(overrides: list[str]) -> type[TrainConfig]:
    """The schema of the algorithm an ``algo=`` override names (TrainConfig without one)."""
    named = _algo_named_in(overrides)
    try:
        return config_class(named) if named else TrainConfig
    except ConfigError:
        return TrainConfig  # from_layers reports it


def _integral_as_int(override: str, root: type = TrainConfig) -> str:
    """``total_timesteps=1e5`` as ``total_timesteps=100000``: an integral number written as a
    float is accepted where a whole number is expected."""
    key, _, value = override.partition("=")
    try:
        number = float(value)
    except ValueError:
        return override
    if not number.is_integer() or _field_type(key.strip(), root) is not int:
        return override
    return f"{key}={int(number)}"


def config_class(algo: str) -> type[TrainConfig]:
    """The schema of a run of ``algo``: :class:`TrainConfig`, plus a section named by the
    algorithm's ``name`` holding its ``Settings`` when the algorithm brings its own (a user's
    algorithm; the shipped ones have theirs in :class:`TrainConfig`)."""
    try:
        algorithm = algorithm_registry.lookup(algo)
    except algorithm_registry.UnknownAlgorithmError as err:
        raise ConfigError(str(err)) from None
    settings, section = algorithm.Settings, algorithm.name
    if settings is None or section in {f.name for f in dataclasses.fields(TrainConfig)}:
        return TrainConfig
    if not dataclasses.is_dataclass(settings):
        raise ConfigError(
            f"algo={algo!r}: {algorithm.__qualname__}.Settings must be a dataclass, got "
            f"{settings!r}"
        )
    key = (settings, section)
    if key not in _SCHEMAS:
        _SCHEMAS[key] = dataclasses.make_dataclass(
            "TrainConfig",
            [(section, settings, field(default_factory=settings))],  # type: ignore[arg-type]
            bases=(TrainConfig,),
            namespace={"__module__": __name__, "__doc__": TrainConfig.__doc__},
        )
    return _SCHEMAS[key]


_SCHEMAS: dict[tuple[type, str], type[TrainConfig]] = {}


def algorithm_defaults(algo: str, schema: type[TrainConfig] = TrainConfig) -> Any:
    """The config layer of the values ``algo`` starts from (its ``defaults``), which lies
    over the dataclasses' defaults and under every config file and override; checked against
    ``schema`` here, so that a mistake in them is reported as the algorithm's."""
    algorithm = algorithm_registry.lookup(algo)
    try:
        layer = OmegaConf.from_dotlist([f"{k}={v}" for k, v in algorithm.defaults.items()])
        OmegaConf.merge(OmegaConf.structured(schema), layer)
    except OmegaConfBaseException as err:
        raise ConfigError(f"{algorithm.__qualname__}.defaults: {_explain(err, schema)}") from None
    return layer


def _field_type(path: str, root: type = TrainConfig) -> Any:
    """The declared type of the config field at a dotted path (None if there is none)."""
    section, _, name = path.rpartition(".")
    cls = _section(section, root)
    return None if cls is None else typing.get_type_hints(cls).get(name)


def from_layers(
    layers: list[Any], check_env: bool = True, require_algorithm: bool = True
) -> TrainConfig:
    """Merge config layers (lowest first) over the schema of the algorithm they choose.

    ``require_algorithm``: the algorithm (``algo``) must be importable, as training needs it;
    without, a run of an algorithm that cannot be imported here still loads (for evaluating or
    exporting its policy), its algorithm's own section left out."""
    algo = next(
        (v for v in (OmegaConf.select(layer, "algo") for layer in reversed(layers)) if v), "ppo"
    )
    try:
        schema = config_class(str(algo))
        layers = [algorithm_defaults(str(algo), schema), *layers]
    except ConfigError:
        if require_algorithm:
            raise
        schema = TrainConfig
        known = set(_fields_at("", TrainConfig))
        layers = [
            OmegaConf.masked_copy(layer, [k for k in layer if k in known]) for layer in layers
        ]
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), *layers)
        config = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise ConfigError(_explain(err, schema)) from None
    except (ValueError, TypeError) as err:
        raise ConfigError(_in_section(str(err), schema)) from None
    assert isinstance(config, TrainConfig)
    if check_env:
        _check_env(config)
    return config


def _in_section(message: str, schema: type[TrainConfig]) -> str:
    """A settings check's message naming its key as the user writes it: an algorithm's own
    ``Settings`` cannot know the section they are under (``buffer_size`` ->
    ``sumdqn.buffer_size``)."""
    if schema is TrainConfig:
        return message
    section = next(f for f in dataclasses.fields(schema) if f.name not in _fields_at("")).name
    first = message.split(" ", 1)[0]
    if first in _fields_at(section, schema):
        return f"{section}.{message}"
    return message


def _read_yaml(path: Path) -> Any:
    if not path.exists():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        loaded = OmegaConf.load(path)
    except Exception as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(loaded, type(OmegaConf.create({}))):
        raise ConfigError(f"{path}: expected a mapping of config keys at the top level")
    return loaded


def _explain(err: OmegaConfBaseException, root: type) -> str:
    """OmegaConf's message, plus the keys that are allowed where an unknown one was given."""
    key = getattr(err, "full_key", None) or ""
    message = str(err).split("\n")[0]
    if type(err).__name__ == "ConfigKeyError" and key:
        section, _, bad = key.rpartition(".")
        allowed = _fields_at(section, root)
        if allowed:
            close = difflib.get_close_matches(bad, allowed, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            return f"unknown config key {key!r}.{hint} Allowed keys here: {', '.join(allowed)}"
    return f"config key {key!r}: {message}" if key else message


def _fields_at(path: str, root: type = TrainConfig) -> list[str]:
    """Field names of the config section at a dotted path ('' is the top level)."""
    cls = _section(path, root)
    return [] if cls is None else [f.name for f in dataclasses.fields(cls)]


def _section(path: str, root: type = TrainConfig) -> Any:
    """The dataclass of the config section at a dotted path ('' is the top level), or None."""
    cls: Any = root
    for part in filter(None, path.split(".")):
        if not dataclasses.is_dataclass(cls) or part not in {
            f.name for f in dataclasses.fields(cls)
        }:
            return None
        cls = _nested_dataclass(cls, part)
        if cls is None:
            return None
    return cls


def _nested_dataclass(owner: type, name: str) -> type | None:
    """The dataclass type of field ``name`` of ``owner`` (unwrapping ``X | None``), if any."""
    hint = typing.get_type_hints(owner)[name]
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate):
            return candidate  # type: ignore[return-value]
    return None


def _check_env(config: TrainConfig) -> None:
    from entityrl.envs import check_kwargs, lookup

    try:
        lookup(config.env.id)
        check_kwargs(config.env.id, dict(config.env.kwargs))
    except (KeyError, TypeError) as err:
        raise ConfigError(f"env: {err.args[0]}") from None


def to_yaml(config: TrainConfig) -> str:
    return OmegaConf.to_yaml(OmegaConf.structured(config))


def to_dict(config: TrainConfig) -> dict[str, Any]:
    result = OmegaConf.to_container(OmegaConf.structured(config))
    assert isinstance(result, dict)
    return result


def from_dict(
    values: dict[str, Any], check_env: bool = True, require_algorithm: bool = True
) -> TrainConfig:
    """A config from :func:`to_dict`'s output; ``check_env`` as in :func:`load_config`,
    ``require_algorithm`` as in :func:`from_layers`."""
    return from_layers([OmegaConf.create(values)], check_env, require_algorithm)


# ---------------------------------------------------------------------------- help text
def field_docs(cls: type) -> dict[str, str]:
    """The docstring written under each field of a dataclass (or of the dataclass it extends)."""
    docs: dict[str, str] = {}
    for owner in reversed(cls.__mro__):
        if dataclasses.is_dataclass(owner):
            docs.update(_own_field_docs(owner))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    """The docstrings written under the fields a class's own body declares."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def describe(config: TrainConfig | None = None) -> str:
    """Every parameter with its current value and documentation, for ``--help``."""
    config = config or from_layers([], check_env=False)
    lines: list[str] = []

    def walk(obj: Any, prefix: str) -> None:
        docs = field_docs(type(obj))
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            key = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(value):
                lines.append(f"  {key}:  {(type(value).__doc__ or '').strip().splitlines()[0]}")
                walk(value, key + ".")
                continue
            shown = OmegaConf.to_yaml(OmegaConf.create({"v": value})).strip()[3:] or "null"
            lines.append(f"  {key}={shown}")
            if f.name in docs:
                lines.append(f"      {docs[f.name]}")
            if value is None and (nested := _nested_dataclass(type(obj), f.name)) is not None:
                for sub, doc in field_docs(nested).items():
                    lines.append(f"      {key}.{sub}: {doc}")

    walk(config, "")
    return "\n".join(lines)
