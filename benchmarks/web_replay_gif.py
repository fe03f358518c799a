"""An animated GIF of the browser page replaying recorded episodes, as a user sees it: episodes
of an environment recorded from Python (a random policy; the page has no rules for most
environments, and needs none to replay them), loaded in the page's replay viewer, one frame
per step of its generic entity view (the step line, the board and the legend).

    python benchmarks/web_replay_gif.py [--env TreasureHunt] [--steps 40] [--out docs/images/web-replay.gif]

Needs what tests/web needs (Chromium, ``npm ci`` in web/, playwright) and Pillow.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "web"))

from browser import browser_page, missing_requirements, serve  # noqa: E402

from entityrl.env import RandomPolicy  # noqa: E402
from entityrl.envs import make_vec  # noqa: E402
from entityrl.export.replay import RecordingEnv  # noqa: E402
from entityrl.training import evaluate  # noqa: E402

FRAME_MS = 300
# The part of the page a frame shows: the step line, the board and the legend.
REGION = """() => {
    const box = (s) => document.querySelector(s).getBoundingClientRect();
    const [controls, where, board, legend] = ['#replay .controls', '#replay-where', '#replay-board', '#replay-legend'].map(box);
    const right = Math.max(where.right, board.right) + 8;
    return { x: controls.left, y: controls.top, width: right - controls.left, height: legend.bottom - controls.top };
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="TreasureHunt")
    parser.add_argument("--episodes", type=int, default=6, help="episodes recorded")
    parser.add_argument("--steps", type=int, default=40, help="frames: the first steps recorded")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "web-replay.gif")
    args = parser.parse_args()
    missing = missing_requirements()
    if missing:
        sys.exit(missing)
    with tempfile.TemporaryDirectory() as tmp:
        recording = Path(tmp) / "episodes.jsonl"
        env = make_vec(args.env, 1, seed=0)
        with recording.open("w") as out:
            recorder = RecordingEnv(env, out, {"id": args.env, "kwargs": {}})
            evaluate(RandomPolicy(env.action_space, seed=0), recorder, episodes=args.episodes)
        with serve(Path(tmp)) as url, browser_page() as page:
            page.goto(f"{url}/index.html")
            page.wait_for_selector("body[data-ready=true]")
            page.set_input_files("#replay-file", str(recording))
            page.wait_for_selector("#replay-details tr")
            steps = min(args.steps, page.evaluate("() => window.entityrl.replay.steps.length"))
            clip = page.evaluate(REGION)
            frames = []
            for step in range(steps):
                page.evaluate("(i) => window.entityrl.replay.show(i)", step)
                frames.append(
                    Image.open(io.BytesIO(page.screenshot(clip=clip, full_page=True))).convert(
                        "RGB"
                    )
                )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    frames[0].save(args.out, save_all=True, append_images=frames[1:], duration=FRAME_MS, loop=0)
    print(f"{args.out}: {len(frames)} frames of {args.env}, {args.out.stat().st_size / 1e3:.0f} KB")


if __name__ == "__main__":
    main()
