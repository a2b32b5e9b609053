"""bwn-send / bwn-recv argument handling, the algorithm registry, the wire codec
of the transport header and the flow log (no network)."""
from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys
from typing import Literal, Optional

import pytest

from hosts import recv
from hosts import send
from hosts.cc import registry
from hosts.cc.base import CongestionControl
from hosts.flowlog import SENDER_FIELDS, TimeSeriesLog, percentile, rtt_stats_ms
from hosts.transport.wire import (
    F_ACK,
    F_DATA,
    HEADERS_LEN,
    TransportHeader,
    feedback_from_echo,
    pack_ack_headers,
    pack_data_headers,
)
from bwn.protocol.wire import KIND_ACK, BwnHeader

PY = sys.executable


# -- wire ---------------------------------------------------------------------------------
def test_data_headers_carry_a_fresh_forward_section() -> None:
    buf = bytearray(HEADERS_LEN)
    pack_data_headers(buf, F_DATA, 0xDEADBEEF, 2**40 + 5, 2**32 + 7)
    assert bytes(buf[:24]) == BwnHeader().pack()
    h = TransportHeader.unpack(bytes(buf))
    assert (h.flags, h.flow_id, h.seq, h.ts_val_us, h.hdr_words) == (F_DATA, 0xDEADBEEF,
                                                                     2**40 + 5, 7, 9)


def test_ack_headers_echo_like_with_echo_of() -> None:
    fwd = BwnHeader().stamped(ebn_code=98, narrow_kbps=10_000, tight_kbps=-3)
    buf = bytearray(HEADERS_LEN)
    pack_ack_headers(buf, F_ACK, 1, 12345, 65536, 99, 77,
                     (fwd.hop_count, fwd.ebn_code, fwd.narrow_kbps, fwd.tight_kbps))
    assert bytes(buf[:24]) == BwnHeader(kind=KIND_ACK).with_echo_of(fwd).pack()
    pack_ack_headers(buf, F_ACK, 1, 0, 0, 0, 0, None)
    assert bytes(buf[:24]) == BwnHeader(kind=KIND_ACK).pack()
    h = TransportHeader(flags=F_ACK, flow_id=3, ack=9, rwnd_bytes=5, ts_val_us=1, ts_ecr_us=2)
    assert TransportHeader.unpack(b"\0" * 24 + h.pack()) == h


def test_feedback_conversion() -> None:
    assert feedback_from_echo(0, 1, 2, 3, 4) is None
    fb = feedback_from_echo(1, 0, 255, 0xFFFFFFFF, 0x7FFFFFFF)
    assert fb is not None and (fb.hop_count, fb.ebn_code, fb.narrow_kbps, fb.tight_kbps) == (
        0, None, None, None)


def test_scapy_layer_dissects_a_transport_packet() -> None:
    from scapy.layers.inet import IP, UDP
    from bwn.protocol.scapy_layer import BWN

    buf = bytearray(HEADERS_LEN + 4)
    pack_data_headers(buf, F_DATA, 1, 0, 0)
    pkt = IP(bytes(IP(dst="10.0.0.2") / UDP(sport=40000, dport=16983) / bytes(buf)))
    assert pkt[BWN].kind == 0 and pkt[BWN].ebn_code == 255


# -- registry ------------------------------------------------------------------------------
def test_registry_loads_newreno_and_reno() -> None:
    assert registry.load("newreno").name == "newreno"
    assert registry.load("reno").recovery_style == "reno"
    with pytest.raises(registry.RegistryError, match="unknown algorithm"):
        registry.load("cubic")


def test_registry_missing_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "ALGORITHMS", registry.ALGORITHMS + ("notyet",))
    with pytest.raises(registry.RegistryError, match="not available yet"):
        registry.load("notyet")
    assert "unavailable" in registry.describe("notyet")
    assert registry.available()["notyet"] is not None


def test_params_are_typed_by_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:

    class Toy(CongestionControl):
        """Toy algorithm."""
        name = "toy"

        def __init__(self, beta1: float = 1.0, n: int = 2, flag: bool = False,
                     variant: Literal["a", "b"] = "a", rate_g_bps: Optional[float] = None,
                     label: str = "x") -> None:
            self.kw = dict(beta1=beta1, n=n, flag=flag, variant=variant,
                           rate_g_bps=rate_g_bps, label=label)

    kw = registry.parse_params(Toy, ["beta1=0.5", "n=3", "flag=yes", "variant=b", "label=z"])
    assert kw == {"beta1": 0.5, "n": 3, "flag": True, "variant": "b", "label": "z"}
    assert registry.parse_params(Toy, [], 4.0) == {"rate_g_bps": 4e6}
    for bad, msg in (("beta1=x", "number"), ("n=1.5", "integer"), ("flag=maybe", "boolean"),
                     ("variant=c", "one of"), ("nope=1", "no parameter"), ("beta1", "key=value")):
        with pytest.raises(registry.RegistryError, match=msg):
            registry.parse_params(Toy, [bad])
    with pytest.raises(registry.RegistryError, match="reserved-rate"):
        registry.parse_params(registry.load("newreno"), [], 1.0)


def test_param_strings_name_keys_with_dashes_values_with_equals_and_untyped_parameters() -> None:
    """`--param initial-ssthresh=20` names initial_ssthresh; a value may contain '='
    (only the first one splits); a parameter without a type hint takes its default's
    type, or str without a default."""

    class Untyped(CongestionControl):
        name = "untyped"

        def __init__(self, label, other, scale=1.5):     # no annotations on purpose
            self.label, self.other, self.scale = label, other, scale

    assert registry.parse_params(registry.load("gtcp"), ["initial-ssthresh=20"]) == {"initial_ssthresh": 20.0}
    kw = registry.parse_params(Untyped, ["label=a=b", "other= 3 ", "scale=2"])
    assert kw == {"label": "a=b", "other": "3", "scale": 2.0} and type(kw["scale"]) is float
    with pytest.raises(registry.RegistryError) as err:
        registry.parse_params(Untyped, ["scale=2"])
    assert str(err.value) == "algorithm 'untyped' needs --param label=..."
    with pytest.raises(registry.RegistryError) as err:
        registry.parse_params(Untyped, ["label=x"])
    assert str(err.value) == "algorithm 'untyped' needs --param other=..."

    class Unresolvable(CongestionControl):
        name = "unresolvable"

        def __init__(self, n: "NotDefinedAnywhere" = 3) -> None:  # type: ignore[name-defined]  # noqa: F821
            self.n = n

    assert registry.parse_params(Unresolvable, ["n=4"]) == {"n": 4}   # hints unreadable: the default's type


@pytest.mark.parametrize("name, items, rate, message", [
    ("obp", ["nope=1"], None, "algorithm 'obp' has no parameter 'nope' (accepted: delta, gamma, inflight_gain, "
                              "timeout_factor, fallback_rtts, unexplained_loss_factor, min_segments_per_rtt, "
                              "share_floor)"),
    ("newreno", ["x=1"], None, "algorithm 'newreno' has no parameter 'x' (accepted: none)"),
    ("obp", ["delta=x"], None, "--param delta needs a number, got 'x'"),
    ("gtcp", ["rate_g_bps=1e6"], 2.0,
     "give the reserved rate once: --reserved-rate-mbit or --param rate_g_bps"),
])
def test_bad_param_strings_say_exactly_what_is_wrong(name, items, rate, message) -> None:
    with pytest.raises(registry.RegistryError) as err:
        registry.parse_params(registry.load(name), items, rate)
    assert str(err.value) == message


def test_every_landed_algorithm_is_listed() -> None:
    text = registry.describe_all()
    for name in registry.ALGORITHMS:
        assert name in text


# -- CLI ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv,msg", [
    (["--algo", "cubic", "--dst", "127.0.0.1:9", "--bytes", "1"], "unknown algorithm"),
    (["--algo", "newreno", "--dst", "no.such.host.invalid:9", "--bytes", "1"], "resolve"),
    (["--algo", "newreno", "--dst", "127.0.0.1:99999", "--bytes", "1"], "port"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "-5"], ">= 0"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "5", "--duration", "1"], "not both"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9"], "how much"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--input", "/nonexistent/x"], "cannot read"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1", "--param", "x=1"], "no parameter"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1", "--reserved-rate-mbit", "1"],
     "reserved-rate"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1", "--log", "x.txt"], ".csv"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1", "--mss", "0"], "1.."),
    (["--dst", "127.0.0.1:9", "--bytes", "1"], "--algo"),
    (["--algo", "newreno", "--bytes", "1"], "--dst"),
])
def test_send_usage_errors_exit_2_with_one_line(argv: list, msg: str,
                                                capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        send.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bwn-send: error:") and msg in err, err


@pytest.mark.parametrize("argv,msg", [
    (["--listen", "127.0.0.1:abc"], "port"),
    (["--listen", "127.0.0.1:1", "--delack-ms", "500"], "at most"),
    (["--listen", "127.0.0.1:1", "--out", "/nonexistent/dir/f"], "writable"),
    (["--listen", "127.0.0.1:1", "--log", "a.txt"], ".csv"),
    (["--listen", "127.0.0.1:1", "--max-flows", "0"], ">= 1"),
    (["--listen", "127.0.0.1:1", "--max-half-open", "x"], "whole number"),
    (["--listen", "127.0.0.1:1", "--max-ooo-bytes", "-1"], ">= 0"),
    (["--listen", "127.0.0.1:1", "--idle-timeout", "0"], "> 0"),
])
def test_recv_usage_errors(argv: list, msg: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        recv.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err, err


def test_size_suffixes() -> None:
    assert send.parse_size("10M") == 10_000_000
    assert send.parse_size("4Mi") == 4 * 2**20
    assert send.parse_size("1.5k") == 1500
    every = {"1500": 1500, " 0 ": 0, "2k": 2000, "2K": 2000, "3m": 3 * 10**6, "1g": 10**9, "1t": 10**12,
             "2ki": 2048, "1Mi": 2**20, "1Gi": 2**30, "1Ti": 2**40, "10MB": 10**7, "4MiB": 4 * 2**20,
             "512b": 512, "0.5Ki": 512}
    assert {text: send.parse_size(text) for text in every} == every


@pytest.mark.parametrize("text, message", [
    ("lots", "not a byte count: 'lots'"), ("", "not a byte count: ''"), ("k", "not a byte count: 'k'"),
    ("-1", "byte count must be >= 0, got '-1'"), ("inf", "byte count must be >= 0, got 'inf'"),
    ("nan", "byte count must be >= 0, got 'nan'"), ("1.5", "byte count must be whole bytes, got '1.5'"),
    ("0.0001k", "byte count must be whole bytes, got '0.0001k'"),
])
def test_size_errors_say_what_is_wrong(text: str, message: str) -> None:
    import argparse
    with pytest.raises(argparse.ArgumentTypeError) as err:
        send.parse_size(text)
    assert str(err.value) == message


def test_receiver_stats_line_and_output_file_names(tmp_path) -> None:
    """bwn-recv's closing line names the non-zero counters after the datagram count;
    --out gives the first flow FILE and later ones FILE.<flow id>, or fills in
    {flow_id}, never the same file twice."""
    assert recv.format_stats({"datagrams": 0, "malformed": 0}) == "0 datagrams"
    assert recv.format_stats({"datagrams": 12, "malformed": 0, "syn_received": 2, "refused": 1}) == (
        "12 datagrams, syn_received 2, refused 1")
    assert recv.format_stats({"malformed": 3}) == "0 datagrams, malformed 3"
    assert type(recv.OutputFiles(None)(("h", 1), 5)).__name__ == "Sink"      # counted only
    plain = recv.OutputFiles(str(tmp_path / "out.bin"))
    paths = [plain(("h", 1), f).path for f in (5, 6, 5)]
    assert paths == [str(tmp_path / n) for n in ("out.bin", "out.bin.6", "out.bin.5")]
    named = recv.OutputFiles(str(tmp_path / "f-{flow_id}.bin"))
    paths = [named(("h", 1), f).path for f in (7, 7, 7)]
    assert paths == [str(tmp_path / n) for n in ("f-7.bin", "f-7.bin.1", "f-7.bin.2")]
    for sink in (plain, named):
        assert all(Path(p).exists() for p in sink.used)


def test_python_m_help_and_list_algos() -> None:
    out = subprocess.run([PY, "-m", "hosts.send", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "--reserved-rate-mbit" in out.stdout
    assert "--no-sack" in out.stdout
    out = subprocess.run([PY, "-m", "hosts.recv", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "--delayed-ack" in out.stdout
    assert "--stats-json" in out.stdout and "--max-half-open" in out.stdout
    out = subprocess.run([PY, "-m", "hosts.send", "--list-algos"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("newreno")


def test_send_without_receiver_fails_with_status_1(capsys: pytest.CaptureFixture) -> None:
    rc = send.main(["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "10",
                    "--connect-timeout", "0.3", "--initial-rto-ms", "100", "--quiet"])
    assert rc == 1
    assert "SYN" in capsys.readouterr().err


# -- flow log -----------------------------------------------------------------------------------
@pytest.mark.parametrize("ext", ["csv", "jsonl"])
def test_time_series_is_rate_limited(tmp_path, ext: str) -> None:
    path = str(tmp_path / f"log.{ext}")
    log = TimeSeriesLog(path, SENDER_FIELDS, interval_us=10_000)
    for t in range(0, 100_000, 1_000):  # 100 offers over 100 ms
        if log.due(1, t):
            log.offer(1, t, {"time_s": t / 1e6, "cwnd": 2.0, "extra": {"k": 1}})
    log.offer(1, 100_500, {"time_s": 0.1005}, force=True)
    log.close()
    lines = open(path).read().splitlines()
    rows = lines[1:] if ext == "csv" else lines
    assert len(rows) == 11
    if ext == "jsonl":
        assert json.loads(rows[0])["extra"] == {"k": 1}


def test_percentiles() -> None:
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    s = rtt_stats_ms(range(1000, 101_000, 1000))
    assert s["rtt_p50_ms"] == pytest.approx(50.5) and s["rtt_samples"] == 100


def test_summary_line_says_each_figure_in_its_unit():
    """The one line bwn-send prints at the end: every figure with its unit and
    precision, the spurious retransmissions only when counted, SACK or not, and
    '-' for an RTT figure the flow never measured."""
    from hosts.flowlog import format_summary
    full = {"flow_id": 7, "algo": "ebn", "bytes": 1_250_000, "duration_s": 2.00049,
            "goodput_bps": 4_999_876.0, "retransmits": 12, "spurious_retransmits": 3, "timeouts": 1,
            "sack": True, "rtt_p50_ms": 41.234, "rtt_p95_ms": 55.0, "rtt_p99_ms": 60.129,
            "rtt_mean_ms": 43.0, "status": "complete"}
    assert format_summary(full) == (
        "flow 7 ebn: 1250000 bytes in 2.000 s, goodput 5.000 Mb/s, retransmits 12 (3 spurious), "
        "timeouts 1, SACK, RTT p50/p95/p99/mean 41.23/55.00/60.13/43.00 ms (complete)")
    sparse = {"flow_id": 8, "bytes": 0, "duration_s": 0.5, "goodput_bps": 0.0, "retransmits": 0,
              "timeouts": 0, "sack": False, "rtt_p50_ms": None, "status": "aborted"}
    assert format_summary(sparse) == (
        "flow 8 : 0 bytes in 0.500 s, goodput 0.000 Mb/s, retransmits 0, timeouts 0, no SACK, "
        "RTT p50/p95/p99/mean -/-/-/- ms (aborted)")


@pytest.mark.parametrize("text, default, expected", [
    ("127.0.0.1:9", None, ("127.0.0.1", 9)), ("127.0.0.1", 16983, ("127.0.0.1", 16983)),
    ("localhost:0", None, ("127.0.0.1", 0)), ("10.0.0.2:65535", 1, ("10.0.0.2", 65535)),
])
def test_parse_addr_accepts(text: str, default, expected) -> None:
    from hosts.transport.loop import parse_addr
    assert parse_addr(text, default) == expected


@pytest.mark.parametrize("text, default, message", [
    (":9", None, "address ':9' has no host (use HOST:PORT, e.g. 10.0.0.2:16983)"),
    ("", 5, "address '' has no host (use HOST:PORT, e.g. 10.0.0.2:16983)"),
    ("10.0.0.2", None, "address '10.0.0.2' needs a port (HOST:PORT)"),
    ("10.0.0.2:x", None, "bad port in '10.0.0.2:x'"),
    ("10.0.0.2:65536", None, "port out of range in '10.0.0.2:65536'"),
    ("10.0.0.2:-1", None, "port out of range in '10.0.0.2:-1'"),
])
def test_parse_addr_refuses_with_one_line(text: str, default, message: str) -> None:
    from hosts.transport.loop import parse_addr
    with pytest.raises(ValueError) as err:
        parse_addr(text, default)
    assert str(err.value) == message


def test_parse_addr_names_a_host_it_cannot_resolve() -> None:
    from hosts.transport.loop import parse_addr
    with pytest.raises(ValueError, match=r"^cannot resolve 'no\.such\.host\.invalid': "):
        parse_addr("no.such.host.invalid:9")


def test_ready_file_and_start_gate(tmp_path: Path) -> None:
    """--ready-file appears whole, holding the pid, and nothing is left beside it;
    --wait-go starts on a line, refuses on end of file; the delay is waited."""
    import io
    import os
    import signal
    import time
    from hosts.startup import NotStarted, wait_for_start, write_ready_file
    write_ready_file(None)                                    # nothing asked: nothing written
    path = tmp_path / "agent.ready"
    write_ready_file(str(path))
    assert path.read_text() == f"{os.getpid()}\n" and os.listdir(tmp_path) == ["agent.ready"]
    before = signal.getsignal(signal.SIGINT)
    wait_for_start(True, 0, io.StringIO("go\n"))
    with pytest.raises(NotStarted, match="^the runner closed stdin before saying go$"):
        wait_for_start(True, 0, io.StringIO(""))
    t0 = time.monotonic()
    wait_for_start(False, 0.2, io.StringIO(""))               # no go needed; the delay is kept
    assert time.monotonic() - t0 >= 0.2
    assert signal.getsignal(signal.SIGINT) is before          # the handler is put back
    import threading
    threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    with pytest.raises(NotStarted, match="^interrupted$"):      # SIGINT during the delay
        wait_for_start(False, 30, io.StringIO(""))
    assert signal.getsignal(signal.SIGINT) is before


def test_file_source_sends_the_file_or_its_first_bytes(tmp_path: Path) -> None:
    from hosts.transport.source import FileSource
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 4)
    whole = FileSource(str(path))
    assert (whole.file_bytes, whole.length_bytes) == (1024, 1024)
    assert bytes(whole.view(250, 10)) == bytes(range(250, 256)) + bytes(range(4))
    whole.close()
    part = FileSource(str(path), limit_bytes=1000)
    assert (part.file_bytes, part.length_bytes) == (1024, 1000)
    part.close()
    assert FileSource(str(path), limit_bytes=1024).length_bytes == 1024      # the bound is inclusive
    with pytest.raises(ValueError) as err:
        FileSource(str(path), limit_bytes=1025)
    assert str(err.value) == f"--bytes 1025 is more than the 1024 bytes of {path}"
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    nothing = FileSource(str(empty))
    assert (nothing.length_bytes, bytes(nothing.view(0, 5))) == (0, b"")
    nothing.close()
    with pytest.raises(FileNotFoundError):
        FileSource(str(tmp_path / "missing.bin"))


def test_a_log_row_in_each_format_keeps_infinities_and_nan_readable(tmp_path) -> None:
    """ssthresh starts infinite and an estimate may be NaN: CSV writes them as text,
    JSON lines (which has no inf or NaN) as "inf"/"-inf" strings and null, nested too."""
    row = {"time_s": 0.5, "flow_id": 3, "cwnd": 12.3456789, "ssthresh": float("inf"),
           "estimate_bps": float("nan"), "pacing_rate_bps": float("-inf"), "in_recovery": False,
           "extra": {"ab_bps": float("-inf"), "ep_bps": float("nan"), "mode": "rate"}}
    for ext in ("csv", "ndjson"):
        path = str(tmp_path / f"log.{ext}")
        log = TimeSeriesLog(path, ["time_s", "flow_id", "cwnd", "ssthresh", "estimate_bps",
                                   "pacing_rate_bps", "in_recovery", "extra", "rtt_sample_us"])
        log.offer(3, 0, row)
        log.close()
        assert log.rows_written == 1
        text = open(path).read().splitlines()
        if ext == "csv":
            assert text[1] == ('0.5,3,12.3457,inf,nan,-inf,False,'
                               '"{""ab_bps"":""-inf"",""ep_bps"":null,""mode"":""rate""}",')
        else:
            assert json.loads(text[0]) == {
                "time_s": 0.5, "flow_id": 3, "cwnd": 12.3456789, "ssthresh": "inf", "estimate_bps": None,
                "pacing_rate_bps": "-inf", "in_recovery": False, "rtt_sample_us": None,
                "extra": {"ab_bps": "-inf", "ep_bps": None, "mode": "rate"}}


def test_a_log_needs_a_csv_or_jsonl_name(tmp_path) -> None:
    with pytest.raises(ValueError) as err:
        TimeSeriesLog(str(tmp_path / "log.txt"), SENDER_FIELDS)
    assert str(err.value) == f"log file {str(tmp_path / 'log.txt')!r} must end in .csv or .jsonl"
    assert TimeSeriesLog(str(tmp_path / "LOG.CSV"), SENDER_FIELDS).format == "csv"


@pytest.mark.parametrize("argv, line", [
    (["--dst", "127.0.0.1:9", "--bytes", "1"], "--algo NAME is required"),
    (["--algo", "newreno", "--bytes", "1"], "--dst ADDR:PORT is required"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "5", "--duration", "1"],
     "give either --bytes or --duration, not both"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9"],
     "say how much to send: --bytes N, --duration SECONDS or --input FILE"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--input", "/nonexistent/x"],
     "cannot read --input file '/nonexistent/x'"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--input", "/"], "--input '/' is not a regular file"),
    (["--algo", "newreno", "--dst", "127.0.0.1:9", "--bytes", "1", "--log", "x.txt"],
     "log file 'x.txt' must end in .csv or .jsonl"),
])
def test_send_usage_errors_are_these_lines(argv: list, line: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        send.main(argv)
    assert capsys.readouterr().err == f"bwn-send: error: {line} (see --help)\n"


def test_recv_delack_above_200_ms_is_refused(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        recv.main(["--listen", "127.0.0.1:1", "--delack-ms", "200.001"])
    assert capsys.readouterr().err == ("bwn-recv: error: --delack-ms must be at most 200 (RFC 1122 / RFC 5681) "
                                       "(see --help)\n")


def test_rtt_stats_are_each_figure_of_the_samples_in_ms() -> None:
    """The RTT columns of a sender's summary: every figure of the samples (any
    order), in ms rounded to the microsecond, and None (0 samples) without any."""
    s = rtt_stats_ms([30_000, 10_000, 20_000, 40_000, 1_000_250])       # unsorted on purpose
    assert s == {"rtt_p50_ms": 30.0, "rtt_p95_ms": pytest.approx(808.2), "rtt_p99_ms": pytest.approx(961.84),
                 "rtt_mean_ms": 220.05, "rtt_min_ms": 10.0, "rtt_max_ms": 1000.25, "rtt_samples": 5}
    assert rtt_stats_ms([1234]) == {"rtt_p50_ms": 1.234, "rtt_p95_ms": 1.234, "rtt_p99_ms": 1.234,
                                    "rtt_mean_ms": 1.234, "rtt_min_ms": 1.234, "rtt_max_ms": 1.234,
                                    "rtt_samples": 1}
    assert rtt_stats_ms([1, 2]) ["rtt_mean_ms"] == 0.002                 # 1.5 us rounds to 2 us
    assert rtt_stats_ms([]) == {"rtt_p50_ms": None, "rtt_p95_ms": None, "rtt_p99_ms": None,
                                "rtt_mean_ms": None, "rtt_min_ms": None, "rtt_max_ms": None, "rtt_samples": 0}
    assert rtt_stats_ms(iter([5_000, 7_000]))["rtt_samples"] == 2          # any iterable, read once


def test_percentile_interpolates_between_ranks() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 0) == 10.0 and percentile(values, 100) == 40.0
    assert percentile(values, 50) == pytest.approx(25.0)
    assert percentile(values, 90) == pytest.approx(37.0)
    assert percentile([], 50) is None and percentile([7], 99) == 7.0


def test_log_format_follows_the_file_name() -> None:
    from hosts.flowlog import log_format_for
    assert [log_format_for(p) for p in ("a.csv", "A.CSV", "b.jsonl", "B.JSONL", "c.ndjson")] == [
        "csv", "csv", "jsonl", "jsonl", "jsonl"]
    with pytest.raises(ValueError, match=r"must end in \.csv or \.jsonl"):
        log_format_for("d.json")


def test_a_log_keeps_one_row_per_interval_per_flow(tmp_path) -> None:
    """Each flow (key) has its own interval: a row exactly one interval after the
    last is kept, one a microsecond sooner is not, unless forced; an interval of
    0 keeps every row; rows_written counts what reached the file."""
    path = tmp_path / "log.jsonl"
    log = TimeSeriesLog(str(path), ["time_s", "flow_id"], interval_us=1_000)
    for key, t in ((1, 0), (2, 0), (1, 999), (1, 1_000), (2, 500), (2, 999)):
        log.offer(key, t, {"time_s": t / 1e6, "flow_id": key})
    log.offer(2, 1_500, {"time_s": 0.0015, "flow_id": 2}, force=True)     # forced: not yet due
    log.close()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["flow_id"], r["time_s"]) for r in rows] == [(1, 0.0), (2, 0.0), (1, 0.001), (2, 0.0015)]
    assert log.rows_written == 4
    every = TimeSeriesLog(str(tmp_path / "all.csv"), ["time_s"], interval_us=0)
    for _ in range(3):
        every.offer(1, 5, {"time_s": 5e-6})
    every.close()
    assert every.rows_written == 3
    assert TimeSeriesLog(str(tmp_path / "neg.csv"), ["time_s"], interval_us=-5).interval_us == 0


def test_a_csv_log_writes_an_empty_extra_as_an_empty_cell(tmp_path) -> None:
    path = tmp_path / "log.csv"
    log = TimeSeriesLog(str(path), ["time_s", "extra", "cwnd"], interval_us=0)
    log.offer(1, 0, {"time_s": 0.5, "extra": {}, "cwnd": None})
    log.offer(1, 1, {"time_s": 1.0, "extra": {"k": 2}, "cwnd": 3})
    log.close()
    assert path.read_text().splitlines() == ["time_s,extra,cwnd", "0.5,,", '1,"{""k"":2}",3']


def test_recv_defaults_are_the_documented_ones() -> None:
    """What `bwn-recv --help` and docs/transport.md promise when an option is left out."""
    args = recv.build_parser().parse_args([])
    assert args.listen == "0.0.0.0:16983"                       # BWN's UDP port
    assert (args.delack_ms, args.window_bytes, args.log_interval_ms) == (40.0, 4 * 2**20, 10.0)
    assert (args.linger, args.idle_timeout) == (1.0, 120.0)
    assert (args.max_flows, args.max_half_open, args.max_ooo_bytes) == (1000, 4096, 64 * 2**20)
    assert not (args.once or args.quiet or args.delayed_ack)


@pytest.mark.parametrize("option, good, bad, says", [
    ("--window-bytes", ["1", "4294967295", "4Mi"], ["0", "4294967296"], "must be 1..4294967295 bytes"),
    ("--max-flows", ["1", "7"], ["0", "-1"], "must be >= 1"),
    ("--max-half-open", ["1"], ["0", "1.5"], ""),
    ("--idle-timeout", ["0.001", "0.5", "1e9"], ["0", "-1", "nan", "inf", "x"], ""),
    ("--log-interval-ms", ["0", "2.5"], ["-1", "x"], ""),
])
def test_recv_option_bounds(option: str, good: list, bad: list, says: str,
                            capsys: pytest.CaptureFixture) -> None:
    """Each bound is where the help says: the edge value is taken, one past it is
    refused with exit 2 and a line naming the option."""
    parser = recv.build_parser()
    for text in good:
        parser.parse_args([option, text])
    for text in bad:
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([option, text])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert option in err and repr(text) in err and says in err, err


def test_list_algos_entries_give_the_first_doc_line_and_each_parameter_with_its_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`bwn-send --list-algos`, one entry: the name in 9 columns, the docstring's first
    line, then the parameters with their types and defaults (a required one has none)."""
    assert registry.describe("reno") == "reno      Reno (RFC 5681): fast recovery ends at the first new ACK."
    assert registry.describe("gtcp").splitlines()[1] == (
        "          params: rate_g_bps: float = 0.0, initial_ssthresh: float = inf, "
        "cwnd_g_rtt: Literal['base', 'srtt'] = 'base'")

    class Bare(CongestionControl):
        name = "bare"

        def __init__(self, gain: float, rounds: int = 3) -> None:
            self.gain, self.rounds = gain, rounds

    monkeypatch.setattr(registry, "load", lambda name: Bare)   # no docstring: the base class's
    assert registry.describe("bare") == (
        "bare      NewReno by default; subclasses override what their paper changes.\n"
        "          params: gain: float, rounds: int = 3")


def test_available_says_which_algorithms_load_and_why_the_others_do_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert registry.available() == {name: None for name in registry.ALGORITHMS}
    monkeypatch.setattr(registry, "ALGORITHMS", ("newreno", "notyet"))
    with pytest.raises(registry.RegistryError) as err:
        registry.load("notyet")
    assert registry.available() == {"newreno": None, "notyet": str(err.value)}
