"""The survival world's configuration: a YAML file checked against typed dataclasses.

OmegaConf checks the structure and the types (unknown keys, values that are not numbers, ...);
:func:`check_references` then checks what types cannot express: names that refer to other
sections, ranges, and combinations. Every error names the file, the field, what was expected and
what came.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from entityrl.envs.survival.compose import ConflictingPartsError, combine, leaf_paths, overlay

PRESET_DIR = Path(__file__).parent / "presets"

METERS = ("satiety", "thirst", "hp", "temperature")
"""The built-in quantities that drain or refill; the agent dies when one of them reaches zero.
A config adds its own under ``meters``."""

STATS = ("vision", "attack_range", "reach", "move_speed", "attack", "defense")
"""The agent's abilities, which buffs raise or lower while they last."""

PHASES = ("day", "night")

EVENT_KINDS = ("consume", "synthesize", "equip", "pickup", "attack", "kill", "collect")
"""What a task can ask for: ``<kind>:<name>``, e.g. ``consume:water`` or ``kill:pig``."""


class SurvivalConfigError(ValueError):
    """A survival world configuration broke a rule."""


class ItemKind(enum.Enum):
    consumable = "consumable"
    material = "material"
    equipment = "equipment"


class Wear(enum.Enum):
    """What uses up an equipment's durability: each step worn, each attack, or each hit taken."""

    step = "step"
    attack = "attack"
    hit = "hit"


@dataclass
class MapConfig:
    width: int = 32
    height: int = 32
    # Terrain is laid out as this many regions, each cell belonging to its nearest region centre.
    regions: int = 12
    # Stacks of items lying on the ground at most at once; more drops are lost.
    drop_slots: int = 24
    # Steps before an item stack on the ground disappears (0: never).
    drop_lifetime: int = 100


@dataclass
class TerrainConfig:
    # Share of the map's regions of this terrain (relative to the other terrains).
    weight: float = 1.0
    glyph: str = "."
    # Creature name -> expected number per cell of this terrain when an episode starts.
    spawns: dict[str, float] = field(default_factory=dict)


@dataclass
class AgentConfig:
    # Maximum (and starting) satiety and thirst: the survival stress of the world.
    life_limit: int = 100
    hp: int = 10
    # Maximum (and starting) body temperature; 0 turns temperature off.
    temperature: int = 0
    vision: int = 5
    attack_range: int = 1
    # Distance at which resources can be collected and items picked up.
    reach: int = 1
    move_speed: int = 1
    attack: int = 1
    defense: int = 0
    backpack_capacity: int = 24


@dataclass
class MeterConfig:
    """A meter the config adds to the agent (e.g. fatigue): items' and buffs' ``effects`` may
    name it like a built-in meter."""

    max: float = MISSING
    # Value at the start of an episode (default: max).
    start: float | None = None
    # Amount lost every step, on top of the buffs' effects (negative: gained).
    decay: float = 0.0
    # Whether the agent dies when the meter reaches zero.
    death: bool = True


@dataclass
class CreatureConfig:
    glyph: str = MISSING
    hp: int = 1
    vision: int = 0
    # Cells per move and the chance of moving on a given step (0: never moves).
    move_speed: int = 0
    move_chance: float = 0.0
    # Aggressive creatures chase the agent and attack it; the others flee from it.
    aggressive: bool = False
    attack: int = 0
    attackable: bool = True
    max_count: int = 16
    # Chance per step that one more appears (on a terrain that spawns it), times the season's
    # respawn multiplier.
    respawn: float = 0.0


@dataclass
class DropConfig:
    # Items left on the ground when the creature is killed / collected from.
    kill: dict[str, int] = field(default_factory=dict)
    collect: dict[str, int] = field(default_factory=dict)


@dataclass
class ItemConfig:
    kind: ItemKind = ItemKind.material
    glyph: str = "*"
    # Consumables: meter -> amount restored.
    effects: dict[str, float] = field(default_factory=dict)
    # Equipment: the slot it is worn in, its durability, what wears it, and the buffs it gives
    # while worn (their other conditions still apply).
    slot: str | None = None
    durability: int = 0
    wear: Wear = Wear.step
    buffs: list[str] = field(default_factory=list)


@dataclass
class RecipeConfig:
    output: str = MISSING
    count: int = 1
    inputs: dict[str, int] = field(default_factory=dict)


@dataclass
class BuffConfig:
    # Conditions, all of which must hold (an empty list: any). Equipment buffs also need their
    # item worn.
    phases: list[str] = field(default_factory=list)
    seasons: list[str] = field(default_factory=list)
    weather: list[str] = field(default_factory=list)
    terrain: list[str] = field(default_factory=list)
    # Meter -> change per step; stat -> change while active.
    effects: dict[str, float] = field(default_factory=dict)


@dataclass
class ClockConfig:
    # Steps of daylight then of night; night 0 turns the cycle off.
    day: int = 1
    night: int = 0


@dataclass
class SeasonConfig:
    name: str = MISSING
    length: int = MISSING
    respawn_multiplier: float = 1.0


@dataclass
class WeatherConfig:
    # Chance per step that the weather is drawn anew from ``kinds`` (name -> probability).
    change_chance: float = 0.0
    kinds: dict[str, float] = field(default_factory=dict)


@dataclass
class DenseRewardConfig:
    alive: float = 0.01
    # Times the meter refilled by a consumable, as a fraction of that meter's maximum.
    meter_gain: float = 1.0
    # Event bonuses. Only killing is rewarded by default: bonuses for events an agent can
    # repeat without end (collecting wood, crafting torches, equipping and unequipping) are
    # deceptive: PPO learns to farm them and starves (the paper's "deceptive reward").
    attack: float = 0.0
    kill: float = 0.1
    collect: float = 0.0
    pickup: float = 0.0
    synthesize: float = 0.0
    equip: float = 0.0
    death: float = -1.0


@dataclass
class RewardConfig:
    dense: DenseRewardConfig = field(default_factory=DenseRewardConfig)
    # Sparse: reward for consuming each listed item, nothing else.
    sparse: dict[str, float] = field(default_factory=dict)
    # Whether consuming pays the sparse reward even when it refills nothing (every meter it
    # acts on already full). The paper rewards consuming meat or water with no condition.
    sparse_when_full: bool = True
    # Very sparse: this reward when the agent dies, nothing else.
    very_sparse: float = -1.0


@dataclass
class ObservationConfig:
    # Terrain cells within this distance of the agent are entities.
    terrain_radius: int = 1
    # The creature type the ``nearest10_prey`` observation focuses on.
    prey: str | None = None


@dataclass
class WorldConfig:
    name: str = MISSING
    # Steps after which an episode ends even if the agent is alive.
    horizon: int = 1000
    map: MapConfig = field(default_factory=MapConfig)
    terrain: dict[str, TerrainConfig] = field(default_factory=dict)
    agent: AgentConfig = field(default_factory=AgentConfig)
    meters: dict[str, MeterConfig] = field(default_factory=dict)
    creatures: dict[str, CreatureConfig] = field(default_factory=dict)
    items: dict[str, ItemConfig] = field(default_factory=dict)
    recipes: list[RecipeConfig] = field(default_factory=list)
    drop_table: dict[str, DropConfig] = field(default_factory=dict)
    buffs: dict[str, BuffConfig] = field(default_factory=dict)
    clock: ClockConfig = field(default_factory=ClockConfig)
    seasons: list[SeasonConfig] = field(default_factory=list)
    weather: WeatherConfig = field(default_factory=WeatherConfig)
    rewards: RewardConfig = field(default_factory=RewardConfig)
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    # Task name -> event (``<kind>:<name>``), measured by the difficulty metrics.
    tasks: dict[str, str] = field(default_factory=dict)


ConfigSource = str | Path | Mapping[str, Any]


def preset_names() -> list[str]:
    """Names of the worlds shipped with the package (the parts under ``presets/modules`` are
    not worlds by themselves)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def load_config(
    source: ConfigSource,
    overrides: Mapping[str, Any] | None = None,
    life_limit: int | None = None,
    horizon: int | None = None,
) -> WorldConfig:
    """Read and check a world: a preset name, a YAML file, or the YAML content as a mapping.

    ``overrides`` (nested mapping) is merged on top; ``life_limit`` replaces the agent's and
    ``horizon`` the world's.
    """
    where, raw = _read(source)
    if overrides is not None and not isinstance(overrides, Mapping):
        raise SurvivalConfigError(
            f"overrides: expected a mapping of sections (e.g. {{agent: {{vision: 3}}}}), got "
            f"{_kind(overrides)}"
        )
    schema = OmegaConf.structured(WorldConfig)
    try:
        merged = OmegaConf.merge(schema, raw)
        if overrides:
            where = f"{where} (with overrides)"
            merged = OmegaConf.merge(merged, OmegaConf.create(dict(overrides)))
        if life_limit is not None:
            merged.agent.life_limit = life_limit
        if horizon is not None:
            merged.horizon = horizon
        config = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        raise SurvivalConfigError(_describe(where, err)) from None
    assert isinstance(config, WorldConfig)
    check_references(config, where)
    return config


def _read(source: ConfigSource) -> tuple[str, Any]:
    if isinstance(source, Mapping):
        where, tree = "config", _sections("config", OmegaConf.create(dict(source)))
        tree = _include(where, tree, Path.cwd(), ())
    elif isinstance(source, str | Path):
        where, tree = _read_file(_find(source, Path.cwd()), ())
    else:  # e.g. a list given as the config= argument on the command line
        raise SurvivalConfigError(
            f"config: expected a preset name ({', '.join(preset_names())}), a YAML file or a "
            f"mapping of sections, got {_kind(source)}"
        )
    return where, OmegaConf.create(tree)


def _kind(value: Any) -> str:
    """What ``value`` is, for an error: its type, never its content (which may be a file's)."""
    if isinstance(value, list | tuple | ListConfig):
        return "a list"
    return type(value).__name__


def _find(source: str | Path, base: Path) -> Path:
    """A world file: a path (relative to ``base``), a preset name, or a module of the presets
    (``modules/seasons``)."""
    path = Path(source)
    candidates = [base / path, base / f"{path}.yaml", PRESET_DIR / f"{path}.yaml"]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise SurvivalConfigError(
            f"no world config {str(source)!r}: expected a YAML file or a preset name "
            f"({', '.join(preset_names())})"
        )
    return found


def _find_part(where: str, part: str, base: Path) -> Path:
    """An included part: a file in ``base`` (the including file's folder) or below it, a
    preset or a preset module. Anything else is refused before it is read: a world file is
    shared and run by others, and must not reach into the files of whoever loads it."""
    found = None if Path(part).is_absolute() or ".." in Path(part).parts else _find(part, base)
    # resolve(): a link in the folder that leads out of it is outside too.
    if found is None or not any(
        found.resolve().is_relative_to(root.resolve()) for root in (base, PRESET_DIR)
    ):
        raise SurvivalConfigError(
            f"{where}: field include: {part!r} leads outside {base}; expected a file in that "
            "folder or below it (a relative path without '..'), a preset "
            f"({', '.join(preset_names())}) or a preset module (modules/...)"
        )
    return found


def _read_file(path: Path, including: tuple[Path, ...]) -> tuple[str, dict[str, Any]]:
    where = path.name
    if path.resolve() in including:
        chain = " -> ".join(p.name for p in (*including, path))
        raise SurvivalConfigError(f"{where}: includes itself: {chain}")
    try:
        raw = OmegaConf.load(path)
    except OSError as err:
        raise SurvivalConfigError(f"{where}: cannot read it: {err.strerror or err}") from None
    except yaml.MarkedYAMLError as err:
        # The parser's own message may quote the file; its position and problem say enough.
        at = f" at line {err.problem_mark.line + 1}" if err.problem_mark else ""
        raise SurvivalConfigError(f"{where}: not valid YAML{at}: {err.problem}") from None
    except (yaml.YAMLError, UnicodeDecodeError):  # the reader's: bytes that are not text
        raise SurvivalConfigError(
            f"{where}: not valid YAML: expected printable UTF-8 text"
        ) from None
    except OmegaConfBaseException as err:  # YAML, but not a config (a list as a key, ...)
        raise SurvivalConfigError(_describe(where, err)) from None
    tree = _sections(where, raw)
    return where, _include(where, tree, path.parent, (*including, path.resolve()))


def _sections(where: str, raw: Any) -> dict[str, Any]:
    """The file's top level as a plain dict; anything but a mapping of sections is refused."""
    if not isinstance(raw, DictConfig):
        raise SurvivalConfigError(
            f"{where}: field (top level): expected a mapping of sections (name, map, terrain, "
            f"agent, ...), got {_kind(raw)}"
        )
    tree = OmegaConf.to_container(raw)
    assert isinstance(tree, dict)
    return {str(k): v for k, v in tree.items()}


def _include(
    where: str, tree: dict[str, Any], base: Path, including: tuple[Path, ...]
) -> dict[str, Any]:
    """Combine the parts listed under ``include``, then the file's own sections on top."""
    parts = tree.pop("include", None)
    try:  # each file's own fields, so that an error names the file that has them
        OmegaConf.merge(OmegaConf.structured(WorldConfig), tree)
    except OmegaConfBaseException as err:
        raise SurvivalConfigError(_describe(where, err)) from None
    if parts is None:
        return tree
    if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
        raise SurvivalConfigError(
            f"{where}: field include: expected a list of world files, presets or modules, "
            f"got {_kind(parts)}"
        )
    loaded = [_read_file(_find_part(where, part, base), including) for part in parts]
    try:
        combined = combine(loaded, decided=leaf_paths(tree))
    except ConflictingPartsError as err:
        raise SurvivalConfigError(f"{where}: include: {err}") from None
    return overlay(combined, tree)


def _describe(where: str, err: OmegaConfBaseException) -> str:
    """The file, the field and what was wrong with it, each cut short: a field name or value
    of a file that is not a world config (its whole text can parse as one key) is not shown."""
    key = _clip(getattr(err, "full_key", None) or "(top level)")
    fields = getattr(getattr(err, "object_type", None), "__dataclass_fields__", None)
    if isinstance(err, ConfigKeyError) and fields:
        close = difflib.get_close_matches(str(getattr(err, "key", "")), fields, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"{where}: field {key}: unknown field{hint}; expected one of: {', '.join(fields)}"
    message = str(getattr(err, "msg", None) or err).split("\n")[0]
    return f"{where}: field {key}: {_clip(message, 120)}"


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


# ---------------------------------------------------------------------------- reference checks
class _Checker:
    def __init__(self, config: WorldConfig, where: str) -> None:
        self.config = config
        self.where = where

    def fail(self, key: str, message: str) -> None:
        raise SurvivalConfigError(f"{self.where}: field {key}: {message}")

    def name_in(self, key: str, name: str, known: Mapping[str, Any] | list[str], what: str) -> None:
        if name not in known:
            options = ", ".join(known) or "none defined"
            self.fail(key, f"unknown {what} {name!r}; expected one of: {options}")

    def at_least(self, key: str, value: float, low: float) -> None:
        if value < low:
            self.fail(key, f"expected a value >= {low}, got {value}")

    def probability(self, key: str, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            self.fail(key, f"expected a probability in [0, 1], got {value}")

    def glyph(self, key: str, value: str) -> None:
        if len(value) != 1:
            self.fail(key, f"expected one character, got {value!r}")


def meter_names(config: WorldConfig) -> list[str]:
    """The built-in meters, then the config's own."""
    return [*METERS, *config.meters]


def check_references(config: WorldConfig, where: str = "config") -> None:
    """Check names, ranges and combinations that the schema's types cannot express."""
    c = _Checker(config, where)
    _check_map_and_agent(c)
    _check_terrain_and_creatures(c)
    _check_items_and_recipes(c)
    _check_buffs(c)
    _check_rewards_and_tasks(c)


def _check_map_and_agent(c: _Checker) -> None:
    cfg = c.config
    c.at_least("horizon", cfg.horizon, 1)
    c.at_least("map.width", cfg.map.width, 3)
    c.at_least("map.height", cfg.map.height, 3)
    c.at_least("map.regions", cfg.map.regions, 1)
    c.at_least("map.drop_slots", cfg.map.drop_slots, 1)
    c.at_least("map.drop_lifetime", cfg.map.drop_lifetime, 0)
    agent = cfg.agent
    c.at_least("agent.life_limit", agent.life_limit, 1)
    c.at_least("agent.hp", agent.hp, 1)
    c.at_least("agent.temperature", agent.temperature, 0)
    for stat in STATS:
        c.at_least(f"agent.{stat}", getattr(agent, stat), 0)
    c.at_least("agent.backpack_capacity", agent.backpack_capacity, 1)
    for name, meter in cfg.meters.items():
        key = f"meters.{name}"
        if name in (*METERS, *STATS):
            c.fail(key, f"{name!r} is built in; give the new meter another name")
        if meter.max <= 0:
            c.fail(f"{key}.max", f"expected a value > 0, got {meter.max}")
        if meter.start is not None and not 0 < meter.start <= meter.max:
            c.fail(f"{key}.start", f"expected a value in (0, {meter.max}], got {meter.start}")
    c.at_least("clock.day", cfg.clock.day, 1)
    c.at_least("clock.night", cfg.clock.night, 0)
    seen: set[str] = set()
    for i, season in enumerate(cfg.seasons):
        c.at_least(f"seasons[{i}].length", season.length, 1)
        c.at_least(f"seasons[{i}].respawn_multiplier", season.respawn_multiplier, 0)
        if season.name in seen:
            c.fail(f"seasons[{i}].name", f"season {season.name!r} listed twice")
        seen.add(season.name)
    c.probability("weather.change_chance", cfg.weather.change_chance)
    for name, p in cfg.weather.kinds.items():
        c.at_least(f"weather.kinds.{name}", p, 0)
    if cfg.weather.kinds and sum(cfg.weather.kinds.values()) <= 0:
        c.fail("weather.kinds", "expected some weather with a positive probability, got all 0")


def _check_terrain_and_creatures(c: _Checker) -> None:
    cfg = c.config
    if not cfg.terrain:
        c.fail("terrain", "expected at least one terrain type, got none")
    if sum(t.weight for t in cfg.terrain.values()) <= 0:
        c.fail("terrain", "expected some terrain with a positive weight, got all 0")
    for name, terrain in cfg.terrain.items():
        c.at_least(f"terrain.{name}.weight", terrain.weight, 0)
        c.glyph(f"terrain.{name}.glyph", terrain.glyph)
        for creature, density in terrain.spawns.items():
            c.name_in(f"terrain.{name}.spawns", creature, cfg.creatures, "creature")
            c.probability(f"terrain.{name}.spawns.{creature}", density)
    for name, creature in cfg.creatures.items():
        key = f"creatures.{name}"
        if name in ("Agent", "Item", "Terrain"):
            c.fail(key, f"{name!r} is reserved for the agent, items or terrain; rename it")
        c.glyph(f"{key}.glyph", creature.glyph)
        c.at_least(f"{key}.hp", creature.hp, 1)
        c.at_least(f"{key}.vision", creature.vision, 0)
        c.at_least(f"{key}.move_speed", creature.move_speed, 0)
        c.probability(f"{key}.move_chance", creature.move_chance)
        c.at_least(f"{key}.attack", creature.attack, 0)
        c.at_least(f"{key}.max_count", creature.max_count, 1)
        c.probability(f"{key}.respawn", creature.respawn)
    for name, drops in cfg.drop_table.items():
        c.name_in("drop_table", name, cfg.creatures, "creature")
        for action, table in (("kill", drops.kill), ("collect", drops.collect)):
            for item, count in table.items():
                c.name_in(f"drop_table.{name}.{action}", item, cfg.items, "item")
                c.at_least(f"drop_table.{name}.{action}.{item}", count, 1)
        if drops.kill and not cfg.creatures[name].attackable:
            c.fail(f"drop_table.{name}.kill", f"creature {name!r} is not attackable")


def _check_items_and_recipes(c: _Checker) -> None:
    cfg = c.config
    for name, item in cfg.items.items():
        key = f"items.{name}"
        c.glyph(f"{key}.glyph", item.glyph)
        for meter in item.effects:
            c.name_in(f"{key}.effects", meter, meter_names(cfg), "meter")
        _temperature_in_use(c, f"{key}.effects", item.effects)
        if item.effects and item.kind is not ItemKind.consumable:
            c.fail(
                f"{key}.effects", f"only consumables have effects; {name!r} is {item.kind.value}"
            )
        if item.kind is ItemKind.equipment:
            if not item.slot:
                c.fail(f"{key}.slot", "equipment needs a slot name (e.g. hand), got none")
            c.at_least(f"{key}.durability", item.durability, 1)
            for buff in item.buffs:
                c.name_in(f"{key}.buffs", buff, cfg.buffs, "buff")
        elif item.slot or item.buffs:
            c.fail(f"{key}.slot", f"only equipment is worn; {name!r} is {item.kind.value}")
    for i, recipe in enumerate(cfg.recipes):
        key = f"recipes[{i}]"
        c.name_in(f"{key}.output", recipe.output, cfg.items, "item")
        c.at_least(f"{key}.count", recipe.count, 1)
        if not recipe.inputs:
            c.fail(f"{key}.inputs", "expected at least one input item, got none")
        for item, count in recipe.inputs.items():
            c.name_in(f"{key}.inputs", item, cfg.items, "item")
            c.at_least(f"{key}.inputs.{item}", count, 1)
    outputs = [r.output for r in cfg.recipes]
    for i, output in enumerate(outputs):
        if output in outputs[:i]:
            c.fail(f"recipes[{i}].output", f"a second recipe for {output!r}; keep one per item")


def _check_buffs(c: _Checker) -> None:
    cfg = c.config
    phases = list(PHASES) if cfg.clock.night else ["day"]
    seasons = [s.name for s in cfg.seasons]
    for name, buff in cfg.buffs.items():
        key = f"buffs.{name}"
        for phase in buff.phases:
            c.name_in(f"{key}.phases", phase, phases, "phase (night needs clock.night > 0)")
        for season in buff.seasons:
            c.name_in(f"{key}.seasons", season, seasons, "season")
        for weather in buff.weather:
            c.name_in(f"{key}.weather", weather, cfg.weather.kinds, "weather")
        for terrain in buff.terrain:
            c.name_in(f"{key}.terrain", terrain, cfg.terrain, "terrain")
        if not buff.effects:
            c.fail(f"{key}.effects", "expected at least one effect, got none")
        for effect in buff.effects:
            c.name_in(f"{key}.effects", effect, [*meter_names(cfg), *STATS], "meter or stat")
        _temperature_in_use(c, f"{key}.effects", buff.effects)


def _temperature_in_use(c: _Checker, key: str, effects: Mapping[str, float]) -> None:
    if "temperature" in effects and not c.config.agent.temperature:
        c.fail(
            key,
            "changes temperature but agent.temperature is 0 (off); expected a positive agent.temperature",
        )


def _check_rewards_and_tasks(c: _Checker) -> None:
    cfg = c.config
    for item in cfg.rewards.sparse:
        c.name_in("rewards.sparse", item, cfg.items, "item")
    for name, event in cfg.tasks.items():
        kind, _, target = event.partition(":")
        c.name_in(f"tasks.{name}", kind, list(EVENT_KINDS), "event kind")
        known = cfg.creatures if kind in ("attack", "kill", "collect") else cfg.items
        c.name_in(f"tasks.{name}", target, known, f"{kind} target")
    if cfg.observation.prey is not None:
        c.name_in("observation.prey", cfg.observation.prey, cfg.creatures, "creature")
    c.at_least("observation.terrain_radius", cfg.observation.terrain_radius, 0)
