"""``entityrl play``: scripted sessions of a person, a watched random agent, argument errors."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from entityrl.cli.main import main
from entityrl.env import (
    Action,
    Entity,
    Environment,
    GlobalCategoricalAction,
    GlobalCategoricalActionMask,
    GlobalCategoricalActionSpace,
    Observation,
    ObsSpace,
    SerialVecEnv,
)
from entityrl.envs import names
from entityrl.play import HumanPlayer, make_console, play
from entityrl.training import train

# The subprocess tests run the command from the checkout, installed or not.
REPO = Path(__file__).resolve().parents[2]

# One row of cells: +y and -y are always masked; the cannon is ready at once. Entity indices:
# Mine #0, Mine #1, Robot #2, Orbital Cannon #3. Seed 4 puts the robot between the two mines.
LINE_WORLD = [
    "MineSweeper",
    "--seed",
    "4",
    "--kwargs",
    '{"width": 4, "height": 1, "nmines": 2, "nrobots": 1, "orbital_cannon": true, "cooldown_period": 0}',
]


def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], typed: str
) -> tuple[int, str, str]:
    """Run ``entityrl play ...`` with ``typed`` as the person's keystrokes."""
    # The layout and colour assertions assume rich's defaults for a pipe.
    for name in ("COLUMNS", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(typed))
    code = main(["play", *args])
    out, err = capsys.readouterr()
    return code, out, err


def prompt_block(out: str, header: str) -> str:
    """The lines that list the options under the first prompt header starting with ``header``."""
    start = out.index(header)
    end = out.index("choice (", start)
    return out[start:end]


# ------------------------------------------------------------------ a person plays MineSweeper
def test_tables_show_every_entity_type_with_its_features_and_values(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, ["MineSweeper", "--seed", "3"], "q\n")
    assert code == 0
    for title in ("Mine (5)", "Robot (2)"):
        assert title in out
    header = next(line for line in out.splitlines() if "Mine (5)" in line)
    assert "Robot (2)" in header  # types side by side while they fit
    columns = out.splitlines()[out.splitlines().index(header) + 1].split()
    assert columns == ["#", "x", "y", "#", "x", "y"]
    assert "no entities of type: Orbital Cannon" in out
    # The environment's own picture comes first: a 6x6 grid of cells.
    assert re.search(r"^[.*R]{6}$", out, flags=re.MULTILINE)


def test_masked_choices_are_not_offered_and_illegal_input_reprompts(monkeypatch, capsys):
    typed = "2\nfoo\n4\nq\n"  # +y is masked on a one-cell-high grid
    code, out, _ = run_cli(monkeypatch, capsys, LINE_WORLD, typed)
    assert code == 0
    offered = prompt_block(out, "Move: Robot #2")
    assert "Defuse Mines" in offered
    assert "+y" not in offered and "-y" not in offered
    assert "'2' is not a legal choice: type one of" in out
    assert "'foo' is not a legal choice" in out
    allowed = re.search(r"'2' is not a legal choice: type one of ([\d, ]+),", out).group(1)
    assert "4" in allowed.split(", ") and "2" not in allowed.split(", ")
    # After the valid 4 the next prompt (the cannon) came, and q ended the game before a step.
    assert "Fire Orbital Cannon: Orbital Cannon #3" in out
    assert out.rstrip().endswith("0 steps, 0 episodes ended")


def test_select_entity_lists_legal_actees_and_an_episode_end_is_reported(monkeypatch, capsys):
    # Defuse both mines, and fire the cannon at the only robot: the episode ends at once.
    typed = "4\n2\nq\n"
    code, out, _ = run_cli(monkeypatch, capsys, LINE_WORLD, typed)
    assert code == 0
    offered = prompt_block(out, "Fire Orbital Cannon")
    assert re.search(r"^\s+0  Mine #0 \(x=\d y=0\)$", offered, flags=re.MULTILINE)
    assert re.search(r"^\s+2  Robot #2 \(x=\d y=0\)$", offered, flags=re.MULTILINE)
    assert "Orbital Cannon #3 (" not in offered.split("\n", 1)[1]  # not a candidate
    assert re.search(r"Fire Orbital Cannon: Orbital Cannon #3 \(cooldown=0\) -> Robot #2", out)
    assert "reward 1\nepisode over: return 1, length 1. A new episode starts." in out
    assert "1 step, 1 episode ended" in out


def test_enter_picks_a_random_legal_choice(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, LINE_WORLD, "\n" * 6)
    assert code == 0
    moves = re.findall(r"Move: Robot #\d \(x=\d y=0\) -> (.+)", out)
    assert moves  # at least one step was taken before the input ran out
    assert set(moves) <= {"+x", "-x", "Defuse Mines"}


@pytest.mark.parametrize("typed", ["q\n", ""], ids=["q", "end of input"])
def test_quitting_is_clean(monkeypatch, capsys, typed):
    code, out, err = run_cli(monkeypatch, capsys, ["MineSweeper", "--seed", "0"], typed)
    assert code == 0
    assert err == ""
    assert "quit" in out and "0 steps" in out


# ------------------------------------------------------------------ global actions, hidden entities
class Guess(Environment):
    """Guess low or high every other step; a hidden secret, global features, no picture."""

    # "[high]" would be markup to rich: it must still be printed literally.
    CHOICES = ("low", "mid", "[high]")

    def obs_space(self) -> ObsSpace:
        return ObsSpace(
            entities={"Card": Entity(["value"]), "Secret": Entity(["value"])},
            global_features=["round"],
        )

    def action_space(self) -> dict[str, GlobalCategoricalActionSpace]:
        return {"Guess": GlobalCategoricalActionSpace(self.CHOICES)}

    def reset(self) -> Observation:
        self.round = 0
        return self.observe(0.0)

    def act(self, actions: Mapping[str, Action]) -> Observation:
        guess = actions.get("Guess")
        reward = (
            1.0 if isinstance(guess, GlobalCategoricalAction) and guess.label == "[high]" else 0
        )
        self.round += 1
        return self.observe(reward)

    def observe(self, reward: float) -> Observation:
        # "mid" is never legal; on odd rounds nobody acts.
        actions = (
            {} if self.round % 2 else {"Guess": GlobalCategoricalActionMask([True, False, True])}
        )
        return Observation(
            features={"Card": [[7.5]], "Secret": [[42]]},
            visible={"Secret": [False]},
            global_features=[self.round],
            actions=actions,
            reward=reward,
            done=self.round == 3,
        )


def play_guess(typed: str) -> str:
    out = io.StringIO()
    console = make_console(out)
    env = SerialVecEnv(Guess, 1, seed=0, validate=True)
    player = HumanPlayer(console, env.obs_space, env.action_space, stdin=io.StringIO(typed))
    play(env, player, console)
    return out.getvalue()


def test_global_action_offers_legal_choices_and_hidden_entities_are_marked():
    out = play_guess("1\n2\n\nq\n")
    # Card and Secret side by side; only Secret, which has a hidden entity, gets the column.
    assert re.search(r"^\s*#\s+value\s+#\s+value\s+hidden\s*$", out, flags=re.MULTILINE)
    assert re.search(r"^\s*0\s+7\.5\s+1\s+42\s+hidden\s*$", out, flags=re.MULTILINE)
    assert "global features: round=0" in out
    offered = prompt_block(out, "Guess: global")
    assert "low" in offered and "[high]" in offered
    assert "mid" not in offered
    assert "'1' is not a legal choice: type one of 0, 2," in out
    assert "Guess: global -> [high]" in out
    assert "reward 1" in out


def test_a_step_where_nobody_acts_waits_for_the_person():
    out = play_guess("2\n\nq\n")  # Enter at the wait takes the empty step
    assert "nobody acts this step" in out
    assert "global features: round=2" in out
    assert out.rstrip().endswith("2 steps, 0 episodes ended")
    out = play_guess("2\nq\n")  # q at the wait quits before it
    assert "global features: round=2" not in out
    assert out.rstrip().endswith("1 step, 0 episodes ended")


def test_episode_end_reports_return_and_length():
    out = play_guess("2\n\n0\n")
    assert "episode over: return 1, length 3. A new episode starts." in out
    assert "global features: round=0" in out.split("episode over")[1]


# ------------------------------------------------------------------ watching an agent
# In a multi-player game the random agent plays the first seat, random moves the others.
@pytest.mark.parametrize("env_name", names())
def test_random_agent_plays_every_registered_environment(monkeypatch, capsys, env_name):
    args = [env_name, "--random-agent", "--steps", "12", "--delay", "0", "--seed", "0"]
    code, out, err = run_cli(monkeypatch, capsys, args, typed="")
    assert code == 0, err
    assert "step 11" in out
    assert re.search(r"12 steps, \d+ episodes? ended", out)


def test_command_runs_without_a_terminal():
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    result = subprocess.run(
        [sys.executable, "-m", "entityrl.cli.main", "play", "MineSweeper", "--random-agent",
         "--steps", "3", "--delay", "0", "--seed", "1"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False, cwd=REPO, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Move: Robot #" in result.stdout and "3 steps" in result.stdout
    assert "\x1b[" not in result.stdout  # no colour codes in a pipe


# ------------------------------------------------------------------ argument errors
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["MineSweper"], "unknown environment 'MineSweper'. Did you mean MineSweeper"),
        (["MineSweeper", "--kwargs", "{width: 4}"], "--kwargs is not valid JSON"),
        (["MineSweeper", "--kwargs", "[4]"], "--kwargs must be a JSON object"),
        (["MineSweeper", "--kwargs", '{"widht": 4}'], "unknown argument 'widht'; accepted: width"),
        (["MineSweeper", "--kwargs", '{"width": 1}'], "cannot hold 5 mines and 2 robots"),
        (["MineSweeper", "--seat", "0"], "--seat: MineSweeper is not a multi-player game"),
        (["CoinDuel", "--seat", "7"], "--seat: unknown player '7'; CoinDuel's players: ['0', '1']"),
    ],
    ids=[
        "unknown env",
        "bad json",
        "not an object",
        "unknown kwarg",
        "bad value",
        "seat in a one-player env",
        "unknown seat",
    ],
)
def test_bad_arguments_exit_2_with_one_clear_line(monkeypatch, capsys, args, message):
    code, out, err = run_cli(monkeypatch, capsys, args, typed="")
    assert code == 2
    assert out == ""
    assert err.startswith("entityrl play: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_errors_print_no_traceback_from_the_installed_command():
    result = subprocess.run(
        [sys.executable, "-m", "entityrl.cli.main", "play", "MineSweeper", "--kwargs", "{"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--kwargs is not valid JSON" in result.stderr


# ------------------------------------------------------------------ multi-player games
def test_a_person_plays_one_seat_against_random_moves(monkeypatch, capsys):
    # Seat 1 of RockPaperScissorsDuel: paper (1) twice, then quit.
    args = ["RockPaperScissorsDuel", "--seat", "1", "--seed", "0"]
    code, out, err = run_cli(monkeypatch, capsys, args, typed="1\n1\nq\n")
    assert code == 0, err
    assert out.count("throw: Player #0 -> paper") == 2
    assert re.search(r"2 steps, 2 episodes ended, mean return -?\d", out)


def test_an_agent_trained_on_stacked_observations_plays(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "stacked"
    overrides = ["env.stack=2", "rollout.num_envs=4", "rollout.steps=8", "total_timesteps=32",
                 "net.d_model=8", "net.n_head=1", "optim.bs=32", "torch_threads=1",
                 "log.tensorboard=false", "log.progress=false", f"log.run_dir={run_dir}"]  # fmt: skip
    train("MoveToOrigin", overrides=overrides)
    args = ["MoveToOrigin", "--agent", str(run_dir), "--steps", "3", "--delay", "0"]
    code, out, err = run_cli(monkeypatch, capsys, args, "")
    assert code == 0, err
    assert out.count("step ") >= 3
