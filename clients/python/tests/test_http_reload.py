"""Reload (docs/http/python.md, Reload): each integration swaps its
configuration at run time; a configuration that does not validate is
refused with the start-up error and the old one stays; the example apps
reload on SIGHUP, re-reading LIBRL_POLICIES, and say so on stderr."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest
import serve

from http_servers import factories, serving
from librl.http import ConfigError
from servers import ROOT, free_port


def config(limit: int) -> Dict[str, Any]:
    return {"policies": [{"name": "p", "algorithm": "fixed", "limit": limit, "window": "60s"}]}


def get(port: int) -> Tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        response.read()
        return response.status, response.getheader("X-RateLimit-Limit") or ""
    finally:
        conn.close()


@pytest.mark.parametrize("framework", ["fastapi", "django", "flask"])
def test_reload_swaps_the_configuration_and_refuses_a_bad_one(framework: str, url: str) -> None:
    example = serve.load(framework)[0]
    app = factories()[framework](config(5), url=url)
    with serving(framework, app) as running:
        assert get(running.port) == (200, "5")
        example.reload(app, config(9))
        assert get(running.port) == (200, "9")
        with pytest.raises(ConfigError, match=r"policies\[0\]\.limit"):
            example.reload(app, config(0))
        assert get(running.port) == (200, "9")  # the old one stays


def librl_line(app: subprocess.Popen[str]) -> str:
    """The app's next line on stderr from librl (a server may log others)."""
    assert app.stderr is not None
    while True:
        line = app.stderr.readline()
        if not line or line.startswith("librl: "):
            return line


def test_the_example_app_reloads_on_sighup(tmp_path: Path, url: str) -> None:
    policies = tmp_path / "policies.json"
    policies.write_text(json.dumps(config(5)))
    port = free_port()
    env = {
        **os.environ,
        "LIBRL_POLICIES": str(policies),
        "PORT": str(port),
        "REDIS_URL": url,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "clients/python/src"), str(ROOT / "examples/python")]
        ),
    }
    app = subprocess.Popen(
        [sys.executable, str(ROOT / "examples/python/serve.py"), "flask"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                assert get(port) == (200, "5")
                break
            except OSError:
                assert time.monotonic() < deadline, "the example app did not start"
                time.sleep(0.1)
        policies.write_text(json.dumps(config(0)))
        app.send_signal(signal.SIGHUP)
        line = librl_line(app)
        assert line.startswith("librl: configuration: policies[0].limit"), line
        assert get(port) == (200, "5")
        policies.write_text(json.dumps(config(7)))
        app.send_signal(signal.SIGHUP)
        assert librl_line(app) == "librl: configuration reloaded\n"
        assert get(port) == (200, "7")
    finally:
        app.terminate()
        app.wait(timeout=10)
