"""The conformance app on Django (docs/http.md, Conformance and examples),
in one file: every path and method answers ``ok`` (status from
X-Conformance-Status, after X-Conformance-Delay-Ms; X-Conformance-Fail
raises), behind librl's middleware configured by
``settings.LIBRL``; X-Conformance-User authenticates a user the way an
authentication middleware does (``request.user``), and
X-Conformance-Attribute: NAME=VALUE sets ``request.NAME`` as such a
middleware would. Served by waitress.

    LIBRL_POLICIES=policies.yaml PORT=8080 python serve.py django
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import django
from conformance_resolvers import RESOLVERS
from django.conf import settings
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse
from django.urls import re_path

import librl.http.django

if TYPE_CHECKING:
    from serve import AppOptions
    from typing_extensions import Unpack


class ConformanceUser:
    is_authenticated = True

    def __init__(self, name: str) -> None:
        self.name = name

    def get_username(self) -> str:
        return self.name


class Anonymous:
    is_authenticated = False


def authentication(get_response: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Stands in for django.contrib.auth's AuthenticationMiddleware."""

    def middleware(request: Any) -> Any:
        name = request.headers.get("X-Conformance-User")
        if name:
            # WSGI hands header values as Latin-1 text; the name is UTF-8.
            name = name.encode("latin-1").decode("utf-8", "replace")
        request.user = ConformanceUser(name) if name else Anonymous()
        given = request.headers.get("X-Conformance-Attribute")
        if given:
            attribute, _, value = given.encode("latin-1").decode("utf-8", "replace").partition("=")
            setattr(request, attribute, value)
        return get_response(request)

    return middleware


def ok(request: HttpRequest, path: str = "") -> HttpResponse:
    status = int(request.headers.get("X-Conformance-Status", "200"))
    time.sleep(int(request.headers.get("X-Conformance-Delay-Ms", "0")) / 1000)
    if request.headers.get("X-Conformance-Fail"):
        raise RuntimeError("X-Conformance-Fail: the view fails")  # Django answers 500
    return HttpResponse("ok", status=status, content_type="text/plain; charset=utf-8")


urlpatterns = [re_path(r"^(?P<path>.*)$", ok)]


def make_app(config: Any, **options: Unpack[AppOptions]) -> WSGIHandler:
    """A WSGI application with librl's middleware on ``config``. Django's
    settings are per process: each call replaces settings.LIBRL."""
    if not settings.configured:
        settings.configure(
            DEBUG=False,
            SECRET_KEY="librl-conformance",
            ALLOWED_HOSTS=["*"],
            ROOT_URLCONF=__name__,
            INSTALLED_APPS=[],
            MIDDLEWARE=[f"{__name__}.authentication", "librl.http.django.RateLimitMiddleware"],
            LOGGING_CONFIG=None,
        )
        django.setup()
    settings.LIBRL = {"config": config, "resolvers": RESOLVERS, **options}
    return WSGIHandler()  # builds the middleware: a bad configuration fails here


def reload(app: WSGIHandler, config: Any) -> None:
    """serve.py's SIGHUP: the configuration swapped (ConfigError: kept)."""
    librl.http.django.reload(config)
