"""What a person sees of the game: the environment's picture, entity tables, choices, outcomes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from rich import box
from rich.columns import Columns
from rich.console import Console
from rich.table import Table
from rich.text import Text

from entityrl.play.choices import Option, Turn
from entityrl.play.entities import RowEntities, format_value


def make_console(file: object) -> Console:
    """A console writing to ``file`` that prints labels literally: environment strings may
    contain ``[...]`` or ``:name:``, which rich would otherwise read as markup or emoji."""
    return Console(file=file, markup=False, emoji=False, highlight=False)  # type: ignore[arg-type]


def entity_table(entities: RowEntities, type_name: str) -> Table:
    """One table per entity type: index within the row, then one column per feature; a
    ``hidden`` column appears when some entity of the type is hidden from the policy."""
    rows = entities.by_type[type_name]
    title = f"{type_name} ({len(rows)})"
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        min_width=len(title),
    )
    table.add_column("#", justify="right")
    for name in entities.feature_names(type_name):
        table.add_column(name, justify="right")
    show_hidden = any(e.hidden for e in rows)
    if show_hidden:
        table.add_column("hidden")
    for entity in rows:
        cells = [str(entity.index), *(format_value(v) for v in entity.features)]
        if show_hidden:
            cells.append("hidden" if entity.hidden else "")
        table.add_row(*cells, style="dim" if entity.hidden else None)
    return table


def show_state(console: Console, entities: RowEntities, picture: str | None) -> None:
    """The environment's own picture (if it draws one), the entities, the global features."""
    if picture is not None:
        console.print(Text(picture))
    present = [name for name, rows in entities.by_type.items() if rows]
    # Side by side while they fit the terminal: a step then fits on one screen.
    console.print(Columns([entity_table(entities, name) for name in present], padding=(0, 4)))
    absent = [name for name in entities.by_type if name not in present]
    if absent:
        console.print(Text(f"no entities of type: {', '.join(absent)}", style="dim"))
    names = entities.obs_space.global_features
    if names:
        pairs = "  ".join(
            f"{n}={format_value(v)}" for n, v in zip(names, entities.global_features, strict=True)
        )
        console.print(Text(f"global features: {pairs}"))


def show_turn(console: Console, turn: Turn, entities: RowEntities) -> None:
    """Who has to choose for which action, and the legal options (only those)."""
    console.print(Text(f"{turn.action}: {entities.describe(turn.actor)}", style="bold"))
    for option in turn.options:
        console.print(Text(f"  {option.key:>3}  {option.label}"))


def show_choices(
    console: Console, turns: Sequence[Turn], picks: Sequence[Option], entities: RowEntities
) -> None:
    """The actions taken this step, one line per actor."""
    for turn, pick in zip(turns, picks, strict=True):
        console.print(Text(f"{turn.action}: {entities.describe(turn.actor)} -> {pick.label}"))


def show_outcome(
    console: Console, reward: float, done: bool, metrics: Mapping[str, npt.NDArray[np.float64]]
) -> None:
    """The step's reward and, when the episode ended, its return, length and other metrics."""
    console.print(Text(f"reward {format_value(reward)}"))
    if not done:
        return
    summary = ", ".join(
        f"{name.removeprefix('episode_')} {format_value(values[0])}"
        for name, values in metrics.items()
    )
    console.print(Text(f"episode over: {summary}. A new episode starts.", style="bold"))
