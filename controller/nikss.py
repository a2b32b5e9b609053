"""NIKSS, the control plane of PSA-eBPF pipelines, from Python.

NIKSS (Osinski et al., "NIKSS: a Fast and Extensible Software Switch", CoNEXT
2022) loads the BPF object p4c-ebpf makes from a PSA program, pins its maps
under ``/sys/fs/bpf/pipeline<ID>/`` and attaches it to ports; its C library,
libnikss, reads and writes those maps with the program's own names (tables,
registers, counters, meters, digests).

Two ways in, each where it fits:

* the pipeline's life (load, attach a port, detach it, unload) runs
  ``nikss-ctl`` once per step (:class:`PipelineProcess`): rare, logged, and it
  can run in another network namespace (``nsenter --net``: ``ip netns exec``
  would mount another ``/sys`` and hide the pins);
* everything at run time (table entries, register and counter reads, meter
  rates, digests) calls libnikss in this process through ctypes
  (:class:`Pipeline`): a table write is a few map operations, not a process.

libnikss's structures are opaque to its users (its C API says their contents
may change); each is given a zeroed buffer of :data:`OPAQUE_BYTES`, several
times the largest of them in this NIKSS (536 bytes), and the library's own
``*_init`` functions fill it. Values cross the API as the library wants them:
plain binary in host byte order (little-endian here), as ``nikss-ctl`` passes
them.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

BPF_FS = Path("/sys/fs/bpf")
OPAQUE_BYTES = 2048
INVALID_ACTION_ID = 0xFFFFFFFF
FIELD_TYPE_DATA = 1           # nikss_struct_field_type_t: NIKSS_STRUCT_FIELD_TYPE_DATA
EXACT, LPM, TERNARY = 0, 1, 2  # enum nikss_matchkind_t


class NikssError(RuntimeError):
    """A NIKSS call failed; `errno` is the POSIX error it returned."""

    def __init__(self, err: int, what: str) -> None:
        super().__init__(f"{what}: {os.strerror(err) if err > 0 else f'error {err}'}")
        self.errno = err


def nikss_missing() -> Optional[str]:
    """Why NIKSS cannot be used here, or None."""
    if shutil.which("nikss-ctl") is None:
        return "nikss-ctl not on PATH (scripts/p4-toolchain.sh: P4_EBPF_TOOLCHAIN=... or P4_WITH_EBPF=1)"
    if _find_library() is None:
        return "libnikss.so not found (the eBPF toolchain is incomplete)"
    return None


def _find_library() -> Optional[str]:
    for cand in (os.environ.get("BWN_LIBNIKSS"), ctypes.util.find_library("nikss"), "/usr/local/lib/libnikss.so"):
        if cand and (not cand.startswith("/") or Path(cand).exists()):
            return cand
    return None


_c = ctypes.c_void_p
_i, _u32, _u64, _sz, _str, _bool = (ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t,
                                     ctypes.c_char_p, ctypes.c_bool)
# name, result, arguments (nikss.h, nikss_digest.h, nikss_pipeline.h)
_SIGNATURES: list[tuple[str, object, list]] = [
    ("nikss_context_init", None, [_c]), ("nikss_context_free", None, [_c]),
    ("nikss_context_set_pipeline", None, [_c, _u32]),
    ("nikss_pipeline_exists", _bool, [_c]),
    ("nikss_table_entry_ctx_init", None, [_c]), ("nikss_table_entry_ctx_free", None, [_c]),
    ("nikss_table_entry_ctx_tblname", _i, [_c, _c, _str]),
    ("nikss_table_entry_init", None, [_c]), ("nikss_table_entry_free", None, [_c]),
    ("nikss_matchkey_init", None, [_c]), ("nikss_matchkey_free", None, [_c]),
    ("nikss_matchkey_type", None, [_c, _i]),
    ("nikss_matchkey_data", _i, [_c, _str, _sz]),
    ("nikss_matchkey_prefix_len", _i, [_c, _u32]),
    ("nikss_matchkey_mask", _i, [_c, _str, _sz]),
    ("nikss_table_entry_matchkey", _i, [_c, _c]),
    ("nikss_action_init", None, [_c]), ("nikss_action_free", None, [_c]),
    ("nikss_action_set_id", None, [_c, _u32]),
    ("nikss_table_get_action_id_by_name", _u32, [_c, _str]),
    ("nikss_action_param_create", _i, [_c, _str, _sz]),
    ("nikss_action_param_free", None, [_c]),
    ("nikss_action_param", _i, [_c, _c]),
    ("nikss_table_entry_action", None, [_c, _c]),
    ("nikss_table_entry_priority", None, [_c, _u32]),
    ("nikss_table_entry_add", _i, [_c, _c]),
    ("nikss_table_entry_update", _i, [_c, _c]),
    ("nikss_table_entry_del", _i, [_c, _c]),
    ("nikss_table_entry_set_default_entry", _i, [_c, _c]),
    ("nikss_register_ctx_init", None, [_c]), ("nikss_register_ctx_free", None, [_c]),
    ("nikss_register_ctx_name", _i, [_c, _c, _str]),
    ("nikss_register_entry_init", None, [_c]), ("nikss_register_entry_free", None, [_c]),
    ("nikss_register_entry_set_key", _i, [_c, _str, _sz]),
    ("nikss_register_entry_set_value", _i, [_c, _str, _sz]),
    ("nikss_register_get", _i, [_c, _c]),
    ("nikss_register_set", _i, [_c, _c]),
    ("nikss_register_get_next_value_field", _c, [_c, _c]),
    ("nikss_counter_ctx_init", None, [_c]), ("nikss_counter_ctx_free", None, [_c]),
    ("nikss_counter_ctx_name", _i, [_c, _c, _str]),
    ("nikss_counter_entry_init", None, [_c]), ("nikss_counter_entry_free", None, [_c]),
    ("nikss_counter_entry_set_key", _i, [_c, _str, _sz]),
    ("nikss_counter_get", _i, [_c, _c]),
    ("nikss_counter_reset", _i, [_c, _c]),
    ("nikss_counter_entry_get_packets", _u64, [_c]),
    ("nikss_counter_entry_get_bytes", _u64, [_c]),
    ("nikss_meter_ctx_init", None, [_c]), ("nikss_meter_ctx_free", None, [_c]),
    ("nikss_meter_ctx_name", _i, [_c, _c, _str]),
    ("nikss_meter_entry_init", None, [_c]), ("nikss_meter_entry_free", None, [_c]),
    ("nikss_meter_entry_index", _i, [_c, _str, _sz]),
    ("nikss_meter_entry_data", _i, [_c, _u64, _u64, _u64, _u64]),
    ("nikss_meter_entry_update", _i, [_c, _c]),
    ("nikss_meter_entry_reset", _i, [_c, _c]),
    ("nikss_digest_ctx_init", None, [_c]), ("nikss_digest_ctx_free", None, [_c]),
    ("nikss_digest_ctx_name", _i, [_c, _c, _str]),
    ("nikss_digest_get_next", _i, [_c, _c]),
    ("nikss_digest_free", None, [_c]),
    ("nikss_digest_get_next_field", _c, [_c, _c]),
    ("nikss_struct_get_field_type", _i, [_c]),
    ("nikss_struct_get_field_name", _str, [_c]),
    ("nikss_struct_get_field_data", _c, [_c]),
    ("nikss_struct_get_field_data_len", _sz, [_c]),
]

_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """libnikss, loaded once, with every function this module calls typed."""
    global _lib
    with _lib_lock:
        if _lib is None:
            path = _find_library()
            if path is None:
                raise NikssError(errno.ENOENT, "libnikss.so not found (scripts/p4-toolchain.sh installs it)")
            lib = ctypes.CDLL(path)
            for name, res, args in _SIGNATURES:
                fn = getattr(lib, name)
                fn.restype = res
                fn.argtypes = args
            _lib = lib
        return _lib


def _opaque() -> ctypes.Array:
    return ctypes.create_string_buffer(OPAQUE_BYTES)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise NikssError(rc, what)


def le_bytes(value: int, width_bits: Optional[int] = None) -> bytes:
    """`value` as NIKSS takes data: little-endian, in the field's bytes, or the
    fewest that hold it (at least one) when the width is not given."""
    if value < 0:
        raise ValueError(f"NIKSS data must be unsigned, got {value} (give an int32 as its two's complement)")
    n = (width_bits + 7) // 8 if width_bits else max(1, (value.bit_length() + 7) // 8)
    if value.bit_length() > n * 8:
        raise ValueError(f"{value:#x} does not fit {n} bytes")
    return value.to_bytes(n, "little")


@dataclass(frozen=True)
class Key:
    """One field of a table key: exact, LPM (value/prefix) or ternary (value &&& mask)."""

    kind: int
    value: int
    prefix_len: int = 0
    mask: int = 0

    @classmethod
    def exact(cls, value: int) -> "Key":
        return cls(EXACT, value)

    @classmethod
    def lpm(cls, value: int, prefix_len: int) -> "Key":
        return cls(LPM, value, prefix_len=prefix_len)

    @classmethod
    def ternary(cls, value: int, mask: int) -> "Key":
        return cls(TERNARY, value, mask=mask)


class Pipeline:
    """Run-time control of pipeline `pipe_id` (loaded by :class:`PipelineProcess`).

    Names are p4c-ebpf's: ``<control>_<object>`` (``BwnIngress_ipv4_lpm``,
    ``BwnIngressDeparser_port_telemetry``). Not thread-safe: one per thread."""

    def __init__(self, pipe_id: int) -> None:
        self.lib = library()
        self.pipe_id = pipe_id
        self._ctx = _opaque()
        self.lib.nikss_context_init(self._ctx)
        self.lib.nikss_context_set_pipeline(self._ctx, pipe_id)

    def exists(self) -> bool:
        return bool(self.lib.nikss_pipeline_exists(self._ctx))

    # -- tables ----------------------------------------------------------------
    def _table_write(self, mode: str, table: str, action: Optional[str], keys: Sequence[Key],
                     params: Sequence[int], priority: Optional[int]) -> None:
        lib = self.lib
        tctx, entry, act = _opaque(), _opaque(), _opaque()
        lib.nikss_table_entry_ctx_init(tctx)
        lib.nikss_table_entry_init(entry)
        lib.nikss_action_init(act)
        try:
            _check(lib.nikss_table_entry_ctx_tblname(self._ctx, tctx, table.encode()),
                   f"pipeline {self.pipe_id}: table {table}")
            if action is not None:
                action_id = lib.nikss_table_get_action_id_by_name(tctx, action.encode())
                if action_id == INVALID_ACTION_ID:
                    raise NikssError(errno.EINVAL, f"table {table} has no action {action}")
                lib.nikss_action_set_id(act, action_id)
            for key in keys:
                mk = _opaque()
                lib.nikss_matchkey_init(mk)
                try:
                    lib.nikss_matchkey_type(mk, key.kind)
                    data = le_bytes(key.value)
                    _check(lib.nikss_matchkey_data(mk, data, len(data)), f"{table}: key")
                    if key.kind == LPM:
                        _check(lib.nikss_matchkey_prefix_len(mk, key.prefix_len), f"{table}: prefix length")
                    elif key.kind == TERNARY:
                        mask = le_bytes(key.mask)
                        _check(lib.nikss_matchkey_mask(mk, mask, len(mask)), f"{table}: mask")
                    _check(lib.nikss_table_entry_matchkey(entry, mk), f"{table}: key")
                finally:
                    lib.nikss_matchkey_free(mk)
            for value in params:
                param = _opaque()
                data = le_bytes(value)
                _check(lib.nikss_action_param_create(param, data, len(data)), f"{table}: parameter")
                rc = lib.nikss_action_param(act, param)   # the action owns it from here
                if rc != 0:
                    lib.nikss_action_param_free(param)
                    raise NikssError(rc, f"{table}: parameter")
            if priority is not None:
                lib.nikss_table_entry_priority(entry, priority)
            lib.nikss_table_entry_action(entry, act)
            fn = {"add": lib.nikss_table_entry_add, "update": lib.nikss_table_entry_update,
                  "default": lib.nikss_table_entry_set_default_entry, "delete": lib.nikss_table_entry_del}[mode]
            _check(fn(tctx, entry), f"pipeline {self.pipe_id}: {mode} in {table}")
        finally:
            lib.nikss_action_free(act)
            lib.nikss_table_entry_free(entry)
            lib.nikss_table_entry_ctx_free(tctx)

    def table_add(self, table: str, action: str, keys: Sequence[Key], params: Sequence[int] = (),
                  priority: Optional[int] = None) -> None:
        self._table_write("add", table, action, keys, params, priority)

    def table_update(self, table: str, action: str, keys: Sequence[Key], params: Sequence[int] = (),
                     priority: Optional[int] = None) -> None:
        self._table_write("update", table, action, keys, params, priority)

    def table_set(self, table: str, action: str, keys: Sequence[Key], params: Sequence[int] = (),
                  priority: Optional[int] = None) -> None:
        """Add the entry, or update it when its key is there already."""
        try:
            self.table_add(table, action, keys, params, priority)
        except NikssError as exc:
            if exc.errno != errno.EEXIST:
                raise
            self.table_update(table, action, keys, params, priority)

    def table_default(self, table: str, action: str, params: Sequence[int] = ()) -> None:
        self._table_write("default", table, action, (), params, None)

    def table_delete(self, table: str, keys: Sequence[Key]) -> None:
        if not keys:
            raise ValueError("table_delete needs the entry's key (table_clear removes every entry)")
        self._table_write("delete", table, None, keys, (), None)

    def table_clear(self, table: str) -> None:
        """Remove every entry of `table` (its default action stays)."""
        self._table_write("delete", table, None, (), (), None)

    # -- registers, counters, meters --------------------------------------------
    def register_get(self, name: str, index: int) -> int:
        lib = self.lib
        rctx, entry = _opaque(), _opaque()
        lib.nikss_register_ctx_init(rctx)
        lib.nikss_register_entry_init(entry)
        try:
            _check(lib.nikss_register_ctx_name(self._ctx, rctx, name.encode()), f"register {name}")
            key = le_bytes(index, 32)
            _check(lib.nikss_register_entry_set_key(entry, key, len(key)), f"register {name}: index")
            _check(lib.nikss_register_get(rctx, entry), f"register {name}[{index}]")
            field = lib.nikss_register_get_next_value_field(rctx, entry)
            if not field:
                raise NikssError(errno.ENODATA, f"register {name}[{index}]: no value")
            size = lib.nikss_struct_get_field_data_len(field)
            return int.from_bytes(ctypes.string_at(lib.nikss_struct_get_field_data(field), size), "little")
        finally:
            lib.nikss_register_entry_free(entry)
            lib.nikss_register_ctx_free(rctx)

    def register_set(self, name: str, index: int, value: int, width_bits: int) -> None:
        lib = self.lib
        rctx, entry = _opaque(), _opaque()
        lib.nikss_register_ctx_init(rctx)
        lib.nikss_register_entry_init(entry)
        try:
            _check(lib.nikss_register_ctx_name(self._ctx, rctx, name.encode()), f"register {name}")
            key, data = le_bytes(index, 32), le_bytes(value, width_bits)
            _check(lib.nikss_register_entry_set_key(entry, key, len(key)), f"register {name}: index")
            _check(lib.nikss_register_entry_set_value(entry, data, len(data)), f"register {name}: value")
            _check(lib.nikss_register_set(rctx, entry), f"register {name}[{index}] = {value}")
        finally:
            lib.nikss_register_entry_free(entry)
            lib.nikss_register_ctx_free(rctx)

    def counter_get(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of counter `name` at `index` (0 for what it does not count)."""
        lib = self.lib
        cctx, entry = _opaque(), _opaque()
        lib.nikss_counter_ctx_init(cctx)
        lib.nikss_counter_entry_init(entry)
        try:
            _check(lib.nikss_counter_ctx_name(self._ctx, cctx, name.encode()), f"counter {name}")
            key = le_bytes(index, 32)
            _check(lib.nikss_counter_entry_set_key(entry, key, len(key)), f"counter {name}: index")
            _check(lib.nikss_counter_get(cctx, entry), f"counter {name}[{index}]")
            return int(lib.nikss_counter_entry_get_packets(entry)), int(lib.nikss_counter_entry_get_bytes(entry))
        finally:
            lib.nikss_counter_entry_free(entry)
            lib.nikss_counter_ctx_free(cctx)

    def meter_update(self, name: str, index: int, pir: int, pburst: int, cir: int, cburst: int) -> None:
        """Two-rate meter `name`[index]: rates in bytes (or packets) per second, bursts in bytes (packets)."""
        lib = self.lib
        mctx, entry = _opaque(), _opaque()
        lib.nikss_meter_ctx_init(mctx)
        lib.nikss_meter_entry_init(entry)
        try:
            _check(lib.nikss_meter_ctx_name(mctx, self._ctx, name.encode()), f"meter {name}")
            key = le_bytes(index, 32)
            _check(lib.nikss_meter_entry_index(entry, key, len(key)), f"meter {name}: index")
            _check(lib.nikss_meter_entry_data(entry, pir, pburst, cir, cburst), f"meter {name}: rates")
            _check(lib.nikss_meter_entry_update(mctx, entry), f"meter {name}[{index}]")
        finally:
            lib.nikss_meter_entry_free(entry)
            lib.nikss_meter_ctx_free(mctx)

    def meter_reset(self, name: str) -> None:
        """Every index of meter `name` back to unconfigured."""
        lib = self.lib
        mctx = _opaque()
        lib.nikss_meter_ctx_init(mctx)
        try:
            _check(lib.nikss_meter_ctx_name(mctx, self._ctx, name.encode()), f"meter {name}")
            _check(lib.nikss_meter_entry_reset(mctx, None), f"meter {name}: reset")
        finally:
            lib.nikss_meter_ctx_free(mctx)

    def digests(self, name: str) -> "DigestReader":
        return DigestReader(self, name)

    def close(self) -> None:
        if self._ctx is not None:
            self.lib.nikss_context_free(self._ctx)
            self._ctx = None  # type: ignore[assignment]

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DigestReader:
    """The digests a pipeline's deparser packed (a BPF queue map), oldest first."""

    def __init__(self, pipeline: Pipeline, name: str) -> None:
        self.lib = pipeline.lib
        self.name = name
        self._ctx = _opaque()
        self.lib.nikss_digest_ctx_init(self._ctx)
        try:
            _check(self.lib.nikss_digest_ctx_name(pipeline._ctx, self._ctx, name.encode()), f"digest {name}")
        except BaseException:
            self.lib.nikss_digest_ctx_free(self._ctx)
            raise

    def poll(self, limit: int = 10_000) -> list[dict[str, int]]:
        """Take every digest queued now (at most `limit`): field name -> value."""
        lib = self.lib
        out: list[dict[str, int]] = []
        while len(out) < limit:
            digest = _opaque()
            if lib.nikss_digest_get_next(self._ctx, digest) != 0:   # empty queue (ENOENT)
                break
            item: dict[str, int] = {}
            try:
                while True:
                    field = lib.nikss_digest_get_next_field(self._ctx, digest)
                    if not field:
                        break
                    if lib.nikss_struct_get_field_type(field) != FIELD_TYPE_DATA:
                        continue
                    size = lib.nikss_struct_get_field_data_len(field)
                    raw = ctypes.string_at(lib.nikss_struct_get_field_data(field), size)
                    item[(lib.nikss_struct_get_field_name(field) or b"").decode()] = int.from_bytes(raw, "little")
            finally:
                lib.nikss_digest_free(digest)
            out.append(item)
        return out

    def close(self) -> None:
        if self._ctx is not None:
            self.lib.nikss_digest_ctx_free(self._ctx)
            self._ctx = None  # type: ignore[assignment]


# ---- the pipeline's life: nikss-ctl ----------------------------------------------
def pinned_path(pipe_id: int) -> Path:
    """Where NIKSS pins pipeline `pipe_id`'s programs and maps."""
    return BPF_FS / f"pipeline{pipe_id}"


def ensure_bpf_fs() -> bool:
    """Mount the BPF file system at /sys/fs/bpf unless it is there; True if this mounted it."""
    if os.path.ismount(BPF_FS):
        return False
    res = subprocess.run(["mount", "-t", "bpf", "bpf", str(BPF_FS)], capture_output=True, text=True)
    if res.returncode != 0:
        raise NikssError(errno.EPERM, f"cannot mount the BPF file system at {BPF_FS}: {res.stderr.strip()}")
    return True


class PipelineProcess:
    """Load, attach, detach and unload pipeline `pipe_id` with ``nikss-ctl``.

    `netns`: the network namespace (its name under /run/netns) of the ports;
    None for this process's. Each call's output is appended to `log` if given.
    Detach each port before the unload: NIKSS leaves the port's clsact qdisc
    (and its programs) otherwise, and the next attach there fails."""

    def __init__(self, pipe_id: int, netns: Optional[str] = None, log: Optional[Path] = None) -> None:
        self.pipe_id = pipe_id
        self.netns = netns
        self.log = log

    def _run(self, *args: object, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [*(["nsenter", f"--net=/run/netns/{self.netns}"] if self.netns else []),
               "nikss-ctl", *map(str, args)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if self.log is not None:
            with open(self.log, "a") as f:
                f.write(f"$ {' '.join(cmd)} -> {res.returncode}\n")
                # libbpf (inside libnikss) names every map section it skips: noise
                f.writelines(line + "\n" for line in (res.stdout + res.stderr).splitlines()
                             if "skipping unrecognized data section" not in line
                             and "skipping relo section" not in line)
        if check and res.returncode != 0:
            tail = [ln for ln in (res.stderr + res.stdout).splitlines() if "skipping" not in ln][-3:]
            raise NikssError(res.returncode if res.returncode > 0 else errno.EIO,
                             f"nikss-ctl {' '.join(map(str, args))}: {' | '.join(tail) or 'failed'}")
        return res

    def exists(self) -> bool:
        return pinned_path(self.pipe_id).exists()

    def load(self, obj: Path) -> None:
        if not Path(obj).exists():
            raise FileNotFoundError(f"{obj}: no BPF object (run `make build-ebpf`)")
        self._run("pipeline", "load", "id", self.pipe_id, obj)

    def add_port(self, ifname: str) -> None:
        self._run("add-port", "pipe", self.pipe_id, "dev", ifname)

    def del_port(self, ifname: str, missing_ok: bool = True) -> None:
        res = self._run("del-port", "pipe", self.pipe_id, "dev", ifname, check=not missing_ok)
        if missing_ok and res.returncode != 0 and "no such interface" not in (res.stderr + res.stdout):
            raise NikssError(res.returncode, f"nikss-ctl del-port {ifname}: {res.stderr.strip()}")

    def unload(self) -> None:
        if self.exists():
            self._run("pipeline", "unload", "id", self.pipe_id)
