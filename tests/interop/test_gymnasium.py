"""Gymnasium <-> entityrl adapters: the space rule, truncation, vector envs, the reverse wrapper."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium import spaces  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from entityrl.env import GlobalContinuousActionSpace, SerialVecEnv  # noqa: E402
from entityrl.envs import make, make_vec  # noqa: E402
from entityrl.envs.multi_armed_bandit import MultiArmedBandit  # noqa: E402
from entityrl.envs.multi_snake import MultiSnake  # noqa: E402
from entityrl.envs.treasure_hunt import TreasureHunt  # noqa: E402
from entityrl.interop.gym_spaces import (  # noqa: E402
    ActionRule,
    ObservationRule,
    UnsupportedSpaceError,
)
from entityrl.interop.gymnasium import (  # noqa: E402
    EntityGymnasiumEnv,
    GymnasiumEnvironment,
    GymnasiumVecEnv,
)
from entityrl.ragged import RaggedArray  # noqa: E402
from entityrl.training.config import load_config  # noqa: E402

MIXED = spaces.Dict(
    {
        "pos": spaces.Box(-1, 1, (2,)),
        "kind": spaces.Discrete(3, start=1),
        "dice": spaces.MultiDiscrete([2, 3]),
        "flags": spaces.Tuple((spaces.MultiBinary(2),)),
        "units": spaces.Box(0, 9, (4, 2)),
        "units_present": spaces.MultiBinary(4),
        "mission": spaces.Text(10),
    }
)
MIXED_OBS = {
    "pos": np.array([0.5, -0.5], np.float32),
    "kind": 2,
    "dice": np.array([1, 2]),
    "flags": (np.array([1, 0], np.int8),),
    "units": np.arange(8, dtype=np.float32).reshape(4, 2),
    "units_present": np.array([1, 0, 1, 0], np.int8),
    "mission": "go",
}


def test_rule_reads_leaves_into_global_features_and_entity_keys_into_entities() -> None:
    rule = ObservationRule(MIXED, entities={"units": "units_present"}, ignore=["mission"])
    # Keys in the Dict's (sorted) order.
    assert rule.obs_space.global_features == (
        "dice[0]=0", "dice[0]=1", "dice[1]=0", "dice[1]=1", "dice[1]=2",
        "flags.0[0]", "flags.0[1]", "kind=1", "kind=2", "kind=3", "pos[0]", "pos[1]",
    )  # fmt: skip
    assert rule.obs_space.entities["units"].features == ("units[0]", "units[1]")
    np.testing.assert_array_equal(
        rule.global_features(MIXED_OBS, 1)[0], [0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 0.5, -0.5]
    )
    units = rule.entities(MIXED_OBS, 1)["units"]
    np.testing.assert_array_equal(units.data, [[0, 1], [4, 5]])


def test_rule_refuses_what_it_cannot_express_naming_the_space() -> None:
    with pytest.raises(UnsupportedSpaceError, match=r"'mission': Text spaces .*ignore="):
        ObservationRule(MIXED, entities={"units": "units_present"})
    with pytest.raises(UnsupportedSpaceError, match=r"'nope' does not exist"):
        ObservationRule(MIXED, entities={"nope": None})
    with pytest.raises(UnsupportedSpaceError, match=r"entity set must be a Box of shape"):
        ObservationRule(MIXED, entities={"pos": None}, ignore=["mission"])
    with pytest.raises(UnsupportedSpaceError, match=r"a Box action needs finite bounds"):
        ActionRule(spaces.Box(-np.inf, 1, (2,)))
    with pytest.raises(UnsupportedSpaceError, match=r"MultiBinary actions cannot be expressed"):
        ActionRule(spaces.MultiBinary(3))


def test_multi_discrete_actions_become_one_global_action_per_component() -> None:
    rule = ActionRule(spaces.MultiDiscrete([[2, 3]], start=[[1, 0]]))
    assert list(rule.action_space) == ["action[0]", "action[1]"]
    assert rule.action_space["action[0]"].choices == ("1", "2")
    np.testing.assert_array_equal(rule.decode(np.array([[1, 2]])), [[[2, 2]]])


def test_box_actions_become_one_global_continuous_action_clipped_to_the_box() -> None:
    rule = ActionRule(spaces.Box(np.array([[-1, 0]]), np.array([[1, 5]]), dtype=np.float64))
    (space,) = rule.action_space.values()
    assert isinstance(space, GlobalContinuousActionSpace)
    assert space.dims == ("action[0]", "action[1]") and space.high == (1.0, 5.0)
    decoded = rule.decode(np.array([[2.0, 3.0]], np.float32))
    assert decoded.dtype == np.float64
    np.testing.assert_array_equal(decoded, [[[1.0, 3.0]]])


def test_pendulum_single_and_vector_envs_take_the_same_continuous_actions() -> None:
    vector = gymnasium.make_vec(
        "Pendulum-v1",
        2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    batched = GymnasiumVecEnv(vector, seed=3)
    single = SerialVecEnv(lambda: GymnasiumEnvironment("Pendulum-v1"), 2, seed=3, validate=True)
    a, b = batched.reset(), single.reset()
    rng = np.random.default_rng(0)
    for _ in range(5):
        np.testing.assert_allclose(a.global_features, b.global_features, rtol=1e-6)
        torque = rng.uniform(-4, 4, (2, 1)).astype(np.float32)  # beyond the bounds: clipped
        action = {"action": RaggedArray(torque, np.ones(2, np.int64))}
        a, b = batched.act(action), single.act(action)
        np.testing.assert_allclose(a.reward, b.reward, rtol=1e-6)


def test_cartpole_validates_and_reports_truncation_with_the_final_observation() -> None:
    env = SerialVecEnv(
        lambda: GymnasiumEnvironment("CartPole-v1", max_episode_steps=4), 3, seed=0, validate=True
    )
    obs = env.reset()
    assert env.obs_space.global_features == ("obs[0]", "obs[1]", "obs[2]", "obs[3]")
    right = {"action": RaggedArray(np.ones((3, 1), np.int64), np.ones(3, np.int64))}
    for _ in range(4):
        before = obs
        obs = env.act(right)
    assert obs.done.all() and obs.truncated is not None and obs.truncated.all()
    assert obs.final is not None
    # The final observation moved on from the one before it; the row itself shows a new episode.
    assert not np.allclose(obs.final.global_features, before.global_features)
    assert np.abs(obs.global_features).max() <= 0.05  # CartPole's reset range


def test_vector_env_plays_the_same_episodes_as_single_envs() -> None:
    vector = gymnasium.make_vec(
        "CartPole-v1",
        3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    batched = GymnasiumVecEnv(vector, seed=5)
    single = make_vec("gymnasium:CartPole-v1", 3, seed=5)
    a, b = batched.reset(), single.reset()
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(40):
        np.testing.assert_allclose(a.global_features, b.global_features)
        np.testing.assert_array_equal(a.done, b.done)
        choice = rng.integers(0, 2, (3, 1))
        action = {"action": RaggedArray(choice, np.ones(3, np.int64))}
        a, b = batched.act(action), single.act(action)
        ended += int(b.done.sum())
    assert ended, "some episodes ended"


def test_vector_env_must_reset_in_the_same_step() -> None:
    with pytest.raises(ValueError, match="autoreset_mode SAME_STEP"):
        GymnasiumVecEnv(gymnasium.make_vec("CartPole-v1", 2, vectorization_mode="sync"))


def test_registry_names_gymnasium_ids_and_suggests_close_ones() -> None:
    assert isinstance(make("gymnasium:CartPole-v1"), GymnasiumEnvironment)
    with pytest.raises(KeyError, match="Did you mean CartPole-v1"):
        make("gymnasium:CartPole-v2")
    config = load_config("gymnasium:CartPole-v1")
    assert config.env.id == "gymnasium:CartPole-v1"
    assert config.target_return is not None  # the shipped config


@pytest.mark.parametrize(
    ("make_env", "limits"),
    [
        (TreasureHunt, 16),
        (lambda: MultiSnake(num_snakes=2), {"SnakeHead": 2, "SnakeBody": 40, "Food": 4}),
    ],
)
def test_entityrl_env_is_a_valid_gymnasium_env(make_env, limits) -> None:  # type: ignore[no-untyped-def]
    env = EntityGymnasiumEnv(make_env(), limits)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=1)
    for _ in range(30):
        obs, _reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            obs, _ = env.reset()


def test_entities_hidden_from_the_policy_stay_hidden_through_the_adapter() -> None:
    # RockPaperScissors hides the opponent's throw from the policy unless it cheats.
    from entityrl.envs.rock_paper_scissors import RockPaperScissors

    hidden = EntityGymnasiumEnv(RockPaperScissors(), 1)
    shown = EntityGymnasiumEnv(RockPaperScissors(cheat=True), 1)
    for seed in range(3):
        obs, _ = hidden.reset(seed=seed)
        assert not obs["Opponent"].any() and not obs["Opponent_mask"].any()
        obs, _ = shown.reset(seed=seed)
        assert obs["Opponent"].sum() == 1 and obs["Opponent_mask"].tolist() == [1]


def test_reverse_wrapper_refuses_continuous_actions_and_too_many_entities() -> None:
    with pytest.raises(UnsupportedSpaceError, match="ContinuousActionSpace has no Gymnasium"):
        EntityGymnasiumEnv(make("ContinuousMoveToOrigin"), 4)
    env = EntityGymnasiumEnv(TreasureHunt(), 1)
    with pytest.raises(ValueError, match="more than max_entities=1"):
        env.reset(seed=0)


def test_stable_baselines3_trains_on_an_entityrl_env() -> None:
    sb3 = pytest.importorskip("stable_baselines3")
    env = EntityGymnasiumEnv(TreasureHunt(), 16)
    model = sb3.PPO("MultiInputPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0)
    model.learn(total_timesteps=128)
    action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
    assert env.action_space.contains(np.asarray(action).item())


def test_stable_baselines3_learns_an_entityrl_env() -> None:
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    env = Monitor(EntityGymnasiumEnv(MultiArmedBandit(num_steps=4), max_entities={}))
    model = sb3.PPO("MultiInputPolicy", env, n_steps=128, batch_size=64, seed=0, device="cpu")
    model.learn(total_timesteps=2048)
    returns, _ = evaluate_policy(model, env, n_eval_episodes=8, return_episode_rewards=True)
    # Arm A pays 1/4 a step; random play returns 0.2, always A 1.0.
    assert np.mean(returns) == pytest.approx(1.0)


class _Succeeds(gymnasium.Env):  # type: ignore[type-arg]
    """Three-step episodes whose last info says whether action 1 was taken throughout."""

    observation_space = spaces.Box(0, 1, (1,))
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        super().reset(seed=seed)
        self.t, self.ones = 0, 0
        return np.zeros(1, np.float32), {"is_success": False}

    def step(self, action):  # type: ignore[no-untyped-def]
        self.t += 1
        self.ones += int(action)
        info = {"is_success": self.ones == 3, "distance": 3.0 - self.ones, "label": "x",
                "trace": np.zeros(2), "episode_return": 99.0}  # fmt: skip
        return np.zeros(1, np.float32), 1.0, self.t == 3, False, info


def test_numeric_scalars_of_the_last_info_become_episode_metrics() -> None:
    vec = SerialVecEnv(lambda: GymnasiumEnvironment(_Succeeds()), 2, seed=0)
    vec.reset()
    ones = {"action": RaggedArray(np.array([[1], [1]]), np.array([1, 1]))}
    for _ in range(3):
        obs = vec.act(ones)
    assert obs.metrics["is_success"].tolist() == [1.0, 1.0]
    assert obs.metrics["distance"].tolist() == [0.0, 0.0]
    assert obs.metrics["episode_return"].tolist() == [3.0, 3.0]  # entityrl's own, not info's
    assert not {"label", "trace"} & set(obs.metrics)


def test_a_vector_environment_reports_final_info_of_the_episodes_that_ended() -> None:
    vector = gymnasium.vector.SyncVectorEnv(
        [_Succeeds, _Succeeds], autoreset_mode=AutoresetMode.SAME_STEP
    )
    env = GymnasiumVecEnv(vector, seed=0)
    env.reset()
    mixed = {"action": RaggedArray(np.array([[1], [0]]), np.array([1, 1]))}
    for _ in range(3):
        obs = env.act(mixed)
    assert obs.metrics["is_success"].tolist() == [1.0, 0.0]
    assert obs.metrics["distance"].tolist() == [0.0, 3.0]
    assert obs.metrics["episode_return"].tolist() == [3.0, 3.0]


def test_a_minigrid_id_under_gymnasium_points_to_minigrid() -> None:
    with pytest.raises(KeyError, match="minigrid:MiniGrid-DoorKey-5x5-v0"):
        make("gymnasium:MiniGrid-DoorKey-5x5-v0")


def test_several_actions_are_one_multidiscrete_with_masks_for_maskable_trainers() -> None:
    env = gymnasium.make("entityrl/MoveToOrigin-v0", max_entities=2)
    wrapper = env.unwrapped
    assert isinstance(wrapper, EntityGymnasiumEnv)
    # Two categorical actions of 5 choices, taken by each of the 2 entity slots.
    assert env.action_space == spaces.MultiDiscrete([5] * 4)
    env.reset(seed=0)
    masks = wrapper.action_masks()
    assert masks.shape == (20,) and masks.dtype == np.bool_
    # Every component keeps a legal choice; a slot that does not act may take only its first.
    assert masks.reshape(4, 5).any(axis=1).all()
    _, _, _, _, _ = env.step(env.action_space.sample())
    with pytest.raises(ValueError, match="expected an action of 4 components"):
        wrapper.step(np.zeros(3, np.int64))


def test_built_in_environments_are_registered_with_gymnasium() -> None:
    ids = [i for i in gymnasium.registry if i.startswith("entityrl/")]
    assert {"entityrl/TreasureHunt-v0", "entityrl/Survival-v0", "entityrl/MoveToOrigin-v0"} <= set(
        ids
    )
    assert not any("CoinDuel" in i for i in ids)  # multi-player games are not
    env = gymnasium.make("entityrl/MultiArmedBandit-v0", num_steps=4)
    assert env.action_space == spaces.Discrete(5)  # one global action (5 arms): a Discrete
    with pytest.raises(ValueError, match="max_entities is needed"):
        gymnasium.make("entityrl/TreasureHunt-v0")


def test_a_fresh_interpreter_makes_them_by_module_prefix_without_an_import() -> None:
    # Gymnasium imports the module before the colon: no `import entityrl.interop.gymnasium`.
    code = (
        "import gymnasium, sys\n"
        "assert 'entityrl.interop.gymnasium' not in sys.modules\n"
        "env = gymnasium.make('entityrl.interop.gymnasium:entityrl/MoveToOrigin-v0', max_entities=2)\n"
        "print(env.action_space)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "MultiDiscrete([5 5 5 5])"


def test_bounds_are_declared_and_enforced() -> None:
    env = EntityGymnasiumEnv(TreasureHunt(), 16, bounds={"global": (-1.0, 1.0)})
    assert env.observation_space["global"].low.min() == -1.0
    assert np.isinf(env.observation_space[next(iter(env.layout.entity_types))].high).all()
    tight = EntityGymnasiumEnv(TreasureHunt(), 16, bounds=(0.0, 0.0))
    with pytest.raises(ValueError, match="outside the bounds"):
        for seed in range(5):
            tight.reset(seed=seed)
            tight.step(0)
    with pytest.raises(ValueError, match="bounds for unknown feature groups"):
        EntityGymnasiumEnv(TreasureHunt(), 16, bounds={"Nope": (0.0, 1.0)})


@pytest.mark.parametrize("trainer", ["PPO", "MaskablePPO"])
def test_sb3_trains_on_an_environment_of_several_actions(trainer: str) -> None:
    if trainer == "PPO":
        algorithm = pytest.importorskip("stable_baselines3").PPO
    else:
        algorithm = pytest.importorskip("sb3_contrib").MaskablePPO
    env = gymnasium.make("entityrl/MoveToOrigin-v0", max_entities=2)
    model = algorithm("MultiInputPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0,
                      device="cpu")  # fmt: skip
    model.learn(total_timesteps=256)
    assert model.num_timesteps == 256
    action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
    assert env.action_space.contains(np.asarray(action))
