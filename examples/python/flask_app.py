"""The conformance app on Flask (docs/http.md, Conformance and examples):
every path and method answers ``ok`` (status from X-Conformance-Status,
after X-Conformance-Delay-Ms; X-Conformance-Fail raises), behind librl's
extension; X-Conformance-User authenticates a user the way
a Flask login hook does (``flask.g.user``), and X-Conformance-Attribute:
NAME=VALUE sets ``flask.g.NAME`` as the hook would. Served by waitress.

    LIBRL_POLICIES=policies.yaml PORT=8080 python serve.py flask
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from conformance_resolvers import RESOLVERS
from flask import Flask, Response, g, request
from werkzeug.routing import Rule

from librl.http.flask import RateLimit

if TYPE_CHECKING:
    from serve import AppOptions
    from typing_extensions import Unpack


def make_app(config: Any, **options: Unpack[AppOptions]) -> Flask:
    app = Flask(__name__)

    # Registered before the extension, so it runs first: the user is known
    # when librl checks.
    @app.before_request
    def authenticate() -> None:
        name = request.headers.get("X-Conformance-User")
        # WSGI hands header values as Latin-1 text; the name is UTF-8.
        g.user = name.encode("latin-1").decode("utf-8", "replace") if name else None
        given = request.headers.get("X-Conformance-Attribute")
        if given:
            attribute, _, value = given.encode("latin-1").decode("utf-8", "replace").partition("=")
            setattr(g, attribute, value)

    RateLimit(app, config=config, resolvers=RESOLVERS, **options)

    def ok(path: str) -> Response:
        status = int(request.headers.get("X-Conformance-Status", "200"))
        time.sleep(int(request.headers.get("X-Conformance-Delay-Ms", "0")) / 1000)
        if request.headers.get("X-Conformance-Fail"):
            raise RuntimeError("X-Conformance-Fail: the view fails")  # Flask answers 500
        return Response("ok", status=status, content_type="text/plain; charset=utf-8")

    # Werkzeug's own rules, whose methods=None serves every method
    # (M-SEARCH, PROPFIND...); Flask's route() lists them.
    app.url_map.add(Rule("/", defaults={"path": ""}, endpoint="ok"))
    app.url_map.add(Rule("/<path:path>", endpoint="ok"))
    app.view_functions["ok"] = ok
    return app


def reload(app: Flask, config: Any) -> None:
    """serve.py's SIGHUP: the configuration swapped (ConfigError: kept)."""
    app.extensions["librl"].reload(config)
