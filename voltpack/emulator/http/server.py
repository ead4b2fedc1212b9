"""The aiohttp application: one catch-all route, error and fault-injection middlewares."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.typedefs import Handler

from voltpack.emulator.errors import ApiError, injected, internal
from voltpack.emulator.http.routes import STATE_KEY, error_response, handle, request_verb
from voltpack.emulator.state import EmulatorState

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        return error_response(request, error)
    except web.HTTPException:
        raise
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception as exc:
        log.exception("emulator: %s %s failed", request.method, request.path)
        return error_response(request, internal(f"{type(exc).__name__}: {exc}"))


@web.middleware
async def _faults(request: web.Request, handler: Handler) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    rule = state.faults.take(request.method, request_verb(request), request.path)
    if rule is not None:
        if rule.delay_s > 0:
            await asyncio.sleep(rule.delay_s)
        if rule.status is not None:
            raise injected(rule.status, rule.message)
    return await handler(request)


def create_app(state: EmulatorState) -> web.Application:
    """The emulator as an aiohttp application serving `state`."""
    app = web.Application(middlewares=[_errors, _faults], client_max_size=MAX_BODY_BYTES)
    app[STATE_KEY] = state

    async def on_startup(app: web.Application) -> None:
        state.start(asyncio.get_running_loop())

    async def on_shutdown(app: web.Application) -> None:
        state.stop()

    app.on_startup.append(on_startup)
    app.on_shutdown.append(on_shutdown)
    app.router.add_route("*", "/{tail:.*}", handle)
    return app
