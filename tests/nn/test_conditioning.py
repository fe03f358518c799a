"""Goal conditioning (net.conditioning): shapes, the goal's effect, isolation between rows,
``none`` as plain global features, and the errors of bad settings."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from entityrl.env import (
    Batcher,
    CategoricalActionMask,
    CategoricalActionSpace,
    Entity,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    VecObs,
)
from entityrl.env.space_data import space_differences, spaces_from_data, spaces_to_data
from entityrl.nn import RelposConfig, RogueNet, RogueNetConfig, TranslationConfig
from entityrl.nn.conditioning import HIDDEN, FiLMConditioning, HyperConditioning
from entityrl.training.config import ConfigError, load_config

# Goal columns out of order, between plain global features.
OBS_SPACE = ObsSpace(
    entities={"Unit": Entity(["x", "y"]), "Item": Entity(["x", "y", "kind"])},
    global_features=["time", "goal_b", "energy", "goal_a"],
    goal_features=["goal_a", "goal_b"],
)
PLAIN_SPACE = dataclasses.replace(OBS_SPACE, goal_features=())
ACTION_SPACE = {
    "move": CategoricalActionSpace(["n", "e", "s", "w"]),
    "plan": GlobalCategoricalActionSpace(["a", "b"]),
}
BATCHER = Batcher(OBS_SPACE, ACTION_SPACE)


def row(seed: int, index: int, goal: tuple[float, float]) -> Observation:
    """1-4 units and 0-5 items, drawn from (seed, index), and the goal."""
    rng = np.random.default_rng([seed, index])
    units, items = int(rng.integers(1, 5)), int(rng.integers(0, 6))
    return Observation(
        features={
            "Unit": rng.normal(size=(units, 2)).astype(np.float32),
            "Item": rng.normal(size=(items, 3)).astype(np.float32),
        },
        actions={
            "move": CategoricalActionMask(actor_types=["Unit"]),
            "plan": GlobalCategoricalActionMask(),
        },
        global_features=[0.3, goal[1], -1.0, goal[0]],
    )


def batch(goals: list[tuple[float, float]], seed: int = 0) -> VecObs:
    """One row per goal; row ``i`` holds the same entities in every batch of the same seed."""
    return BATCHER.batch([row(seed, i, goal) for i, goal in enumerate(goals)])


def net(conditioning: str, space: ObsSpace = OBS_SPACE, seed: int = 0, **config) -> RogueNet:
    torch.manual_seed(seed)
    model = RogueNet(space, ACTION_SPACE, RogueNetConfig(conditioning=conditioning, **config))
    # Input statistics from a batch with varied goals, so that normalization is not a no-op.
    model.update_normalizers(batch([(1.0, 0.0), (0.0, 1.0), (2.0, -1.0), (0.5, 0.5)], seed=9))
    return model.eval()


def scores(model: RogueNet, obs: VecObs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every actor's move logits, every row's plan logits and every row's value."""
    with torch.no_grad():
        choice = model.choice_scores(obs)
        return choice["move"].scores, choice["plan"].scores, model.values(obs)


GOALS = [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0)]


@pytest.mark.parametrize("conditioning", ["hyper", "film"])
def test_the_goal_shapes_outputs_and_leaves_the_embedding(conditioning: str) -> None:
    model = net(conditioning)
    expected = HyperConditioning if conditioning == "hyper" else FiLMConditioning
    assert isinstance(model.encoder.conditioning, expected)
    # The embedding takes each entity's own features and the 2 plain global features only.
    assert model.encoder.embedding.num_global == 2
    assert model.encoder.embedding.projections["Unit"][0].in_features == 2 + 2
    obs = batch(GOALS)
    move, plan, values = scores(model, obs)
    assert move.shape == (obs.action_masks["move"].actors.items, 4)
    assert plan.shape == (3, 2) and values.shape == (3,)
    other = batch([(0.0, 1.0), (1.0, 1.0), (1.0, 0.0)])  # the same entities, other goals
    changed = scores(model, other)
    for before, after in zip((move, plan, values), changed, strict=True):
        assert (before - after).abs().amax() > 1e-3


@pytest.mark.parametrize("conditioning", ["hyper", "film"])
@pytest.mark.parametrize("grids", [False, True], ids=["packed", "grids"])
def test_a_rows_outputs_do_not_depend_on_the_other_rows(conditioning: str, grids: bool) -> None:
    """Each row's goal conditions its own entities alone, in either layout (with padding)."""
    model = net(conditioning)
    model.grid_layout = grids  # padded grids, as on a GPU, else packed rows
    together = scores(model, batch(GOALS))
    alone = scores(model, batch(GOALS[:1]))  # the batch's first row by itself
    actors = alone[0].shape[0]
    torch.testing.assert_close(together[0][:actors], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(together[1][:1], alone[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(together[2][:1], alone[2], atol=1e-5, rtol=1e-5)


def test_gradients_reach_the_conditioning() -> None:
    model = net("hyper").train()
    obs = batch(GOALS)
    actions = {name: torch.zeros(m.actors.items, dtype=torch.int64) for name, m in obs.action_masks.items()}  # fmt: skip
    out = model(model.prepare(obs), actions)
    (out.heads["move"].logprob.sum() + out.values.sum()).backward()
    conditioning = model.encoder.conditioning
    assert conditioning is not None
    for name, param in conditioning.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_none_is_exactly_the_goal_as_global_features() -> None:
    marked, plain = net("none"), net("hyper", PLAIN_SPACE)
    assert marked.encoder.conditioning is None and plain.encoder.conditioning is None
    assert marked.state_dict().keys() == plain.state_dict().keys()
    for got, want in zip(scores(marked, batch(GOALS)), scores(plain, batch(GOALS)), strict=True):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_conditioning_sizes() -> None:
    hyper = net("hyper", d_model=16, n_head=2).encoder.conditioning
    film = net("film", d_model=16, n_head=2, n_layer=3).encoder.conditioning
    goal = torch.ones(5, 2)
    assert hyper is not None and film is not None
    assert hyper.row_context(goal).shape == (5, HIDDEN + 1 + 16)
    assert film.row_context(goal).shape == (5, (3 + 1) * 2 * 16)  # embedding + 3 blocks


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match=r"net.conditioning must be one of hyper, film, none"):
        RogueNetConfig(conditioning="hypernet")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="conditioning"):
        load_config("GoalGrid", ["net.conditioning=films"])
    with pytest.raises(ValueError, match=r"goal_features must be distinct names among"):
        ObsSpace(global_features=["a"], goal_features=["b"])
    with pytest.raises(ValueError, match=r"got \['a', 'a'\]"):
        ObsSpace(global_features=["a"], goal_features=["a", "a"])


def test_goal_features_travel_with_the_spaces() -> None:
    data = spaces_to_data(OBS_SPACE, ACTION_SPACE)
    assert spaces_from_data(data)[0] == OBS_SPACE
    assert "goal_features" not in spaces_to_data(PLAIN_SPACE, ACTION_SPACE)
    differences = space_differences((OBS_SPACE, ACTION_SPACE), (PLAIN_SPACE, ACTION_SPACE))
    assert differences == [
        "the environment has goal features [], the agent expects ['goal_a', 'goal_b']"
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"separate_value": True},
        {"pooling": "meanmax"},
        {"memory": True},
        {"relpos": RelposConfig(["x", "y"], [2, 2])},
        {"translation": TranslationConfig("Unit", ["x", "y"])},
    ],
    ids=["separate value", "pooling", "memory", "relpos", "translation"],
)
def test_the_goal_conditions_every_network_option(options: dict) -> None:
    model = net("film", **options)
    assert model.encoder.conditioning is not None
    if model.value_encoder is not None:
        assert model.value_encoder.conditioning is not None
    before = scores(model, batch(GOALS))
    after = scores(model, batch([(0.0, 1.0), (1.0, 1.0), (1.0, 0.0)]))
    assert (before[2] - after[2]).abs().amax() > 1e-3  # the value
    assert (before[0] - after[0]).abs().amax() > 1e-3  # the policy
