"""The P4Runtime controller's asyncio loop in a thread of its own, so Mininet stays blocking."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine, Optional, TypeVar

from controller.switchctl import BwnController

T = TypeVar("T")


class ControllerThread:
    """The asyncio controller in a thread of its own, so Mininet stays blocking."""

    def __init__(self, controller: BwnController) -> None:
        self.controller = controller
        self.ready = threading.Event()
        self.error: Optional[BaseException] = None
        self._loop = asyncio.new_event_loop()
        self._task: Optional[asyncio.Task] = None
        self._thread = threading.Thread(target=self._main, name="controller", daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        ready = asyncio.Event()

        async def main() -> None:
            waiter = asyncio.create_task(ready.wait())
            self._task = asyncio.create_task(self.controller.run(ready=ready))
            await asyncio.wait([waiter, self._task], return_when=asyncio.FIRST_COMPLETED)
            if ready.is_set():
                self.ready.set()
            await self._task

        try:
            self._loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # reported to the runner
            self.error = exc
        finally:
            self.ready.set()

    def start(self, timeout_s: float = 60.0) -> None:
        self._thread.start()
        if not self.ready.wait(timeout_s):
            raise TimeoutError("the controller could not configure every switch in time")
        if self.error is not None:
            raise RuntimeError(f"controller failed: {self.error}") from self.error

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 15.0) -> T:
        """Run `coro` (e.g. `controller.set_link_rate(...)`) on the controller's loop,
        from another thread, and return its result or raise its exception."""
        if not self._loop.is_running():
            coro.close()
            raise RuntimeError("the controller is not running" +
                               (f" (it failed: {self.error})" if self.error is not None else ""))
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the controller did not answer within {timeout_s:.0f} s") from None

    def stop(self) -> None:
        if self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(timeout=10)
