"""Adversarial imitation's fixes for early endings (issue #30): absorbing states exactly after
episodes ended by the task, the gradient penalty, and the saturation warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from test_truncation import TimeLimited
from torch import nn
from torch.nn import functional

from entityrl.algorithms.common.optimizer import OptimConfig
from entityrl.algorithms.gail.algorithm import EndingLog, expert_steps
from entityrl.algorithms.gail.discriminator import (
    SATURATED_STEPS,
    Discriminator,
    DiscriminatorSaturationWarning,
    GAILConfig,
    SaturationWatch,
    Steps,
    endings,
    gradient_penalty,
    horizon,
    weighted_bce,
)
from entityrl.env import SerialVecEnv
from entityrl.recording import Recording, record
from entityrl.training.config import ConfigError


def _wait(num_envs: int) -> dict:
    from entityrl.ragged import RaggedArray

    return {"wait": RaggedArray(np.zeros((num_envs, 1), np.int64), np.ones(num_envs, np.int64))}


def _recording(path: Path, truncate: bool) -> Path:
    env = SerialVecEnv(lambda: TimeLimited(truncate), 2, seed=0)
    record(lambda obs: _waiting(), env, path, 4)
    return path


def _waiting() -> dict:
    from entityrl.env import GlobalCategoricalAction

    return {"wait": GlobalCategoricalAction(0, "wait")}


@pytest.mark.parametrize("truncate", [True, False])
def test_the_expert_side_marks_only_endings_by_the_task(tmp_path: Path, truncate: bool) -> None:
    demos = _recording(tmp_path / "demos.arrow", truncate)
    assert [e.truncated for e in Recording(demos).episodes()] == [truncate] * 4
    env = SerialVecEnv(lambda: TimeLimited(truncate), 1, seed=0)
    steps = expert_steps("algo=gail", [str(demos)], None, env)
    assert steps.num_rows == 12  # 4 episodes of 3 steps
    expected = np.tile([False, False, not truncate], 4)
    np.testing.assert_array_equal(steps.terminal, expected)


@pytest.mark.parametrize("truncate", [True, False])
def test_the_policy_side_marks_only_endings_by_the_task(truncate: bool) -> None:
    log = EndingLog(SerialVecEnv(lambda: TimeLimited(truncate), 2, seed=0))
    log.reset()
    dones = np.stack([log.act(_wait(2)).done for _ in range(6)])
    terminal = dones & ~log.take(6)
    assert dones.sum() == 4  # steps 3 and 6 end the episodes of both environments
    assert terminal.sum() == (0 if truncate else 4)
    assert log.truncated == []


def _discriminator(env: SerialVecEnv, **settings: object) -> Discriminator:
    torch.manual_seed(0)
    return Discriminator(
        env.obs_space, env.action_space, GAILConfig(**settings), "gail", OptimConfig(),  # type: ignore[arg-type]
        torch.device("cpu"),
    )  # fmt: skip


def _expert(tmp_path: Path) -> tuple[SerialVecEnv, Steps]:
    """4 episodes of 3 steps, each ended by the task at its third step."""
    demos = _recording(tmp_path / "demos.arrow", truncate=False)
    env = SerialVecEnv(lambda: TimeLimited(False), 1, seed=0)
    return env, expert_steps("algo=gail", [str(demos)], None, env)


@pytest.mark.parametrize("ending", [True, False])
def test_one_absorbing_state_follows_each_ending_by_the_task(tmp_path: Path, ending: bool) -> None:
    env, steps = _expert(tmp_path)
    for absorbing in (True, False):
        discriminator = _discriminator(env, absorbing=absorbing, ending=ending)
        with torch.no_grad():
            z, weights = discriminator.side(steps, gamma=0.9)
            embedded = discriminator.embedded(steps.obs, steps.actions)
        assert len(z) == len(weights) == 12 + (4 if absorbing else 0)
        torch.testing.assert_close(z[:12], embedded)
        assert z[:, 0].sum() == (4 if absorbing else 0)  # the indicator of the absorbing state
        if absorbing:
            # Each follows one ending, in order; with `ending` it carries that step's inputs.
            ended = embedded[[2, 5, 8, 11], 1:]
            expected = ended if ending else torch.zeros_like(ended)
            torch.testing.assert_close(z[12:, 1:], expected)


@pytest.mark.parametrize(("weight", "expected"), [(None, 10.0), (3.0, 3.0)])
def test_the_absorbing_weight_falls_exactly_on_absorbing_states(
    tmp_path: Path, weight: float | None, expected: float
) -> None:
    """Null: the horizon 1 / (1 - gamma), the discounted occupancy an absorbing state stands
    for against one step."""
    env, steps = _expert(tmp_path)
    discriminator = _discriminator(env, absorbing_weight=weight)
    z, weights = discriminator.side(steps, gamma=0.9)
    is_absorbing = z[:, 0] == 1
    assert is_absorbing.sum() == 4
    torch.testing.assert_close(weights[is_absorbing], torch.full((4,), expected))
    torch.testing.assert_close(weights[~is_absorbing], torch.ones(12))


def test_the_weighted_loss_on_a_hand_made_case() -> None:
    logits = torch.tensor([0.0, 2.0])
    weights = torch.tensor([1.0, 3.0])
    # Label 1: -log sigmoid(logit), weighted (1 * log 2 + 3 * log(1 + e^-2)) / 4.
    expected = (np.log(2) + 3 * np.log1p(np.exp(-2.0))) / 4
    assert weighted_bce(logits, 1.0, weights).item() == pytest.approx(expected, rel=1e-6)
    # Label 0: -log(1 - sigmoid(logit)) = softplus(logit).
    expected = (np.log(2) + 3 * np.log1p(np.exp(2.0))) / 4
    assert weighted_bce(logits, 0.0, weights).item() == pytest.approx(expected, rel=1e-6)


def test_the_update_weighs_absorbing_states_in_its_loss(tmp_path: Path) -> None:
    """The loss :meth:`Discriminator.update` reports (before its step) is the weighted mean
    of the binary cross-entropy over each side, absorbing states weighing ``absorbing_weight``;
    the head is set so that absorbing states score far from steps, so weights matter."""
    env, expert = _expert(tmp_path)
    policy = expert.take(np.arange(expert.num_rows))
    policy.terminal[:] = False  # the policy side: steps alone
    for weight in (1.0, 50.0):
        discriminator = _discriminator(env, absorbing_weight=weight, grad_penalty=0.0)
        with torch.no_grad():
            discriminator.head[0].weight[:, 0] += 3.0  # the indicator moves the logit
            z, w = discriminator.side(expert, gamma=0.9)
            policy_z, _ = discriminator.side(policy, gamma=0.9)
            expert_loss = functional.softplus(-discriminator.logits(z))  # label 1
            policy_loss = functional.softplus(discriminator.logits(policy_z)).mean()  # label 0
        expected = float((expert_loss * w).sum() / w.sum() + policy_loss)
        unweighted = float(expert_loss.mean() + policy_loss)
        assert abs(expected - unweighted) > 0.01 or weight == 1.0
        stats = discriminator.update(policy, expert, np.random.default_rng(0), 1, 64, 0.9)
        assert stats["loss"] == pytest.approx(expected, rel=1e-4)


@pytest.mark.parametrize("ending", [True, False])
@pytest.mark.parametrize("form", ["logit", "positive", "negative"])
def test_rewards_count_the_absorbing_state_after_each_ending(
    tmp_path: Path, form: str, ending: bool
) -> None:
    """Each step earns its reward less the reference; a step that ended its episode by the
    task adds the absorbing state's value after it, gamma / (1 - gamma) times its reward less
    the reference. The reference is the mean reward of the absorbing states after the
    expert's endings."""
    env, steps = _expert(tmp_path)
    discriminator = _discriminator(env, reward=form, ending=ending)
    gamma = 0.9
    with torch.no_grad():
        z = discriminator.embedded(steps.obs, steps.actions)
        logits = discriminator.logits(z).numpy().astype(np.float64)
        absorbing = discriminator.logits(discriminator.absorbing_inputs(z)).numpy()
    of = {
        "logit": lambda x: x,
        "positive": lambda x: np.log1p(np.exp(x)),
        "negative": lambda x: -np.log1p(np.exp(-x)),
    }[form]
    reference = discriminator.reference(endings(steps))
    assert reference == pytest.approx(float(of(absorbing[steps.terminal]).mean()), rel=1e-5)
    # This expert's endings are all alike; another reference makes the ending's term show.
    shifted = reference - 0.3
    rewards = discriminator.rewards(steps, gamma, shifted)
    expected = of(logits) - shifted
    if ending:
        expected[steps.terminal] += gamma / (1 - gamma) * (of(absorbing) - shifted)[steps.terminal]
        assert not np.allclose(expected, of(logits) - shifted, atol=1.0)
    # else one absorbing state, whose reward is the reference: endings add nothing.
    np.testing.assert_allclose(rewards, expected, rtol=1e-4, atol=1e-5)
    off = _discriminator(env, reward=form, ending=ending, absorbing=False)
    assert off.reference(endings(steps)) == 0.0


def test_the_reference_without_expert_endings_is_zero(tmp_path: Path) -> None:
    env, steps = _expert(tmp_path)
    none = steps.take(np.flatnonzero(~steps.terminal))
    assert _discriminator(env).reference(endings(none)) == 0.0


def test_absorbing_states_need_a_discount_below_one(tmp_path: Path) -> None:
    assert horizon(0.99) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="discount below 1, got gamma=1"):
        horizon(1.0)
    # One absorbing state adds nothing at an ending, so any discount serves.
    env, steps = _expert(tmp_path)
    assert np.isfinite(_discriminator(env).rewards(steps, 1.0, 0.0)).all()
    with pytest.raises(ValueError, match="discount below 1"):
        _discriminator(env, ending=True).rewards(steps, 1.0, 0.0)


def test_the_gradient_penalty_on_a_hand_made_case() -> None:
    # A linear head w . z has gradient w everywhere: the penalty is (|w| - 1)^2 = (5 - 1)^2.
    linear = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor([[3.0, 4.0]]))
    expert, policy = torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.zeros(2, 2)
    mix = torch.tensor([0.5, 0.25])
    assert gradient_penalty(linear, expert, policy, mix).item() == pytest.approx(16.0)

    # |z|^2 / 2 has gradient z: at the points 0.5 * (1, 0) and 0.25 * (0, 2), norms 0.5 and 0.5.
    class HalfSquare(nn.Module):
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return (z**2).sum(1, keepdim=True) / 2

    assert gradient_penalty(HalfSquare(), expert, policy, mix).item() == pytest.approx(0.25)


def test_the_penalty_is_differentiable_in_the_head() -> None:
    linear = nn.Linear(2, 1)
    penalty = gradient_penalty(linear, torch.ones(3, 2), torch.zeros(3, 2), torch.rand(3))
    penalty.backward()
    assert linear.weight.grad is not None and linear.weight.grad.abs().sum() > 0


def test_the_saturation_warning_fires_once_when_both_sides_stay_saturated() -> None:
    watch = SaturationWatch(0.99, "gail")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(SATURATED_STEPS - 1):
            watch.observe(1.0, 1.0)
        watch.observe(0.9, 1.0)  # one unsaturated step starts the count again
        for _ in range(SATURATED_STEPS - 1):
            watch.observe(1.0, 0.995)
    with pytest.warns(DiscriminatorSaturationWarning, match=r"gail\.grad_penalty=10"):
        watch.observe(1.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2 * SATURATED_STEPS):
            watch.observe(1.0, 1.0)  # once only


def test_the_saturation_warning_stays_silent_when_one_side_is_fooled() -> None:
    watch = SaturationWatch(0.99, "dac")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3 * SATURATED_STEPS):
            watch.observe(1.0, 0.5)
            watch.observe(0.5, 1.0)


def test_a_discriminator_that_saturates_in_training_warns(tmp_path: Path) -> None:
    """The policy's steps are nothing like the expert's (its clock reads 10 more, it never
    ends an episode): with no penalty the discriminator soon tells every step apart, and the
    warning names what to try."""
    demos = _recording(tmp_path / "demos.arrow", truncate=False)
    env = SerialVecEnv(lambda: TimeLimited(False), 1, seed=0)
    expert = expert_steps("algo=gail", [str(demos)], None, env)
    policy = expert.take(np.arange(expert.num_rows))
    policy.obs.features["Clock"].data[:] += 10
    policy.terminal[:] = False
    torch.manual_seed(0)
    settings = GAILConfig(grad_penalty=0.0, lr=0.01)
    discriminator = Discriminator(
        env.obs_space, env.action_space, settings, "gail", OptimConfig(), torch.device("cpu")
    )
    discriminator.net.update_normalizers(expert.obs)
    with pytest.warns(
        DiscriminatorSaturationWarning, match=r"expert 1\.000, policy 1\.000.*gail\.absorbing"
    ):
        discriminator.update(policy, expert, np.random.default_rng(0), 400, 64, 0.99)


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"gail\.grad_penalty must be >= 0, got -1"):
        GAILConfig(grad_penalty=-1)
    with pytest.raises(ValueError, match=r"gail\.absorbing_weight must be > 0 or null, got 0"):
        GAILConfig(absorbing_weight=0)
    with pytest.raises(ValueError, match=r"gail\.reward must be one of"):
        GAILConfig(reward="sigmoid")
    with pytest.raises(ConfigError, match=r"bc\.demos \(for algo=gail\)"):
        expert_steps("algo=gail", ["/nonexistent.arrow"], None, SerialVecEnv(TimeLimited, 1))


def _snake_steps(tmp_path: Path) -> tuple[object, Steps]:
    """Steps of MultiSnake's expert: two snakes act at every step (several actors per row)."""
    from entityrl.envs import make_vec
    from entityrl.envs.experts import multi_snake_expert
    from entityrl.recording import FunctionExpert

    kwargs = {"num_snakes": 2, "max_snake_length": 4}
    env = make_vec("MultiSnake", 2, seed=0, **kwargs)
    path = tmp_path / "snakes.arrow"
    record(FunctionExpert(multi_snake_expert, env), env, path, 2, env_id="MultiSnake",
           env_kwargs=kwargs)  # fmt: skip
    return env, expert_steps("algo=gail", [str(path)], None, env)


def test_the_structured_logit_is_log_q_less_log_pi(tmp_path: Path) -> None:
    """Structured: a step's logit is the sum over actors and actions of the discriminator's
    log-probability of the choice less the learner's, an absorbing state's one learned number;
    a discriminator whose heads are the learner's policy cannot tell: logit 0, D = 1/2."""
    from entityrl.nn.rogue_net import RogueNet, RogueNetConfig

    env, steps = _snake_steps(tmp_path)
    torch.manual_seed(1)
    policy = RogueNet(env.obs_space, env.action_space, RogueNetConfig(n_layer=1, n_head=1))
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn_like(p))  # a policy far from uniform
    settings = GAILConfig(structured=True)
    discriminator = Discriminator(
        env.obs_space, env.action_space, settings, "gail", OptimConfig(), torch.device("cpu"),
        policy=policy,
    )  # fmt: skip
    with torch.no_grad():
        discriminator.head.absorbing.fill_(0.7)
        z = discriminator.embedded(steps.obs, steps.actions)
        logits = discriminator.logits(z)
        absorbing = discriminator.logits(discriminator.absorbing_inputs(z[:3]))

        def summed(net: RogueNet) -> torch.Tensor:
            heads = net.evaluate(steps.obs, steps.actions).heads
            total = torch.zeros(steps.num_rows)
            for name, a in steps.actions.items():
                rows = torch.from_numpy(a.row_index())
                total = total.index_add(0, rows, heads[name].logprob)
            return total

        expected = summed(discriminator.net) - summed(policy)
    assert all(len(a.data) == 2 * steps.num_rows for a in steps.actions.values())  # 2 actors
    assert expected.abs().max() > 0.1  # the two networks differ
    torch.testing.assert_close(logits, expected)
    torch.testing.assert_close(absorbing, torch.full((3,), 0.7))
    policy.load_state_dict(discriminator.net.state_dict())
    with torch.no_grad():
        z = discriminator.embedded(steps.obs, steps.actions)
        torch.testing.assert_close(discriminator.logits(z), torch.zeros(steps.num_rows))


def test_structured_needs_the_policy_and_no_ending() -> None:
    with pytest.raises(ValueError, match=r"gail\.structured scores every absorbing state alike"):
        GAILConfig(structured=True, ending=True)
    env = SerialVecEnv(TimeLimited, 1)
    with pytest.raises(ValueError, match=r"gail\.structured needs the learner's policy"):
        _discriminator(env, structured=True)


def test_the_absorbing_logit_is_the_minimum_of_the_loss_over_it(tmp_path: Path) -> None:
    """Structured, each update sets the absorbing states' one logit from the two sides' counts
    of rows and endings: the number where the weighted loss over it is least (up to the half
    ending added to each side), not a parameter Adam moves by about lr per step."""
    from entityrl.algorithms.gail.discriminator import absorbing_logit
    from entityrl.nn.rogue_net import RogueNet, RogueNetConfig

    env, expert = _snake_steps(tmp_path)
    ends = np.flatnonzero(expert.terminal)
    assert len(ends) == 2  # 2 recorded episodes, both ended by the task
    # The policy's side: the same steps, ending 4 times as often (every other step ends).
    policy = Steps(expert.obs, expert.actions, np.arange(expert.num_rows) % 2 == 1)
    discriminator = Discriminator(
        env.obs_space, env.action_space, GAILConfig(structured=True, absorbing_weight=3.0),
        "gail", OptimConfig(), torch.device("cpu"),
        policy=RogueNet(env.obs_space, env.action_space, RogueNetConfig(n_layer=1, n_head=1)),
    )  # fmt: skip
    assert "head.absorbing" not in dict(discriminator.model.named_parameters())
    discriminator.update(policy, expert, np.random.default_rng(0), 1, 10_000, 0.9)
    c = float(discriminator.head.absorbing)
    rows, policy_ends = expert.num_rows, int(policy.terminal.sum())
    assert c == pytest.approx(absorbing_logit((rows, 2), (rows, policy_ends), 3.0))
    assert c < -1.0  # the policy's side ends far more often: its endings look like the policy's

    def loss(logit: torch.Tensor) -> torch.Tensor:
        """The update's loss as a function of the absorbing states' logit alone."""
        total = torch.zeros(())
        for steps, label in ((expert, 1.0), (policy, 0.0)):
            with torch.no_grad():
                z, weights = discriminator.side(steps, 0.9)
                logits = discriminator.logits(z)
            logits = torch.where(z[:, 0] > 0, logit, logits)
            total = total + weighted_bce(logits, label, weights)
        return total

    at = torch.tensor(c, requires_grad=True)
    (slope,) = torch.autograd.grad(loss(at), at)
    assert abs(float(slope)) < 0.02  # least there, up to the half ending added to each side
    with torch.no_grad():
        assert float(loss(at - 0.5)) > float(loss(at)) < float(loss(at + 0.5))


def test_a_side_without_endings_keeps_the_absorbing_logit_finite() -> None:
    from entityrl.algorithms.gail.discriminator import absorbing_logit

    for expert, policy in (((100, 0), (100, 30)), ((100, 30), (100, 0)), ((5, 0), (5, 0))):
        assert np.isfinite(absorbing_logit(expert, policy, 1.0))
    assert absorbing_logit((100, 0), (100, 0), 1.0) == 0.0  # alike: cannot tell


def test_the_structured_reward_keeps_entropy_times_the_log_pi(tmp_path: Path) -> None:
    """``entropy``: the structured reward is ``log q - entropy * log pi`` less the reference
    (at 1, the logit itself); the discriminator's loss is unchanged."""
    from entityrl.nn.rogue_net import RogueNet, RogueNetConfig

    env, steps = _snake_steps(tmp_path)
    torch.manual_seed(1)
    policy = RogueNet(env.obs_space, env.action_space, RogueNetConfig(n_layer=1, n_head=1))
    rewards = {}
    for entropy in (1.0, 0.25):
        torch.manual_seed(2)
        discriminator = Discriminator(
            env.obs_space, env.action_space, GAILConfig(structured=True, entropy=entropy),
            "gail", OptimConfig(), torch.device("cpu"), policy=policy,
        )  # fmt: skip
        rewards[entropy] = discriminator.rewards(steps, 0.9, reference=0.3)
        with torch.no_grad():
            z = discriminator.embedded(steps.obs, steps.actions)
    log_q, log_pi = z[:, 2].numpy(), z[:, -1].numpy()
    assert np.abs(log_pi).min() > 0.1  # 2 actors of 4 choices each: well away from 0
    np.testing.assert_allclose(rewards[1.0], log_q - log_pi - 0.3, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rewards[0.25], log_q - 0.25 * log_pi - 0.3, rtol=1e-5, atol=1e-5)


def test_entropy_needs_the_structured_discriminator() -> None:
    with pytest.raises(
        ValueError, match=r"gail\.entropy weighs the log pi .*gail\.structured=true"
    ):
        GAILConfig(entropy=0.5)
    with pytest.raises(ValueError, match=r"gail\.entropy must be >= 0, got -1"):
        GAILConfig(structured=True, entropy=-1.0)


def test_a_checkpoint_with_the_trained_absorbing_logit_still_loads(tmp_path: Path) -> None:
    """Checkpoints before the absorbing logit was set held it as the structured
    discriminator's last trained parameter; their optimizer state loads without it."""
    from entityrl.nn.rogue_net import RogueNet, RogueNetConfig

    env, steps = _snake_steps(tmp_path)
    policy = RogueNet(env.obs_space, env.action_space, RogueNetConfig(n_layer=1, n_head=1))

    def make() -> Discriminator:
        return Discriminator(
            env.obs_space, env.action_space, GAILConfig(structured=True), "gail",
            OptimConfig(), torch.device("cpu"), policy=policy,
        )  # fmt: skip

    trained = make()
    trained.update(steps, steps, np.random.default_rng(0), 2, 8, 0.9)
    state = trained.state_dict()
    optimizer = state["optimizer"]
    (group,) = optimizer["param_groups"]
    n = len(group["params"])
    old = {  # the same, with one more scalar parameter last, as Adam kept it
        "state": {**optimizer["state"], n: {"step": torch.tensor(2.0),
                  "exp_avg": torch.zeros(()), "exp_avg_sq": torch.zeros(())}},
        "param_groups": [{**group, "params": [*group["params"], n]}],
    }  # fmt: skip
    restored = make()
    restored.load_state_dict({"model": state["model"], "optimizer": old})
    assert restored.optimizer.state_dict()["param_groups"][0]["params"] == group["params"]
    for i in group["params"]:
        for key, value in optimizer["state"][i].items():
            torch.testing.assert_close(restored.optimizer.state_dict()["state"][i][key], value)
    bad = {**old, "param_groups": [{**group, "params": [*group["params"], n, n + 1]}]}
    with pytest.raises(ValueError, match="the optimizer state has"):
        make().load_state_dict({"model": state["model"], "optimizer": bad})
