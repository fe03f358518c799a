"""The light runtime with every kind of policy: continuous actions (sampled and deterministic)
and policies trained on stacked observations (fed raw observations, the runtime stacks them),
each against the torch agent."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import onnx
import pytest
import torch
from export.torch_reference import sharpened, untrained_agent
from stacking_envs import Blinking, Drift

from entityrl.env import (
    Batcher,
    ContinuousActionMask,
    ContinuousActionSpace,
    Entity,
    Environment,
    GlobalContinuousActionMask,
    GlobalContinuousActionSpace,
    Observation,
    ObsSpace,
    SerialVecEnv,
    VecObs,
)
from entityrl.env.stacking import StackedVecEnv, stacked_space
from entityrl.envs import CoinDuel, ContinuousMoveToOrigin
from entityrl.export import export_bytes
from entityrl.inference import OnnxPolicy, PolicyFileError, signature
from entityrl.training.agent import Agent

pytest.importorskip("onnxruntime", reason="the runtime needs onnxruntime (the 'inference' extra)")

TOLERANCE = 1e-5


def plain(per_obs: list[dict]) -> list[dict]:
    """Discrete actions as comparable values: ``{actor id: choice}`` per per-actor action, the
    choice of a global one."""
    return [
        {
            name: action.as_dict() if hasattr(action, "as_dict") else action.index
            for name, action in actions.items()
        }
        for actions in per_obs
    ]


# ---------------------------------------------------------------------------- continuous
def test_deterministic_continuous_actions_equal_the_agents_over_an_episode() -> None:
    """ContinuousMoveToOrigin played to its end by the exported policy: every step's thrust
    (the mean, clipped to the bounds) equals the torch agent's."""
    env = ContinuousMoveToOrigin()
    agent = untrained_agent(env.obs_space(), env.action_space(), "ContinuousMoveToOrigin")
    agent.deterministic = True
    policy = OnnxPolicy(export_bytes(agent), deterministic=True)
    batcher = Batcher(agent.obs_space, agent.action_space)
    env.seed(0)
    obs = env.reset()
    steps = 0
    while not obs.done:
        want = batcher.unbatch(agent.act(batcher.batch([obs])), [obs])[0]
        got = policy.act(obs)
        np.testing.assert_allclose(got["thrust"].values, want["thrust"].values, atol=TOLERANCE)
        assert got["thrust"].actors == want["thrust"].actors
        obs = env.act(got)
        steps += 1
    assert steps > 10


GAUSSIAN_SPACE = (
    ObsSpace({"Ship": Entity(["x", "y"])}, ["time"]),
    {
        "thrust": ContinuousActionSpace(["dx", "dy"], low=-100.0, high=100.0),
        "throttle": GlobalContinuousActionSpace(["power"], low=[-50.0], high=[50.0]),
    },
)


def gaussian_observation() -> Observation:
    return Observation(
        features={"Ship": [[0.5, -1.0], [2.0, 0.3]]},
        ids={"Ship": ["a", "b"]},
        global_features=[0.25],
        actions={"thrust": ContinuousActionMask(), "throttle": GlobalContinuousActionMask()},
    )


def test_sampled_continuous_actions_follow_the_exported_gaussian() -> None:
    """4,000 draws (bounds far away: no clipping) have each component's mean and standard
    deviation within 5 standard errors of the decision's; seeded draws repeat."""
    agent = untrained_agent(*GAUSSIAN_SPACE)
    with torch.no_grad():  # a spread well inside the bounds: 0.5 and 2 (thrust), 5 (throttle)
        agent.net.heads["thrust"].log_std.copy_(torch.tensor([0.5, 2.0]).log() - np.log(100))
        agent.net.heads["throttle"].log_std.copy_(torch.tensor([5.0]).log() - np.log(50))
    model = export_bytes(agent)
    obs = gaussian_observation()
    policy = OnnxPolicy(model, seed=3)
    decision = policy.decide(obs)
    np.testing.assert_allclose(decision.std["thrust"], [0.5, 2.0], rtol=1e-5)
    np.testing.assert_allclose(decision.std["throttle"], [5.0], rtol=1e-5)
    draws = 4000
    sampled = [policy.act(obs) for _ in range(draws)]
    for name, values in (
        ("thrust", np.stack([a["thrust"].values for a in sampled])),  # (draws, actors, dims)
        ("throttle", np.stack([a["throttle"].values[None] for a in sampled])),
    ):
        mean, std = decision.mean[name], decision.std[name]
        assert np.all(np.abs(values.mean(axis=0) - mean) <= 5 * std / np.sqrt(draws))
        assert np.all(np.abs(values.std(axis=0) - std) <= 5 * std / np.sqrt(2 * draws))
    first, second = (OnnxPolicy(model, seed=9).act(obs) for _ in range(2))
    for name in first:
        np.testing.assert_array_equal(first[name].values, second[name].values)
    deterministic = OnnxPolicy(model, deterministic=True).act(obs)
    np.testing.assert_array_equal(deterministic["thrust"].values, decision.mean["thrust"])


def test_sampled_continuous_actions_are_clipped_to_the_bounds() -> None:
    """A standard deviation of the whole range: the environment receives values within the
    bounds, some of them at a bound."""
    env = ContinuousMoveToOrigin()
    agent = untrained_agent(env.obs_space(), env.action_space())
    policy = OnnxPolicy(export_bytes(agent), seed=0)
    env.seed(1)
    values = np.concatenate([policy.act(env.reset())["thrust"].values for _ in range(200)])
    assert values.min() >= -0.01 and values.max() <= 0.01
    assert np.isin(values, np.float32([-0.01, 0.01])).any()


# ---------------------------------------------------------------------------- stacking
STEPS = 3


def stacked_agent(env: Environment, seed: int = 0) -> Agent:
    """An untrained (sharpened) agent of ``env`` stacked :data:`STEPS` deep, as a run with
    ``env.stack`` has."""
    obs_space = stacked_space(env.obs_space(), STEPS)
    agent = sharpened(untrained_agent(obs_space, env.action_space(), type(env).__name__, seed))
    agent.config.env.stack = STEPS
    agent.deterministic = True
    return agent


def torch_steps(
    env_class: type[Environment], agent: Agent, num_envs: int, steps: int, **kwargs: object
) -> Iterator[tuple[VecObs, list[Observation], np.ndarray, dict]]:
    """``steps`` steps of ``num_envs`` environments stacked as the trainer stacks them
    (:class:`StackedVecEnv`), the torch agent acting: per step the stacked batch, the raw
    observation of every environment, which of them start an episode, and the agent's
    output."""
    raw: list[list[tuple[Observation, bool]]] = [[] for _ in range(num_envs)]

    def logged(index: int) -> Environment:
        class Logged(env_class):  # type: ignore[valid-type, misc]
            def reset(self) -> Observation:
                raw[index].append((super().reset(), True))
                return raw[index][-1][0]

            def act(self, actions):  # type: ignore[no-untyped-def]
                raw[index].append((super().act(actions), False))
                return raw[index][-1][0]

        return Logged(**kwargs)

    made = iter(range(num_envs))
    vec = StackedVecEnv(SerialVecEnv(lambda: logged(next(made)), num_envs, seed=0), STEPS)
    obs = vec.reset()
    for _ in range(steps):
        out = agent.act_on(obs)
        fresh = np.array([log[-1][1] for log in raw])
        yield obs, [log[-1][0] for log in raw], fresh, out
        obs = vec.act(out.actions(obs))


@pytest.mark.parametrize("ids", ["int", "str"])
def test_a_stacked_policy_fed_raw_observations_decides_as_the_stacked_agent(ids: str) -> None:
    """Blinking (entities vanish, come back and change places; episodes end truncated), one
    environment: each step's value equals the torch agent's on the trainer's stacked
    observations, the runtime stacking the raw ones itself; without the history (every step
    a new episode) the values differ."""
    agent = stacked_agent(Blinking(length=5, ids=ids))
    model = export_bytes(agent)
    policy, forgetful = OnnxPolicy(model), OnnxPolicy(model)
    assert policy.obs_space == Blinking().obs_space() and policy.stack == STEPS
    differ = 0
    for _, (obs,), (fresh,), out in torch_steps(Blinking, agent, 1, 14, length=5, ids=ids):
        want = float(out.values[0])
        assert policy.decide(obs, new_episode=bool(fresh)).value == pytest.approx(
            want, abs=TOLERANCE
        )
        differ += abs(forgetful.decide(obs, new_episode=True).value - want) > 100 * TOLERANCE
    assert differ > 5


def test_act_batch_stacks_each_rows_episode() -> None:
    """Drift (the balls in a random order: only ids tell which is which), three environments
    whose episodes end together and restart: the runtime's act_batch of the raw observations,
    with the restarting rows flagged, acts as the agent on the stacked batch; a policy that
    is not told of the restarts carries the last episodes' history into the new ones."""
    # Seed 3: an untrained network on which the history, one step of +-0.1 per ball, flips
    # some choices (on most seeds it flips none: the control below would then be idle).
    agent = stacked_agent(Drift(length=4), seed=3)
    model = export_bytes(agent)
    policy, untold = OnnxPolicy(model, deterministic=True), OnnxPolicy(model, deterministic=True)
    batcher = Batcher(Drift().obs_space(), agent.action_space)
    differ = 0
    for stacked, observations, fresh, out in torch_steps(Drift, agent, 3, 10, length=4):
        want = plain(batcher.unbatch(out.actions(stacked), observations))
        assert plain(policy.act_batch(observations, new_episode=fresh)) == want
        differ += plain(untold.act_batch(observations)) != want
    assert differ > 0


def test_the_model_of_a_stacked_run_declares_its_steps(tmp_path) -> None:
    agent = stacked_agent(Drift())
    model = onnx.load_from_string(export_bytes(agent))
    props = {p.key: p.value for p in model.metadata_props}
    assert json.loads(props[signature.STACK_KEY]) == {"steps": STEPS, "match": "id"}
    # The spaces are the model's inputs, stacked; the runtime takes raw observations.
    assert json.loads(props[signature.SPACES_KEY])["entities"]["Ball"] == ["x", "x@t-1", "x@t-2"]
    unstacked = untrained_agent(Drift().obs_space(), Drift().action_space())
    no_stack = onnx.load_from_string(export_bytes(unstacked))
    assert signature.STACK_KEY not in {p.key for p in no_stack.metadata_props}
    # A declaration that does not fit the spaces is refused, naming the entity type.
    onnx.helper.set_model_props(no_stack, {**{p.key: p.value for p in no_stack.metadata_props},
                                           signature.STACK_KEY: signature.stack_metadata(2)})  # fmt: skip
    path = tmp_path / "wrong.onnx"
    onnx.save(no_stack, path)
    with pytest.raises(PolicyFileError, match=r"entity type 'Ball': expected features stacked 2"):
        OnnxPolicy(path)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"steps": 1, "match": "id"}', "expected an integer steps >= 2, got 1"),
        ('{"steps": 3, "match": "position"}', "expected match 'id'.*got 'position'"),
        ("[3]", "expected JSON with 'steps' and 'match'"),
    ],
)
def test_malformed_stack_declarations_are_named(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        signature.stack_steps({signature.STACK_KEY: text})


# ---------------------------------------------------------------------------- several players
def test_every_seat_of_a_game_is_a_row_of_act_batch() -> None:
    """CoinDuel played to its end: one act_batch call per step for every player's observation
    gives each player the actions the torch agent chooses for that seat."""
    env = CoinDuel()
    agent = sharpened(untrained_agent(env.obs_space(), env.action_space(), "CoinDuel"))
    agent.deterministic = True
    policy = OnnxPolicy(export_bytes(agent), deterministic=True)
    batcher = Batcher(agent.obs_space, agent.action_space)
    env.seed(0)
    seats = env.reset()
    steps = 0
    while not all(obs.done for obs in seats.values()):
        observations = list(seats.values())
        want = batcher.unbatch(agent.act(batcher.batch(observations)), observations)
        got = policy.act_batch(observations)
        assert plain(got) == plain(want)
        seats = env.act(dict(zip(seats, got, strict=True)))
        steps += 1
    assert steps > 3
