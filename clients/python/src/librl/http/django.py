"""librl for Django: a middleware configured in settings, and a decorator
for a view's own policies.

    # settings.py
    MIDDLEWARE = [
        ...,
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "librl.http.django.RateLimitMiddleware",
    ]
    LIBRL = {"config": BASE_DIR / "policies.yaml", "url": "redis://127.0.0.1:6379"}

    # views.py
    from librl.http.django import rate_limit

    @rate_limit("search")
    def search(request): ...

A view whose authentication lives in a decorator (an API key checked
before the view runs) checks after it with ``check``, put under that
decorator; the middleware leaves such a view alone:

    from librl.http.django import check

    @api_key_required          # the application's 401 first
    @check("search")
    def search(request): ...

``LIBRL`` keys: ``config`` (a file path or a dict, required), ``url`` or
``cluster_nodes`` (else $REDIS_URL / $REDIS_CLUSTER_NODES), ``client`` (a
redis.Redis or RedisCluster instead), ``on_decision`` (the decision hook:
a callable or its dotted path), ``user`` (a function of the request
returning the user's name, or its dotted path) and ``resolvers``
(resolvers in code, called with the HttpRequest: ``{"cost": {"elements":
fn}, "limit": {...}, "mode": {...}}``, each a callable or a dotted path;
or a module's dotted path, ``"views"``, whose function ``elements`` is
``code:elements``). The default user is
``request.user`` when authenticated (``get_username()``), so the
middleware goes after AuthenticationMiddleware.
"""

from __future__ import annotations

import functools
import importlib
import io
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar, Union

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.utils.module_loading import import_string

from . import _wsgi as wsgi
from ._guard import Admission, Guard
from ._identity import user_name
from ._refusals import Reply
from ._request import Request

F = TypeVar("F", bound=Callable[..., Any])


def rate_limit(*names: str) -> Callable[[F], F]:
    """The view is checked against these policies instead of the
    configuration's routes (the middleware does the check; names are
    checked when the middleware starts)."""

    def mark(view: F) -> F:
        view.librl_policies = names  # type: ignore[attr-defined]
        return view

    return mark


def request_user(request: Any) -> Optional[str]:
    """The default resolver: Django's authenticated request.user."""
    return user_name_of(getattr(request, "user", None))


def user_name_of(user: Any) -> Optional[str]:
    if user is None or getattr(user, "is_authenticated", False) is not True:
        return None
    get = getattr(user, "get_username", None)
    return str(get()) if callable(get) else user_name(user)


def _setting(options: Dict[str, Any], name: str) -> Any:
    value = options.get(name)
    return import_string(value) if isinstance(value, str) else value


def _resolvers(value: Any) -> Any:
    """LIBRL's ``resolvers``: the mapping, or its dotted path, each
    resolver a callable or its dotted path; or a module, or its dotted
    path, whose function ``<name>`` is the resolver ``code:<name>``."""
    if isinstance(value, str):
        value = _module_or_object(value)
    if not isinstance(value, dict):
        return value
    return {
        kind: {name: import_string(fn) if isinstance(fn, str) else fn for name, fn in named.items()}
        for kind, named in value.items()
    }


def _module_or_object(path: str) -> Any:
    """The module ``path`` names, else the object its last part names in
    the module before it (``views`` or ``views.RESOLVERS``)."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if path != missing and not path.startswith(missing + "."):
            raise  # the module exists, and an import inside it failed
    try:
        return import_string(path)
    except ImportError as e:
        raise ImproperlyConfigured(
            f"librl: settings.LIBRL['resolvers']: {path!r} is neither a module nor a dotted path "
            f"to a mapping of resolvers ({e})"
        ) from None


def reply_response(reply: Reply) -> HttpResponse:
    response = HttpResponse(reply.body, status=reply.status)
    set_headers(response, reply.headers)
    return response


def set_headers(response: Any, headers: List[Tuple[str, str]]) -> None:
    """``response[name] = value`` for each header, as Django stores it:
    its ResponseHeaders keep ``(name, value)`` under the lower-case name,
    after a check that costs more than the rest of a request's header
    work; a header it would pass unchanged (ASCII, on one line: the
    rate-limit headers always) is stored directly, any other goes
    through ``response[name]``, which encodes or refuses it."""
    store = getattr(response.headers, "_store", None)
    if type(store) is not dict:  # not the ResponseHeaders this was written for
        for name, value in headers:
            response[name] = value
        return
    for name, value in headers:
        line = name + value
        if line.isascii() and "\n" not in line and "\r" not in line:
            store[name.lower()] = (name, value)
        else:
            response[name] = value


class _Checker:
    """settings.LIBRL's guard and user resolver, and the steps of a check
    that the middleware and the in-view decorator share."""

    def __init__(self) -> None:
        options = getattr(settings, "LIBRL", None)
        if not isinstance(options, dict) or "config" not in options:
            raise ImproperlyConfigured(
                "librl: settings.LIBRL must be a dict with 'config' (a policy file path or "
                "dict), e.g. LIBRL = {'config': BASE_DIR / 'policies.yaml'}"
            )
        config = options["config"]
        self.guard = Guard(
            config if isinstance(config, dict) else str(config),
            options.get("client"),
            url=options.get("url"),
            cluster_nodes=options.get("cluster_nodes"),
            on_decision=_setting(options, "on_decision"),
            resolvers=_resolvers(options.get("resolvers")),
        )
        self.user: Callable[[Any], Optional[str]] = _setting(options, "user") or request_user
        #: The policy names already found in the configuration.
        self._checked: Set[Tuple[str, ...]] = set()

    def admit(self, request: Any, names: Optional[Tuple[str, ...]]) -> Admission:
        if names is not None and names not in self._checked:
            self.guard.engine.named(names)  # a name not in the configuration raises
            self._checked.add(names)

        def body_length(limit: int) -> Optional[int]:
            # Read once and keep it for the view (request.body caches it).
            stream = request.META.get("wsgi.input")
            data = stream.read(limit + 1) if stream is not None else b""
            request._stream = io.BytesIO(data)  # the view reads it again
            request._read_started = False
            return len(data) if len(data) <= limit else None

        user = self.user
        return self.guard.admit(request_of(request, lambda: user(request)), body_length, names)

    def answered(self, admission: Admission, response: Any) -> None:
        """The view answered: its headers, the refunds, and the request's
        concurrency slots released when the response is finished (Django's
        server, WSGI or ASGI, closes it once it was sent, or when the
        client went away)."""
        if admission.reply is not None:
            return
        set_headers(response, admission.headers)
        if admission.settles:
            self.guard.finish(admission, response.status_code)
        if admission.holds_slots:
            close, guard = response.close, self.guard

            def closing() -> None:
                try:
                    close()
                finally:
                    guard.release(admission)

            response.close = closing


#: The checker of the running middleware, which check() uses (else its own).
_shared: Optional[_Checker] = None


def _checker() -> _Checker:
    global _shared
    if _shared is None:
        _shared = _Checker()
    return _shared


def check(*names: str) -> Callable[[F], F]:
    """Checks the request inside the view, where this decorator stands
    among the view's decorators: under the application's authentication
    decorator, the check runs after it, so a request it refuses (an
    unknown API key: 401) is never counted nor answered 429. ``names``:
    the view's own policies; none: the configuration's route for the
    request. The middleware leaves such a view to it; the decorators above
    it must keep the view's attributes (``functools.wraps``, as Django's
    and Django REST framework's do)."""

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def checked(request: Any, *args: Any, **kwargs: Any) -> Any:
            checker = _checker()
            admission = checker.admit(request, names or None)
            if admission.reply is not None:
                return reply_response(admission.reply)
            try:
                response = view(request, *args, **kwargs)
            except BaseException:
                checker.guard.release(admission)
                raise
            checker.answered(admission, response)
            return response

        checked.librl_in_view = True  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]

    return decorate


def override_key(
    policy: str, value: Union[str, bytes, None] = None, /, **subject: Union[str, bytes]
) -> str:
    """The override key the middleware uses for ``policy`` and a subject,
    from settings.LIBRL: ``override_key("search", user="alice")``
    (docs/http/python.md, Keys from code)."""
    return _checker().guard.override_key(policy, value, **subject)


def reload(config: Any = None) -> None:
    """Swaps the configuration of the running middleware (and of check()):
    ``config``, else settings.LIBRL's ``config`` read again; requests in
    flight finish on theirs; a bad one raises ConfigError and the old one
    stays."""
    if config is None:
        config = settings.LIBRL["config"]
    _checker().guard.reload(config if isinstance(config, dict) else str(config))


class RateLimitMiddleware:
    """Checks each request after URL resolution (process_view, so a view's
    @rate_limit is known), adds the headers and refunds after the view;
    a view decorated with check() checks itself."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        global _shared
        self.get_response = get_response
        self.checker = _shared = _Checker()
        self.guard = self.checker.guard

    def __call__(self, request: Any) -> Any:
        try:
            response = self.get_response(request)
        except BaseException:
            admission: Optional[Admission] = getattr(request, "_librl", None)
            if admission is not None:
                self.guard.release(admission)
            raise
        admitted: Optional[Admission] = getattr(request, "_librl", None)
        if admitted is not None:
            self.checker.answered(admitted, response)
        return response

    def process_view(
        self, request: Any, view: Any, args: List[Any], kwargs: Dict[str, Any]
    ) -> Optional[HttpResponse]:
        if getattr(view, "librl_in_view", False):
            return None
        admission = self.checker.admit(request, getattr(view, "librl_policies", None))
        request._librl = admission
        return reply_response(admission.reply) if admission.reply is not None else None


def request_of(request: Any, user_of: Callable[[], Optional[str]]) -> Request:
    """The request as the contract reads it: its headers from META (the
    WSGI environ), and ``path_info``, which Django decoded as UTF-8
    (re-escaping bytes that are not), as UTF-8 bytes; ``user_of`` finds
    the user when a policy needs it (reading ``request.user`` may cost a
    session lookup); its attributes are the HttpRequest's own."""
    path = request.path_info
    return wsgi.request_of(request.META, path, path.encode(), user_of, request, request_attribute)


def request_attribute(request: Any, name: str) -> Any:
    """A request attribute (docs/http.md, Request attributes): one the
    application's code set on the HttpRequest (``request.project``)."""
    return getattr(request, name, None)
