"""The torch-free install (runtime/, the entityrl-runtime distribution): its wheel holds only
the runtime's modules, and a fresh virtual environment with it and nothing else runs an
exported agent without torch."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPI = "https://pypi.org/simple"

# What entityrl.inference imports, and so what the wheel must hold: the package's __init__ (as
# the parent of the others), entityrl.ragged, entityrl.env and entityrl.inference.
RUNTIME_SOURCES = sorted(
    [
        "entityrl/__init__.py",
        "entityrl/ragged.py",
        *(
            p.relative_to(ROOT).as_posix()
            for folder in ("env", "inference")
            for p in (ROOT / "entityrl" / folder).rglob("*.py")
        ),
    ]
)

# Run inside the light environment, from a folder without the repository's entityrl/ in it.
SCRIPT = """
import sys

try:
    import torch  # noqa: F401
except ImportError:
    pass
else:
    raise SystemExit("torch is importable in the light install")

import entityrl.inference
from entityrl.env import CategoricalActionMask, Observation
from entityrl.inference import load

assert entityrl.inference.__file__.startswith(sys.prefix), entityrl.inference.__file__
obs = Observation(
    features={"Mine": [[0, 0]], "Robot": [[1, 1], [3, 2]]},
    ids={"Robot": ["left", "right"]},
    actions={"Move": CategoricalActionMask(actor_types=["Robot"])},
)
actions = load(sys.argv[1], deterministic=True).act(obs)
assert actions["Move"].actors == ["left", "right"], actions
try:  # a run directory needs the full install: one clear error, not a missing module
    load(sys.argv[2])
except entityrl.inference.PolicyFileError as err:
    assert "needs entityrl with torch" in str(err), err
else:
    raise SystemExit("a run directory loaded without torch")
print("ok")
"""


def pip_environment() -> dict[str, str]:
    """The environment of a pip that sees PyPI alone: none of this machine's pip settings
    (a local wheel folder, a cap on versions) and no PYTHONPATH leading back to the repo."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of runtime/, built with this environment's setuptools (no download)."""
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
               "--disable-pip-version-check", str(ROOT / "runtime"), "-w", str(out)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("entityrl_runtime-*.whl")
    return built


def test_the_wheel_holds_the_runtime_modules_and_nothing_else(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    modules = sorted(n for n in names if not n.startswith("entityrl_runtime-"))
    assert modules == RUNTIME_SOURCES


def pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen(f"{PYPI}/onnxruntime/", timeout=10):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An agent of a few PPO updates on small MineSweeper boards, exported to ONNX."""
    pytest.importorskip("onnx", reason="exporting the agent needs the 'export' extra")
    import entityrl
    from entityrl.export import export_onnx
    from entityrl.training import load_agent

    run_dir = tmp_path_factory.mktemp("run")
    settings = ["env.kwargs={width: 4, height: 4, nmines: 3, orbital_cannon: true, cooldown_period: 1}",
                "rollout.num_envs=8", "rollout.steps=8", "total_timesteps=128", "net.d_model=16",
                "net.n_layer=1", "net.precision=float32", "ppo.update_epochs=1",
                f"log.run_dir={run_dir}", "log.tensorboard=false", "log.progress=false",
                "torch_threads=1"]  # fmt: skip
    entityrl.train("MineSweeper", overrides=settings)
    model = run_dir / "agent.onnx"
    export_onnx(load_agent(run_dir), model)
    return model


def test_a_fresh_environment_with_the_wheel_runs_an_agent_without_torch(
    wheel: Path, exported: Path, tmp_path: Path
) -> None:
    if not pypi_reachable():
        pytest.skip(f"installing numpy and onnxruntime needs {PYPI}, which is not reachable")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = pip_environment()
    install = [str(python), "-m", "pip", "--isolated", "install", "-q", "--index-url", PYPI,
               str(wheel)]  # fmt: skip
    done = subprocess.run(install, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=freeze"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    installed = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert {"entityrl-runtime", "numpy", "onnxruntime"} <= installed
    heavy = {n for n in installed if n in {"torch", "omegaconf", "rich"} or n.startswith("nvidia")}
    assert not heavy, f"the light install brought {sorted(heavy)}"

    # From tmp_path: run from the repository, `python -c` would import its entityrl/ instead.
    ran = subprocess.run(
        [str(python), "-c", SCRIPT, str(exported), str(exported.parent)],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "ok"
