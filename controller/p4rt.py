"""A blocking facade over one finsy P4Runtime connection.

The controller itself is asyncio (controller/switchctl.py); this facade serves
synchronous callers: the PTF tests (PTF runs plain unittest methods) and small
scripts. It runs a private event loop in a daemon thread and forwards calls to
a ``finsy.Switch`` entered as an async context manager (connect, arbitrate as
primary, push the pipeline).
"""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Coroutine, Iterable, TypeVar

import finsy as fy

from bwn.paths import pipeline_files
from controller.entries import chunks

T = TypeVar("T")


class SyncSwitch:
    """One P4Runtime session to a switch, with blocking methods."""

    def __init__(self, name: str, address: str, *, device_id: int = 0,
                 p4info: Path | None = None, p4blob: Path | None = None,
                 p4force: bool = False, election_id: int = 10, timeout_s: float = 30.0) -> None:
        if p4info is None or p4blob is None:
            p4info, p4blob = pipeline_files()
        self.name = name
        self.address = address
        self._timeout_s = timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"p4rt-{name}", daemon=True)
        self._thread.start()
        options = fy.SwitchOptions(p4info=p4info, p4blob=p4blob, p4force=p4force,
                                   device_id=device_id, initial_election_id=election_id)
        self.switch = fy.Switch(name, address, options)
        try:
            self._call(self.switch.__aenter__())
        except BaseException:
            self._stop_loop()
            raise

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self._timeout_s)

    # -- writes ------------------------------------------------------------------
    def insert(self, entities: Iterable) -> None:
        for batch in chunks(entities):
            self._call(self.switch.insert(batch))

    def modify(self, entities: Iterable) -> None:
        for batch in chunks(entities):
            self._call(self.switch.modify(batch))

    def delete(self, entities: Iterable) -> None:
        for batch in chunks(entities):
            self._call(self.switch.delete(batch))

    def delete_all(self) -> None:
        """Remove every table entry (and reset what finsy resets: default actions, groups)."""
        self._call(self.switch.delete_all())

    # -- reads -------------------------------------------------------------------
    def read(self, entity: Any) -> list:
        async def collect() -> list:
            return [e async for e in self.switch.read(entity)]
        return self._call(collect())

    def start_digests(self, digest_id: str) -> "DigestCollector":
        """Collect every `digest_id` digest from now until `.stop()` (each list acked)."""
        return DigestCollector(self, digest_id)

    # -- lifetime ----------------------------------------------------------------
    def close(self) -> None:
        try:
            self._call(self.switch.__aexit__(None, None, None))
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        async def cancel_pending() -> None:  # e.g. gRPC call bookkeeping: end it quietly
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_pending(), self._loop).result(5)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> "SyncSwitch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DigestCollector:
    """Digest items received in the background on a SyncSwitch's session."""

    def __init__(self, sw: SyncSwitch, digest_id: str) -> None:
        self.items: list = []
        self._sw = sw

        async def reader() -> None:
            async for digest_list in sw.switch.read_digests(digest_id):
                self.items.extend(digest_list)
                await sw.switch.write([digest_list.ack()])

        self._future = asyncio.run_coroutine_threadsafe(reader(), sw._loop)

    def stop(self) -> list:
        self._future.cancel()
        return self.items
