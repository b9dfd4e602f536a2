"""librl for Flask: an extension, and a decorator for a view's own policies.

    from flask import Flask
    from librl.http.flask import RateLimit

    app = Flask(__name__)
    limits = RateLimit(app, config="policies.yaml", url="redis://127.0.0.1:6379")

    @app.get("/search")
    @limits.policies("search")
    def search(): ...

The user of ``key: user`` is ``flask.g.user`` (a string, or an object with
``username``/``id``), else Flask-Login's ``current_user`` when it is
installed and authenticated; pass ``user=`` a function of no arguments
(called in the request context) to look elsewhere. Application factories:
``limits = RateLimit(config=...)`` then ``limits.init_app(app)``.
Resolvers in code (``resolvers=``) are called with ``flask.request``.
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
    cast,
)

import flask
from flask import Flask, Response
from werkzeug.datastructures import Headers

from . import _wsgi as wsgi
from ._guard import Admission, ConfigSource, Guard
from ._identity import user_name
from ._request import Request

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._guard import GuardOptions

F = TypeVar("F", bound=Callable[..., Any])
WSGIApp = Callable[[Dict[str, Any], Any], Iterable[bytes]]

#: Where a request's Admission waits in the WSGI environ for its release.
_ENVIRON_KEY = "librl.admission"


_UNKNOWN: Any = object()
_login_user: Any = _UNKNOWN


def _flask_login_user() -> Any:
    """Flask-Login's ``current_user``, or None when it is not installed.
    Looked up once: an import that fails is searched for again on every
    call, a walk of sys.path that cost every request without Flask-Login
    more than the rest of the middleware."""
    global _login_user
    if _login_user is _UNKNOWN:
        try:
            from flask_login import current_user
        except ImportError:
            current_user = None
        _login_user = current_user
    return _login_user


def flask_user() -> Optional[str]:
    """The default resolver: g.user, else Flask-Login's current_user."""
    user = flask.g.get("user")
    if user is not None:
        return user_name(user)
    current_user = _flask_login_user()
    return None if current_user is None else user_name(current_user)


class RateLimit:
    """The Flask extension: checks each request before its view (the
    configuration's routes, or the view's own policies), adds the headers
    and refunds after it."""

    def __init__(
        self,
        app: Optional[Flask] = None,
        *,
        config: ConfigSource,
        client: Any = None,
        user: Callable[[], Optional[str]] = flask_user,
        **options: Unpack[GuardOptions],
    ) -> None:
        # ``options``: url, cluster_nodes, on_decision, resolvers.
        self.guard = Guard(config, client, **options)
        self.user = user
        if app is not None:
            self.init_app(app)

    def override_key(
        self, policy: str, value: Union[str, bytes, None] = None, /, **subject: Union[str, bytes]
    ) -> str:
        """The override key the middleware uses for ``policy`` and a
        subject: ``limits.override_key("search", user="alice")``
        (docs/http/python.md, Keys from code)."""
        return self.guard.override_key(policy, value, **subject)

    def reload(self, config: ConfigSource) -> None:
        """Swaps the configuration (Guard.reload): requests in flight
        finish on theirs; a bad one raises ConfigError and the old stays."""
        self.guard.reload(config)

    def init_app(self, app: Flask) -> None:
        views, admit = app.view_functions, self._admit

        def before() -> Optional[Response]:
            # A plain function of no arguments: Flask asks each
            # before_request function whether it is a coroutine function on
            # every request, which costs least for one.
            return admit(views)

        app.before_request(before)
        app.wsgi_app = self._wrapping(app.wsgi_app)  # type: ignore[method-assign,assignment]
        app.extensions["librl"] = self

    def _wrapping(self, wsgi_app: WSGIApp) -> WSGIApp:
        """The app as WSGI middleware: the rate-limit headers go into the
        response's start and the refunds are sent then (before the body
        goes out), whatever made the response (the view, an error
        handler); a request's concurrency slots are released once its
        response is finished: when the server closes the response (sent,
        or the client gone), or when the app raised."""
        guard = self.guard

        def app(environ: Dict[str, Any], start_response: Any) -> Iterable[bytes]:
            def starting(status: str, headers: List[Tuple[str, str]], *exc_info: Any) -> Any:
                admission: Optional[Admission] = environ.get(_ENVIRON_KEY)
                if admission is not None and admission.reply is None:
                    extra = admission.headers
                    if extra:
                        wsgi.add_headers(headers, extra)
                    if admission.settles:
                        guard.finish(admission, int(status[:3]))
                return start_response(status, headers, *exc_info)

            try:
                body = wsgi_app(environ, starting)
            except BaseException:
                self._release(environ)
                raise
            admission: Optional[Admission] = environ.get(_ENVIRON_KEY)
            if admission is None or not admission.holds_slots:
                return body
            return wsgi.Releasing(body, lambda: guard.release(admission))

        return app

    def _release(self, environ: Dict[str, Any]) -> None:
        admission: Optional[Admission] = environ.get(_ENVIRON_KEY)
        if admission is not None:
            self.guard.release(admission)

    def policies(self, *names: str) -> Callable[[F], F]:
        """The view is checked against these policies instead of the
        configuration's routes; unknown names raise here."""
        self.guard.engine.named(names)

        def mark(view: F) -> F:
            view.librl_policies = names  # type: ignore[attr-defined]
            return view

        return mark

    def _admit(self, views: Dict[str, Any]) -> Optional[Response]:
        """The check before the view (``views``: the app's view functions,
        whose marks name their own policies)."""
        # The request itself, out of its proxy: each attribute read through
        # flask.request looks the request context up again.
        request: flask.Request = cast(Any, flask.request)._get_current_object()
        names = getattr(views.get(request.endpoint or ""), "librl_policies", None)

        def body_length(limit: int) -> Optional[int]:
            data = request.stream.read(limit + 1)
            # Put it back for the view: request.get_data() reads _cached_data.
            request._cached_data = data
            return len(data) if len(data) <= limit else None

        environ = request.environ
        # request_of(request, self.user), without its two calls on the way.
        facts = wsgi.EnvironRequest(
            environ,
            request.path,
            environ.get("PATH_INFO", "/").encode("latin-1"),
            self.user,
            request,
            g_attribute,
        )
        admission = self.guard.admit(facts, body_length, names)
        # For the response's start, and the release, after Flask's request
        # context has ended.
        environ[_ENVIRON_KEY] = admission
        reply = admission.reply
        if reply is None:
            return None
        return Refusal.of(reply.status, reply.headers, reply.body)


#: Headers whose value Werkzeug rewrites as it sends a response.
_REWRITTEN = frozenset(("location", "content-location"))


class Refusal(Response):
    """A response librl makes itself (a refusal), built and sent with less
    of Werkzeug's work: its headers are librl's own (values the
    configuration's schema has checked), so they go into the response
    without Werkzeug's check of each value, and are sent without its
    checked copy unless something after the check (an ``after_request``
    function) set a header Werkzeug would rewrite, or the status needs
    its rules. Copying and checking cost more than the rest of a refusal
    in a Flask app."""

    @classmethod
    def of(cls, status: int, headers: List[Tuple[str, str]], body: bytes) -> Refusal:
        checked = Headers()
        checked._list = list(headers)
        # The body goes in as set_data would put it, without set_data's
        # checked Headers.set of Content-Length (a scan and a value check
        # of a header librl computes itself).
        refusal = cls(None, status=status, headers=checked)
        refusal.response = [body]
        if refusal.automatically_set_content_length:
            checked._list.append(("Content-Length", str(len(body))))
        return refusal

    def get_wsgi_headers(self, environ: Dict[str, Any]) -> Headers:
        status = self.status_code
        if status < 200 or status in (204, 304):
            return super().get_wsgi_headers(environ)
        length = False
        for name, _ in self.headers:
            name = name.lower()
            if name in _REWRITTEN:
                return super().get_wsgi_headers(environ)
            length = length or name == "content-length"
        # Without a Content-Length (the body replaced by an iterable),
        # Werkzeug's rules decide whether it is computed.
        return self.headers if length else super().get_wsgi_headers(environ)


def request_of(request: flask.Request, user_of: Callable[[], Optional[str]]) -> Request:
    """The request as the contract reads it: the WSGI environ's headers,
    and its ``PATH_INFO`` (the server's once-decoded path, Latin-1 text
    per PEP 3333) back as the bytes it stands for; ``user_of`` is called
    in the request context when a policy needs the user; its attributes
    are ``flask.g``'s."""
    environ = request.environ
    path = environ.get("PATH_INFO", "/").encode("latin-1")
    return wsgi.request_of(environ, request.path, path, user_of, request, g_attribute)


def g_attribute(request: Any, name: str) -> Any:
    """A request attribute (docs/http.md, Request attributes): what the
    application's code set on ``flask.g`` for this request."""
    return flask.g.get(name)
