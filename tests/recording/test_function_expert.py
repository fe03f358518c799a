"""Experts written as functions of one Observation (docs/recording.md): recorded as the batched
expert is, the doc's example runs, and malformed answers are refused with what was wrong."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from entityrl.env import CategoricalAction, GlobalCategoricalAction, Observation, SelectEntityAction
from entityrl.envs import make_vec
from entityrl.envs.experts import CherryPickExpert, multi_snake_expert
from entityrl.recording import ExpertOutputError, FunctionExpert, Recording, record

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "recording.md").read_text()


def best_cherry(obs: Observation) -> dict:
    """CherryPick's expert on one observation: pick the best cherry (by id)."""
    quality = np.asarray(obs.features["Cherry"])[:, 0]
    cherries = obs.entity_ids("Cherry")
    return {"Pick Cherry": SelectEntityAction(_actors(obs), [cherries[int(np.argmax(quality))]])}


def _actors(obs: Observation) -> list:
    mask = obs.actions["Pick Cherry"]
    return obs.named_entities(list(obs.features), mask.actor_ids, mask.actor_types)


def test_a_function_expert_records_what_the_batched_expert_records(tmp_path: Path) -> None:
    record(CherryPickExpert(), make_vec("CherryPick", 4, seed=3), tmp_path / "vec.arrow", 6)
    record(best_cherry, make_vec("CherryPick", 4, seed=3), tmp_path / "fn.arrow", 6)
    for a, b in zip(
        Recording(tmp_path / "vec.arrow").episodes(),
        Recording(tmp_path / "fn.arrow").episodes(),
        strict=True,
    ):
        assert a.batch.equals(b.batch)


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    after = DOC[DOC.index("<!-- the expert function example") :]
    found = re.search(r"```python\n(.*?)```", after, re.S)
    assert found is not None, "docs/recording.md lost its expert function example"
    monkeypatch.chdir(tmp_path)
    exec(compile(found.group(1), "recording.md", "exec"), {})
    episodes = list(Recording(tmp_path / "snake.arrow").episodes())
    assert len(episodes) >= 20  # the step that completes the 20th may complete others
    assert np.mean([e.total_reward for e in episodes]) > 0.8


def test_multi_snake_expert_plays_every_snake() -> None:
    env = make_vec("MultiSnake", 2, seed=0, num_snakes=3)
    env.reset()
    actions = FunctionExpert(multi_snake_expert, env).act(env.reset())
    assert actions["move"].lengths.tolist() == [3, 3]


def _expert_error(function, env_name: str = "CherryPick") -> str:
    env = make_vec(env_name, 2, seed=0)
    with pytest.raises(ExpertOutputError) as err:
        FunctionExpert(function, env).act(env.reset())
    return str(err.value)


def test_malformed_answers_name_the_action_what_was_expected_and_what_came() -> None:
    message = _expert_error(lambda obs: [1, 2])
    assert "expected a dict of actions by action name, got list" in message
    message = _expert_error(lambda obs: {})
    assert "no 'Pick Cherry' action although the observation offers it (got [])" in message
    message = _expert_error(lambda obs: {"Pick Cherry": 3})
    assert "action 'Pick Cherry': expected a SelectEntityAction, got int (3)" in message
    message = _expert_error(lambda obs: {"Pick Cherry": SelectEntityAction(_actors(obs), ["x"])})
    assert "expected one actee per actor among the candidates" in message and "['x']" in message
    message = _expert_error(lambda obs: {"Pick Cherry": SelectEntityAction([], [])})
    assert "expected one choice for each of the actors" in message and "missing" in message
    message = _expert_error(
        lambda obs: {"Jump": GlobalCategoricalAction(0, "x"), **best_cherry(obs)}
    )
    assert "returned actions ['Jump'] that the observation does not offer" in message


def test_choices_out_of_range_are_refused() -> None:
    def bad(obs: Observation) -> dict:
        actors = obs.entity_ids("SnakeHead")
        return {"move": CategoricalAction(list(actors), np.full(len(actors), 7, np.int64))}

    message = _expert_error(bad, "MultiSnake")
    assert "action 'move': expected choice indices in 0..3" in message and "got [7, 7]" in message


def test_a_function_expert_needs_the_environments_observations() -> None:
    from entityrl.envs.cherry_pick_batched import CherryPickBatched

    with pytest.raises(TypeError, match="only a SerialVecEnv keeps; got a CherryPickBatched"):
        FunctionExpert(best_cherry, CherryPickBatched(2))
