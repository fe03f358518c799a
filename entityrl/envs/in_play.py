"""The checks every multi-player environment makes of a joint move: actions come for exactly
the players still in play, each with the actions the game needs."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from entityrl.env import Action, GlobalCategoricalAction


def check_in_play(env_name: str, actions: Mapping[str, object], in_play: Collection[str]) -> None:
    """Raise ``ValueError`` unless ``actions`` has an entry for every player of ``in_play`` and
    for no other player (a player that left, or none of the game)."""
    if not in_play:
        raise ValueError(f"{env_name}.act: the game is over (no player in play); call reset()")
    extra = sorted(set(actions) - set(in_play))
    missing = sorted(set(in_play) - set(actions))
    if extra or missing:
        problems = [f"not in play: {extra}"] * bool(extra) + [f"missing: {missing}"] * bool(missing)
        raise ValueError(
            f"{env_name}.act: expected actions for exactly the players in play "
            f"{sorted(in_play)}, got actions for {sorted(actions)} ({'; '.join(problems)})"
        )


def global_choice(env_name: str, player: str, chosen: Mapping[str, Action], name: str) -> str:
    """The label ``player`` chose for the global categorical action ``name``; raise
    ``ValueError`` if it did not choose one."""
    action = chosen.get(name)
    if not isinstance(action, GlobalCategoricalAction):
        raise ValueError(
            f"{env_name}.act: player {player!r} must choose {name!r} (a "
            f"GlobalCategoricalAction), got {action!r}"
        )
    return action.label
