"""The blocking P4Runtime facade the PTF tests use (controller/p4rt.py), against a
fake finsy switch: what reaches the switch, in batches, and that the private
event loop and its thread end on close and on a failed connect."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from bwn import paths
from controller import p4rt


class FakeDigestList(list):
    def ack(self) -> str:
        return f"ack{len(self)}"


class FakeSwitch:
    instances: list["FakeSwitch"] = []
    fail_enter = False

    def __init__(self, name: str, address: str, options: Any) -> None:
        self.name, self.address, self.options = name, address, options
        self.calls: list[tuple[str, Any]] = []
        self.digests_read = asyncio.Event
        FakeSwitch.instances.append(self)

    async def __aenter__(self) -> "FakeSwitch":
        if FakeSwitch.fail_enter:
            raise ConnectionError("no switch at that address")
        self.calls.append(("enter", threading.current_thread().name))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.calls.append(("exit", None))

    async def insert(self, batch: list) -> None:
        self.calls.append(("insert", list(batch)))

    async def modify(self, batch: list) -> None:
        self.calls.append(("modify", list(batch)))

    async def delete(self, batch: list) -> None:
        self.calls.append(("delete", list(batch)))

    async def delete_all(self) -> None:
        self.calls.append(("delete_all", None))

    async def read(self, entity: Any):
        for i in range(3):
            yield (entity, i)

    async def read_digests(self, digest_id: str):
        self.calls.append(("digests", digest_id))
        yield FakeDigestList([{"stamp": 1}, {"stamp": 2}])
        yield FakeDigestList([{"stamp": 3}])
        await asyncio.sleep(3600)

    async def write(self, entities: list) -> None:
        self.calls.append(("write", list(entities)))


@pytest.fixture()
def fake_finsy(monkeypatch, tmp_path):
    FakeSwitch.instances = []
    FakeSwitch.fail_enter = False
    monkeypatch.setattr(p4rt.fy, "Switch", FakeSwitch)
    info, blob = tmp_path / "bwn.p4info.txtpb", tmp_path / "bwn.json"
    info.write_text("")
    blob.write_text("{}")
    return info, blob


def test_pipeline_files_name_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        paths.pipeline_files(tmp_path)
    assert str(err.value) == (f"compiled P4 program not found ({tmp_path / 'bwn.p4info.txtpb'}, "
                              f"{tmp_path / 'bwn.json'}): run `make build`")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"\(.*x\.p4info\.txtpb\): run"):
        paths.pipeline_files(tmp_path, "x")
    (tmp_path / "x.p4info.txtpb").write_text("")
    assert paths.pipeline_files(tmp_path, "x") == (tmp_path / "x.p4info.txtpb", tmp_path / "x.json")
    assert paths.BUILD == Path(p4rt.__file__).resolve().parents[1] / "build"


def test_sync_switch_forwards_calls_in_batches_and_closes(fake_finsy):
    info, blob = fake_finsy
    threads_before = threading.active_count()
    sw = p4rt.SyncSwitch("s1", "127.0.0.1:50001", device_id=3, p4info=info, p4blob=blob,
                         p4force=True, election_id=7)
    fake = FakeSwitch.instances[0]
    assert (fake.name, fake.address) == ("s1", "127.0.0.1:50001")
    opts = fake.options
    assert (opts.p4info, opts.p4blob, opts.p4force, opts.device_id, opts.initial_election_id) == (
        info, blob, True, 3, 7)
    assert fake.calls == [("enter", "p4rt-s1")]           # entered on the facade's own thread
    sw.insert(range(450))
    sw.modify(range(3))
    sw.delete(range(201))
    sw.delete_all()
    assert [(op, len(b) if b is not None else None) for op, b in fake.calls[1:]] == [
        ("insert", 200), ("insert", 200), ("insert", 50), ("modify", 3), ("delete", 200), ("delete", 1),
        ("delete_all", None)]
    assert fake.calls[3][1] == list(range(400, 450))
    assert sw.read("entity") == [("entity", 0), ("entity", 1), ("entity", 2)]
    collector = sw.start_digests("port_telemetry_t")
    for _ in range(100):
        if len(collector.items) == 3:
            break
        threading.Event().wait(0.02)
    assert collector.stop() == [{"stamp": 1}, {"stamp": 2}, {"stamp": 3}]
    assert ("digests", "port_telemetry_t") in fake.calls
    assert ("write", ["ack2"]) in fake.calls and ("write", ["ack1"]) in fake.calls
    with sw:
        pass                                                # __exit__ closes
    assert fake.calls[-1] == ("exit", None)
    assert sw._loop.is_closed() and not sw._thread.is_alive()
    assert threading.active_count() == threads_before


def test_a_failed_connect_ends_the_loop_and_raises(fake_finsy):
    info, blob = fake_finsy
    FakeSwitch.fail_enter = True
    threads_before = threading.active_count()
    with pytest.raises(ConnectionError, match="no switch at that address"):
        p4rt.SyncSwitch("s2", "127.0.0.1:1", p4info=info, p4blob=blob, timeout_s=5)
    assert threading.active_count() == threads_before


def test_sync_switch_finds_the_build_by_default(fake_finsy, monkeypatch):
    info, blob = fake_finsy
    monkeypatch.setattr(p4rt, "pipeline_files", lambda: (info, blob))
    sw = p4rt.SyncSwitch("s3", "127.0.0.1:2")
    assert (FakeSwitch.instances[0].options.p4info, FakeSwitch.instances[0].options.p4blob) == (info, blob)
    assert FakeSwitch.instances[0].options.device_id == 0
    assert FakeSwitch.instances[0].options.initial_election_id == 10
    sw.close()
