"""Serves one of the conformance apps (docs/http.md, Conformance and
examples) until killed, as scripts/serve-example runs them: NAME_app.py's
app on HOST:PORT (default 127.0.0.1:8080), with the configuration file
named by LIBRL_POLICIES, read again on SIGHUP; uvicorn serves the ASGI
app (FastAPI), waitress the WSGI ones (Django, Flask).

    LIBRL_POLICIES=policies.yaml PORT=8080 python serve.py fastapi   # or django, flask
    python serve.py --check NAME    # exits 1 when a package NAME needs is missing
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from types import ModuleType
from typing import Any, List, Optional, Tuple, TypedDict

from librl.http import ConfigError, Hook


class AppOptions(TypedDict, total=False):
    """What each app's ``make_app(config, **options)`` takes besides the
    configuration, and hands to librl's integration as it is."""

    url: Optional[str]
    cluster_nodes: Optional[str]
    on_decision: Optional[Hook]


#: Each app's server.
SERVERS = {"fastapi": "uvicorn", "django": "waitress", "flask": "waitress"}


def load(name: str) -> Tuple[ModuleType, ModuleType]:
    """NAME_app and its server's module (ImportError when one is missing)."""
    importlib.import_module("yaml")  # the configuration files are YAML
    return importlib.import_module(f"{name}_app"), importlib.import_module(SERVERS[name])


def serve(name: str) -> None:
    example, server = load(name)
    app = example.make_app(os.environ["LIBRL_POLICIES"])

    def reload(signum: int, frame: Any) -> None:
        # SIGHUP: LIBRL_POLICIES read again (docs/http/python.md, Reload);
        # one line on stderr says how it went.
        try:
            example.reload(app, os.environ["LIBRL_POLICIES"])
        except ConfigError as e:
            print(e, file=sys.stderr, flush=True)
        else:
            print("librl: configuration reloaded", file=sys.stderr, flush=True)

    signal.signal(signal.SIGHUP, reload)
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8080"))
    # librl reads X-Forwarded-For itself, from its trusted_proxies only: the
    # server passes it on untouched.
    if server.__name__ == "uvicorn":
        server.run(app, host=host, port=port, proxy_headers=False)
    else:
        server.serve(app, host=host, port=port, clear_untrusted_proxy_headers=False)


def main(args: List[str]) -> None:
    check = args[:1] == ["--check"]
    names = args[1:] if check else args
    if len(names) != 1 or names[0] not in SERVERS:
        sys.exit(f"usage: python serve.py [--check] NAME   (NAME: {', '.join(SERVERS)})")
    if not check:
        serve(names[0])
        return
    try:
        load(names[0])
    except ImportError as e:
        sys.exit(f"serve.py {names[0]}: {e}")


if __name__ == "__main__":
    main(sys.argv[1:])
