"""The handler a worker runs, found by its path: `package.module:callable`."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import traceback
from collections.abc import Callable

from ems.exceptions import HandlerImportFailed, HandlerNotFound, InvalidHandler

Handler = Callable[..., object]


def load_handler(path: str) -> Handler:
    """The callable at `package.module:name` (or `:object.attribute`), imported as
    `python -m` would from the current directory. HandlerNotFound for a malformed path, a
    missing module or attribute; HandlerImportFailed when the module raised while being
    imported (the message names the exception and where it was raised); InvalidHandler
    for what is not callable."""
    module_name, attribute = _split(path)
    module = _import(module_name, path)
    found: object = module
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise HandlerNotFound(
                f"handler {path!r}: module {module_name!r} has no attribute {attribute!r}"
            ) from None
    if not callable(found):
        raise InvalidHandler(
            f"handler {path!r} is a {type(found).__name__}, not a function or other callable"
        )
    return found


def is_async(handler: Handler) -> bool:
    """An `async def` function (or an object whose __call__ is one)."""
    call = getattr(handler, "__call__", None)  # noqa: B004 - the method itself is inspected
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def _split(path: str) -> tuple[str, str]:
    module_name, sep, attribute = path.partition(":")
    names = [*module_name.split("."), *attribute.split(".")]
    if not sep or not all(name.isidentifier() for name in names):
        raise HandlerNotFound(
            f"a handler path is package.module:function (e.g. myapp.handlers:store_reading), "
            f"not {path[:200]!r}"
        )
    return module_name, attribute


def _import(module_name: str, path: str) -> object:
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # the `ems` script runs without it
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise HandlerNotFound(
                f"handler {path!r}: no module named {missing!r} (looked for in the current "
                "directory and sys.path)"
            ) from None
        raise HandlerImportFailed(_failure(module_name, path, exc)) from exc
    except Exception as exc:  # the module's own code failed: the user's to fix, said clearly
        raise HandlerImportFailed(_failure(module_name, path, exc)) from exc


def _failure(module_name: str, path: str, exc: Exception) -> str:
    where = ""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f" (at {exc.filename}:{exc.lineno})"
    else:
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            where = f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return f"handler {path!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}{where}"
