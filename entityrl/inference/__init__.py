"""A light runtime for exported agents: numpy and onnxruntime, no torch, no training code.

``policy = load("agent.onnx")`` and ``policy.act(observation)`` returns the actions an
environment takes (entities named by their ids). A policy with memory carries each episode's
state from one call to the next, and one trained on stacked observations each episode's
history: ``policy.reset()`` (or ``new_episode=True``) when an episode starts. ``entityrl export RUN_DIR`` writes the model; :func:`load` also takes a run directory
or checkpoint directly when torch is installed. See docs/deploy.md.
"""

from __future__ import annotations

from pathlib import Path

from entityrl.inference.runtime import Decision, OnnxPolicy, PolicyFileError


def load(
    path: str | Path,
    *,
    deterministic: bool = False,
    seed: int | None = None,
    threads: int = 1,
    check: bool = True,
) -> OnnxPolicy:
    """The policy of an exported model (``.onnx``), or of a run directory or checkpoint file
    (exported in memory; needs torch and the ``export`` extra).

    ``deterministic``: take every actor's most probable action instead of sampling; ``seed``:
    the sampling generator's seed (None: from the operating system); ``threads``: onnxruntime's
    threads (one decision of a small network is fastest on one); ``check``: validate each
    observation against the spaces first (an error names the field at fault).
    """
    file = Path(path)
    if not file.exists():
        raise PolicyFileError(f"{file}: no such file or directory")
    model: Path | bytes = file
    if file.is_dir() or file.suffix == ".pt":
        try:
            from entityrl.export import export_bytes
            from entityrl.training.agent import load_agent
        except ImportError as err:  # the torch-free entityrl-runtime, or no export extra
            raise PolicyFileError(
                f"{file}: a run directory or checkpoint is exported on the fly, which needs "
                f"entityrl with torch and the export extra ({err}); here, load the model that "
                "`entityrl export` wrote (agent.onnx)"
            ) from None

        model = export_bytes(load_agent(file))
    return OnnxPolicy(model, deterministic=deterministic, seed=seed, threads=threads, check=check)


__all__ = ["Decision", "OnnxPolicy", "PolicyFileError", "load"]
