"""Serving web/ and driving it in the system's headless Chromium (playwright's Python
package, pointed at Debian's chromium: no browser download)."""

from __future__ import annotations

import functools
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from entityrl.env import Observation

WEB = Path(__file__).resolve().parents[2] / "web"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def chromium_path() -> str | None:
    """$ENTITYRL_CHROMIUM, else chromium (or chromium-browser) on the PATH."""
    given = os.environ.get("ENTITYRL_CHROMIUM")
    if given:
        return given
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing_requirements() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if chromium_path() is None:
        return "no Chromium: apt-get install chromium (or set ENTITYRL_CHROMIUM)"
    if not (WEB / "node_modules" / "onnxruntime-web" / "dist").is_dir():
        return "web/ has no onnxruntime-web: run `npm ci` in web/"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "no playwright: pip install 'entityrl[web]'"
    return None


class _Handler(SimpleHTTPRequestHandler):
    """The page's folder at /, and the files of ``extra`` at /files/. Cross-origin isolated, so that the
    page's clock is precise enough to time single decisions."""

    extra: Path

    def translate_path(self, path: str) -> str:
        if path.startswith("/files/"):
            return str(self.extra / path.removeprefix("/files/").split("?")[0])
        return super().translate_path(path)

    def end_headers(self) -> None:
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serve(extra: Path, root: Path = WEB) -> Iterator[str]:
    """Serve ``root`` (web/, or a build of it) and ``extra`` at /files/ on a free local port;
    yields the base URL."""
    handler = type("Handler", (_Handler,), {"extra": extra})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def browser_page() -> Iterator[object]:
    """A page of a fresh headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True
        )
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            yield page
        finally:
            browser.close()


@contextmanager
def error_checked_page() -> Iterator[Any]:
    """A page of a fresh headless Chromium whose uncaught errors fail the test using it."""
    with browser_page() as page:
        errors: list[str] = []
        page.on("pageerror", lambda err: errors.append(str(err)))  # type: ignore[attr-defined]
        yield page
        assert not errors, errors


def status_after(page: Any, act: Callable[[], object]) -> str:
    """The play section's status line once ``act`` (a click, a file chosen) has set it anew:
    every action of the page ends by setting it, with its result or its error."""
    page.evaluate("() => { document.querySelector('#status').textContent = ''; }")
    act()
    page.wait_for_function("() => document.querySelector('#status').textContent !== ''")
    return page.text_content("#status")


def to_json(value: Any) -> Any:
    """Observations and actions as the page takes them: tuples and arrays become lists."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {
            k: to_json(getattr(value, k))
            for k in value.__dataclass_fields__
            if getattr(value, k) is not None
        }
    return value


def observation_json(obs: Observation) -> dict[str, Any]:
    data = to_json(obs)
    data.pop("metrics", None)
    return data


def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: $ENTITYRL_TEST_ARTIFACTS (CI keeps it), else the test's temp dir."""
    directory = Path(os.environ.get("ENTITYRL_TEST_ARTIFACTS", tmp_path))
    directory.mkdir(parents=True, exist_ok=True)
    return directory
