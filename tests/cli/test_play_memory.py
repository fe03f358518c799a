"""``entityrl play --agent`` with a policy that has memory (``net.memory``): the state of the
row is carried from one step to the next and starts afresh with every episode, in the row a
person watches and in the seats the agent plays against a person."""

from __future__ import annotations

import functools
import io
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import torch
from env.player_envs import Dropout
from rich.console import Console

from entityrl.cli.main import main
from entityrl.env.multiplayer_vec import PlayerVecEnv
from entityrl.env.vec_obs import VecObs
from entityrl.envs import make_vec
from entityrl.nn.recurrent import fresh_episodes
from entityrl.nn.rogue_net import PolicyOutput, RogueNet, RogueNetConfig
from entityrl.play.seat import OneSeat
from entityrl.play.session import play
from entityrl.ragged import RaggedArray
from entityrl.training import load_agent, train
from entityrl.training.players import Actions, NetworkPlayer

STEPS = 12  # Recall's episodes last 5 steps: two end, the third has begun


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small PPO iteration on Recall with memory: a second or two."""
    directory = tmp_path_factory.mktemp("memory_run")
    overrides = {
        "net.memory": "true",
        "net.d_model": 8,
        "net.n_head": 1,
        "rollout.num_envs": 4,
        "rollout.steps": 8,
        "ppo.seq_len": 8,
        "ppo.update_epochs": 1,
        "optim.bs": 32,
        "total_timesteps": 32,
        "log.run_dir": directory,
        "log.tensorboard": "false",
        "log.progress": "false",
        "torch_threads": 1,
    }
    train("Recall", overrides=[f"{key}={value}" for key, value in overrides.items()])
    return directory


Call = tuple[torch.Tensor | None, torch.Tensor | None, npt.NDArray[np.bool_]]


def test_the_agent_s_state_is_carried_between_steps_and_reset_at_each_episode_start(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[Call] = []  # per step: the state the network was given, the one it returned,
    # and whether the observation starts a new episode (the one before it ended)
    act = RogueNet.act

    def spy(
        net: RogueNet,
        obs: VecObs,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
        state: torch.Tensor | None = None,
    ) -> PolicyOutput:
        out = act(net, obs, deterministic, generator, state)
        calls.append((state, out.state, obs.done.copy()))
        return out

    monkeypatch.setattr(RogueNet, "act", spy)
    args = ["play", "Recall", "--agent", str(run_dir), "--steps", str(STEPS), "--delay", "0"]
    code = main([*args, "--seed", "0"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"{STEPS} steps, 2 episodes ended" in out
    assert len(calls) == STEPS

    # The same network stepped by hand, as the command seeds it: its state passed on from
    # each step to the next, zeroed where an episode ended. No state (None) is the network's
    # initial one: an agent may pass either at the first step.
    net = load_agent(run_dir).net
    generator = torch.Generator().manual_seed(0)
    env = make_vec("Recall", 1, seed=0)
    obs = env.reset()
    state = net.initial_state(1)
    assert state is not None
    given_states = []
    for step, (given, returned, starts) in enumerate(calls):
        given = state.new_zeros(state.shape) if given is None else given
        torch.testing.assert_close(given, state, msg=f"step {step}: another state was given")
        given_states.append(given)
        mine = act(net, obs, generator=generator, state=state)
        assert returned is not None and mine.state is not None
        torch.testing.assert_close(returned, mine.state)
        obs = env.act(mine.actions(obs))
        state = fresh_episodes(mine.state, obs.done)
        assert bool(starts[0]) == (step in (5, 10)), f"step {step}: episodes start at 5 and 10"
    # What the comparison covered: states carried over (not the initial zeros) within the
    # episodes, and the resets where the second and third start.
    carried = [step for step, given in enumerate(given_states) if given.abs().sum() > 0]
    assert carried == [1, 2, 3, 4, 6, 7, 8, 9, 11]


def test_a_second_game_with_the_same_agent_starts_from_a_fresh_state(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states: list[torch.Tensor | None] = []  # the state given to the network at each step
    act = RogueNet.act

    def spy(net: RogueNet, obs: VecObs, *args: object, state: torch.Tensor | None = None,
            **kwargs: object) -> PolicyOutput:  # fmt: skip
        states.append(state)
        return act(net, obs, *args, state=state, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(RogueNet, "act", spy)
    agent = load_agent(run_dir, seed=0)
    console = Console(file=io.StringIO())
    for _ in range(2):  # 3 steps each: the first game stops mid-episode, its state non-zero
        with make_vec("Recall", 1, seed=0) as env:
            play(env, agent, console, steps=3)
    assert len(states) == 6
    carried = states[2]
    assert carried is not None and carried.abs().sum() > 0
    second = states[3]
    assert second is None or second.abs().sum() == 0, "the second game began with the first's state"


class StayingRecorder(NetworkPlayer):
    """A network with memory whose players always stay, so every Dropout game lasts its limit;
    records the observations and states it acted from."""

    def __init__(self, net: RogueNet) -> None:
        super().__init__(net, torch.Generator())
        self.seen: list[tuple[VecObs, torch.Tensor]] = []

    def act(self, obs: VecObs, state: torch.Tensor | None) -> tuple[Actions, torch.Tensor | None]:
        assert state is not None
        self.seen.append((obs, state.clone()))
        _, after = super().act(obs, state)
        actors = obs.action_masks["choice"].actors.lengths
        return {"choice": RaggedArray(np.zeros((int(actors.sum()), 1), np.int64), actors)}, after


def test_the_agent_s_seats_carry_their_state_and_start_afresh_with_every_game() -> None:
    env = PlayerVecEnv(functools.partial(Dropout, limit=3), num_games=1, seed=0)
    torch.manual_seed(0)
    net = RogueNet(env.obs_space, env.action_space, RogueNetConfig(d_model=8, memory=True))
    others = StayingRecorder(net)
    seat = OneSeat(env, 0, others)
    seat.reset()
    stay = {"choice": RaggedArray(np.zeros((1, 1), np.int64), np.ones(1, np.int64))}
    for _ in range(7):  # games of 3 steps: the second starts with step 3, the third with 6
        seat.act(stay)
    assert len(others.seen) == 7
    # By hand: the other two seats from the initial state, each step's state passed on, and
    # afresh at every game's first step.
    state = net.initial_state(2)
    for step, (obs, given) in enumerate(others.seen):
        if step % 3 == 0:
            state = net.initial_state(2)
            assert torch.equal(given, torch.zeros(2, 8)), f"step {step}: a game starts afresh"
        else:
            assert given.abs().sum() > 0, f"step {step}: the state was carried over"
        torch.testing.assert_close(given, state, msg=f"step {step}: another state given")
        state = net.act(obs, state=state).state
