"""GTCP: cwnd_G = rate_G * rtt_base, fast recovery to cwnd_G + cwnd_BE/2 with forced transmissions,
timeout recovery, start-up threshold, and rate_G = 0 being NewReno."""
import pytest

from hosts.cc.base import AckInfo, CcState, CongestionControl
from hosts.cc.gtcp import Gtcp

MSS = 1000
RATE_G = 8e6          # 8 Mb/s
RTT_BASE = 10_000     # µs -> cwnd_G = 8e6 * 0.01 / 8000 = 10 segments


def ack(seq=0, acked=MSS, rtt_us=None, dupacks=0, now_us=0):
    return AckInfo(now_us=now_us, ack_seq=seq, acked_bytes=acked, rtt_sample_us=rtt_us,
                   ack_send_time_us=None, feedback=None, dupacks=dupacks)


def dup(n):
    return ack(acked=0, dupacks=n)


def fresh(rate=RATE_G, **kw):
    cc = Gtcp(rate_g_bps=rate, **kw)
    st = CcState(mss_bytes=MSS)
    cc.on_init(st)
    cc.on_feedback(st, ack(rtt_us=RTT_BASE + 3000))
    cc.on_feedback(st, ack(rtt_us=RTT_BASE))            # rtt_base = min sample
    cc.on_feedback(st, ack(rtt_us=RTT_BASE + 500))
    return cc, st


def test_cwnd_g():
    cc, st = fresh()
    assert cc.cwnd_g(st) == pytest.approx(RATE_G * (RTT_BASE / 1e6) / (8 * MSS))
    assert cc.cwnd_g(st) == pytest.approx(10)
    assert st.cwnd == 2                                  # one segment for each component


def test_three_dupacks_forced_transmissions_ignore_and_collapse():
    cc, st = fresh()
    st.cwnd, st.ssthresh, st.bytes_in_flight = 30.0, 25.0, 30 * MSS
    cwnd_g, cwnd_be = 10.0, 20.0
    cc.on_enter_recovery(st)
    st.in_recovery = True
    assert st.cwnd == 30.0                               # not adjusted at loss detection
    seen = []
    for n in range(4, 4 + 22):                           # the duplicate ACKs after the 3rd
        cc.on_dupack(st, dup(n))
        seen.append(st.cwnd)
    forced = [30.0 + i for i in range(1, 11)]            # first cwnd_G: one more segment each
    ignored = [40.0] * int(cwnd_be / 2)                  # next cwnd_BE/2: nothing
    further = [41.0, 42.0]                               # then one segment per dup ACK again
    assert seen == forced + ignored + further
    st.in_recovery = False
    cc.on_exit_recovery(st, ack(seq=40 * MSS, acked=30 * MSS))
    assert st.cwnd == pytest.approx(cwnd_g + cwnd_be / 2)  # 20, where NewReno gives 15
    assert st.ssthresh == pytest.approx(20.0)


def test_window_below_cwnd_g_keeps_the_reservation():
    cc, st = fresh()
    st.cwnd, st.bytes_in_flight = 6.0, 6 * MSS
    cc.on_enter_recovery(st)
    assert (st.extra["cwnd_g"], st.extra["cwnd_be"]) == (pytest.approx(10.0), 0.0)  # the log: no BE part
    cc.on_exit_recovery(st, ack(seq=6 * MSS))
    assert st.cwnd == pytest.approx(10.0)               # cwnd_G + 0/2


def test_congestion_avoidance_and_slow_start_threshold():
    cc, st = fresh(initial_ssthresh=20.0)
    assert st.ssthresh == pytest.approx(20.0 + 10.0)    # default ssthresh + cwnd_G
    for _ in range(28):
        cc.on_ack(st, ack())
    assert st.cwnd == pytest.approx(30.0)               # +1 per ACK up to 30
    cc.on_ack(st, ack())
    assert st.cwnd == pytest.approx(30.0 + 1 / 30)      # then +1/cwnd


def test_timeout_recovery_forces_new_segments_outside_the_window():
    cc, st = fresh()
    st.snd_una, st.snd_max = 10 * MSS, 40 * MSS         # 30 outstanding (10..39)
    st.cwnd, st.bytes_in_flight = 30.0, 30 * MSS
    cc.on_timeout(st)
    assert st.cwnd == 1.0                               # the best-effort part only
    forced, windows = [], []
    for n in range(1, 33):
        cc.on_dupack(st, dup(n))
        forced.append(st.force_segments)
        windows.append(st.cwnd)
    # first cwnd_G dup ACKs force a new segment each; then none until 30 (the
    # outstanding count) have come back; after that one per dup ACK
    assert forced == list(range(1, 11)) + [10] * 20 + [11, 12]
    assert windows == [1.0] * 32                        # the window is the best-effort part
    cc.on_ack(st, ack(seq=20 * MSS, acked=10 * MSS))     # new ACK: best-effort slow start 1 -> 2
    assert st.cwnd == pytest.approx(2.0)
    cc.on_ack(st, ack(seq=40 * MSS, acked=20 * MSS))     # passes ssexit_thresh (snd_max 40 000)
    assert st.cwnd == pytest.approx(10.0 + 3.0)         # cwnd_G + cwnd_BE
    assert st.ssthresh == pytest.approx(10.0 + (30 - 10) / 2)


def test_cwnd_g_counts_frames_as_the_meter_does():
    cc, st = fresh()
    st.frame_overhead_bytes = 102                        # a 1000-byte segment is a 1102-byte frame
    assert cc.cwnd_g(st) == pytest.approx(RATE_G * (RTT_BASE / 1e6) / (8 * 1102))
    # Sent at that window per rtt_base, the frames carry exactly rate_G.
    assert cc.cwnd_g(st) * 1102 * 8 / (RTT_BASE / 1e6) == pytest.approx(RATE_G)


def test_sack_fast_recovery_collapses_at_once_and_forces_cwnd_g_new_segments():
    cc, st = fresh()
    st.sack = True
    st.cwnd, st.ssthresh, st.bytes_in_flight = 30.0, 25.0, 30 * MSS
    cc.on_enter_recovery(st)
    st.in_recovery = True
    assert st.cwnd == pytest.approx(10.0 + 20.0 / 2)     # cwnd_update: pipe does the rest
    for n in range(4, 4 + 22):
        cc.on_dupack(st, dup(n))
    assert st.force_segments == 10                  # the first cwnd_G duplicate ACKs
    assert st.cwnd == pytest.approx(20.0)                # never inflated
    cc.on_partial_ack(st, ack(seq=35 * MSS, acked=5 * MSS))
    assert st.cwnd == pytest.approx(20.0)
    st.in_recovery = False
    cc.on_exit_recovery(st, ack(seq=40 * MSS, acked=5 * MSS))
    assert st.cwnd == pytest.approx(20.0) and st.ssthresh == pytest.approx(20.0)


def test_no_reservation_is_newreno():
    g, gs = fresh(rate=0.0)
    n, ns = CongestionControl(), CcState(mss_bytes=MSS)
    n.on_init(ns)
    script = [("ack", ack())] * 12 + [("enter", None)] + [("dup", dup(k)) for k in range(4, 12)] \
        + [("partial", ack(acked=3 * MSS))] + [("exit", ack(acked=5 * MSS))] + [("ack", ack())] * 5 \
        + [("timeout", None)] + [("ack", ack())] * 3
    for kind, a in script:
        for cc, st in ((g, gs), (n, ns)):
            st.bytes_in_flight = int(st.cwnd) * MSS
            if kind == "ack":
                cc.on_ack(st, a)
            elif kind == "enter":
                cc.on_enter_recovery(st)
                st.in_recovery = True
            elif kind == "dup":
                cc.on_dupack(st, a)
            elif kind == "partial":
                cc.on_partial_ack(st, a)
            elif kind == "exit":
                st.in_recovery = False
                cc.on_exit_recovery(st, a)
            else:
                cc.on_timeout(st)
        assert (gs.cwnd, gs.ssthresh) == (ns.cwnd, ns.ssthresh), kind


# -- over the real transport (hosts.sim.channel) -----------------------------------------
@pytest.mark.parametrize("sack", [True, False], ids=["sack", "no-sack"])
def test_timeout_recovery_sends_new_data_and_no_retransmission_storm(sack):
    from hosts.transport.sender import SenderConfig
    from hosts.sim.channel import LinkModel, Simulation
    from hosts.transport.source import PatternSource, pattern_bytes
    from hosts.transport.wire import F_DATA, F_RETX, TransportHeader

    lost = 300 * MSS
    seen = []

    def drop(t, pkt):   # segment 300 and its fast retransmission: only the RTO repairs it
        h = TransportHeader.unpack(pkt)
        if h.flags & F_DATA and h.seq == lost and len(seen) < 2:
            seen.append(t)
            return True
        return False

    fwd = LinkModel(delay_us=20_000, rate_bps=10e6, queue_packets=300, drop_if=drop)
    sim = Simulation(fwd, LinkModel(delay_us=20_000), seed=1)
    sim.keep_log = True
    # A finite default ssthresh keeps slow start from overflowing the queue: the one
    # loss is ours, and duplicate ACKs keep coming after the timeout (paper III-D 2).
    cc = Gtcp(rate_g_bps=6e6, initial_ssthresh=40)
    s = sim.add_flow(cc, PatternSource(1500 * MSS, MSS), config=SenderConfig(mss_bytes=MSS, sack=sack))
    at = {}
    orig = s._on_rto

    def spy(now):
        if "t" not in at:
            at.update(t=now, high=s.snd_max, una=s.snd_una)
        orig(now)

    s._on_rto = spy
    sim.run(until_us=60_000_000)
    assert s.state.value == "done" and s.timeouts == 1 and len(seen) == 2
    assert sim.forward.stats.dropped_queue == 0
    assert bytes(sim.sink_of(s).data) == pattern_bytes(0, 1500 * MSS)
    pkts = [(t, TransportHeader.unpack(p)) for t, d, p in sim.sent_log if d == "fwd"]
    after = [h for t, h in pkts if t >= at["t"] and h.flags & F_DATA]
    retx = [h for h in after if h.flags & F_RETX]
    fresh = [h for h in after if not h.flags & F_RETX]
    assert s.forced_segments > 0 and fresh and fresh[0].seq >= at["high"]  # new data first
    outstanding = (at["high"] - at["una"]) // MSS
    assert len(retx) <= outstanding                      # each outstanding segment at most once
    if sack:
        assert len(retx) == 1                            # only the hole: the rest was SACKed
    summary = s.summary(sim.now_us)
    assert summary["spurious_retransmits"] <= (0 if sack else outstanding)


@pytest.mark.parametrize("outstanding,ssthresh_be", [(30, 10.0), (13, 2.0), (4, 2.0)])
def test_a_timeout_starts_recovery_from_one_segment_with_the_reservation_in_ssthresh(outstanding, ssthresh_be):
    """At a timeout the window is the best-effort part's one segment, and ssthresh is
    cwnd_G + max((outstanding - cwnd_G) / 2, 2): half the best-effort share, at least 2
    (the same floor as NewReno's); fast recovery and the start-up phase are over, no
    segment is forced yet, and the flow log says so."""
    cc, st = fresh()
    cc.on_enter_recovery(st)                             # a fast recovery under way
    st.snd_una, st.snd_max = 10 * MSS, (10 + outstanding) * MSS
    st.cwnd, st.bytes_in_flight = float(outstanding), outstanding * MSS
    cc.on_timeout(st)
    assert st.cwnd == 1.0 and st.ssthresh == pytest.approx(10.0 + ssthresh_be)
    assert cc.fr_active is False and cc.initial_phase is False and cc.to_active is True
    assert cc.forced == 0.0 and cc.cwnd_be == 1.0 and cc.to_high == st.snd_max
    assert st.extra["phase"] == "timeout_recovery" and st.extra["cwnd_be"] == 1.0
    assert st.extra["forced"] == 0.0 and st.extra["cwnd_g"] == pytest.approx(10.0)


def test_leaving_fast_recovery_ends_it_and_logs_the_open_phase():
    """After the recovery's full ACK the flow is back in the open phase: the next
    three duplicate ACKs start a new fast recovery (not a continuation), and the log
    says 'open'. Without a window chosen in recovery (cwnd_update), NewReno's exit."""
    cc, st = fresh()
    st.cwnd, st.bytes_in_flight = 30.0, 30 * MSS
    cc.on_enter_recovery(st)
    assert cc.fr_active and st.extra["phase"] != "open"
    cc.on_exit_recovery(st, ack(seq=40 * MSS, acked=30 * MSS))
    assert cc.fr_active is False and st.extra["phase"] == "open"
    assert st.cwnd == pytest.approx(10.0 + 20.0 / 2)
    cc2, st2 = fresh()
    st2.cwnd, st2.ssthresh, st2.bytes_in_flight = 30.0, 12.0, 5 * MSS
    cc2.on_exit_recovery(st2, ack(seq=40 * MSS, acked=30 * MSS))     # never entered: NewReno's rule
    assert st2.cwnd == pytest.approx(min(12.0, 5 + 1.0)) and st2.extra["phase"] == "open"


def test_timeout_recovery_grows_the_best_effort_part_by_slow_start_then_avoidance():
    """III-D(2) with TCP's growth after a timeout, applied to the best-effort part: by
    the segments an ACK covers, at most 1 per ACK, up to ssthresh_BE; from there by
    acked / cwnd_BE. The window is that part alone, the log says timeout_recovery, and
    the ACK past ssexit_thresh leaves with cwnd_G + cwnd_BE in the open phase."""
    cc, st = fresh()
    st.snd_una, st.snd_max = 10 * MSS, 40 * MSS         # 30 outstanding: ssthresh_BE = 10
    st.cwnd, st.bytes_in_flight = 30.0, 30 * MSS
    cc.on_timeout(st)
    assert cc.ssthresh_be == pytest.approx(10.0)
    steps = [(500, 1.5), (0, 1.5)] + [(MSS, 2.5 + i) for i in range(8)] + [(500, 10.0), (MSS, 10.1)]
    seq = 10 * MSS
    for acked, cwnd_be in steps:
        seq += acked
        cc.on_ack(st, ack(seq=seq, acked=acked))
        assert (cc.cwnd_be, st.cwnd) == (pytest.approx(cwnd_be), pytest.approx(cwnd_be)), (acked, seq)
        assert st.extra["phase"] == "timeout_recovery" and st.extra["cwnd_be"] == pytest.approx(cwnd_be)
    rest = 40 * MSS - seq
    cc.on_ack(st, ack(seq=40 * MSS, acked=rest))         # passes ssexit_thresh
    assert cc.to_active is False and st.extra["phase"] == "open"
    assert st.cwnd == pytest.approx(10.0 + 10.1 + rest / MSS / 10.1)
    before = st.cwnd
    cc.on_ack(st, ack(seq=41 * MSS))                     # open: NewReno's increase of the whole window
    assert st.cwnd == pytest.approx(before + 1 / before) and st.extra["phase"] == "open"


@pytest.mark.parametrize("sack", [False, True])
def test_forced_segments_are_counted_one_per_duplicate_ack_and_logged(sack):
    """The log's `forced` is the number of segments forced in the current recovery:
    1, 2, ... cwnd_G in fast recovery (then no more), and in timeout recovery again
    after the outstanding count; a new recovery starts it from 0."""
    cc, st = fresh()
    st.sack = sack
    st.cwnd, st.bytes_in_flight = 30.0, 30 * MSS
    cc.on_enter_recovery(st)
    st.in_recovery = True
    assert st.extra["forced"] == 0.0 and st.extra["phase"] == "fast_recovery"
    logged = []
    for n in range(4, 4 + 22):
        cc.on_dupack(st, dup(n))
        logged.append(st.extra["forced"])
        assert st.extra["phase"] == "fast_recovery"
    assert logged == [float(i) for i in range(1, 11)] + [10.0] * 12
    st.in_recovery = False
    st.snd_una, st.snd_max = 10 * MSS, 25 * MSS          # 15 outstanding at the timeout
    st.bytes_in_flight = 15 * MSS
    cc.on_timeout(st)
    logged = []
    for n in range(1, 18):
        cc.on_dupack(st, dup(n))
        logged.append(st.extra["forced"])
        assert st.extra["phase"] == "timeout_recovery"
    assert logged == [float(i) for i in range(1, 11)] + [10.0] * 5 + [11.0, 12.0]
    cc.on_enter_recovery(st)                             # a new loss: fast recovery again
    assert cc.forced == 0.0 and st.extra["forced"] == 0.0


def test_fast_recovery_during_timeout_recovery_ends_it():
    """A fast recovery that begins while timeout recovery is under way replaces it:
    after its full ACK the window grows as a whole (NewReno's rule), not as the
    best-effort part of a timeout recovery; and the start-up phase is over, so RTT
    samples no longer reset ssthresh to the initial threshold + cwnd_G."""
    cc, st = fresh(initial_ssthresh=50.0)
    st.snd_una, st.snd_max = 10 * MSS, 40 * MSS
    st.cwnd, st.bytes_in_flight = 30.0, 30 * MSS
    cc.on_timeout(st)
    st.cwnd, st.bytes_in_flight = 24.0, 24 * MSS
    cc.on_enter_recovery(st)
    assert cc.to_active is False
    cc.on_exit_recovery(st, ack(seq=40 * MSS, acked=MSS))
    assert st.cwnd == pytest.approx(10.0 + 14.0 / 2)
    cc.on_ack(st, ack(seq=41 * MSS))
    assert st.cwnd == pytest.approx(17.0 + 1 / 17.0)    # congestion avoidance (ssthresh 17)
    cc2, st2 = fresh(initial_ssthresh=50.0)
    st2.cwnd, st2.bytes_in_flight = 30.0, 30 * MSS
    cc2.on_enter_recovery(st2)
    assert st2.ssthresh == pytest.approx(20.0)
    cc2.on_feedback(st2, ack(rtt_us=RTT_BASE - 1000))    # a lower rtt_base: still 20
    assert st2.ssthresh == pytest.approx(20.0) and cc2.initial_phase is False


def test_fast_recovery_ssthresh_is_at_least_two_segments():
    """With a tiny reservation and window (cwnd_update below 2), ssthresh is 2, as
    NewReno's floor."""
    cc, st = fresh(rate=4e5)                             # cwnd_G = 0.5 segment
    st.cwnd, st.bytes_in_flight = 1.0, MSS
    cc.on_enter_recovery(st)
    assert cc.cwnd_update == pytest.approx(0.5 + 0.5 / 2)
    assert st.ssthresh == 2.0


def test_a_timeout_during_fast_recovery_hands_its_end_to_newreno():
    """A timeout ends fast recovery: if the transport later reports the end of a
    recovery, the window is NewReno's (min(ssthresh, FlightSize + 1)), not the
    cwnd_update that fast recovery had chosen."""
    cc, st = fresh()
    st.cwnd, st.bytes_in_flight = 30.0, 30 * MSS
    cc.on_enter_recovery(st)
    assert cc.cwnd_update == pytest.approx(20.0)
    st.snd_una, st.snd_max = 10 * MSS, 40 * MSS
    cc.on_timeout(st)
    st.bytes_in_flight = 3 * MSS
    cc.on_exit_recovery(st, ack(seq=40 * MSS, acked=30 * MSS))
    assert st.cwnd == pytest.approx(min(st.ssthresh, 3 + 1.0))


def test_cwnd_g_variants_and_no_reservation():
    """cwnd_G uses rtt_base; the srtt variant uses the smoothed RTT when there is one
    (and rtt_base before); no reservation or no RTT sample yet: 0."""
    cc, st = fresh()
    st.srtt_us = 2 * RTT_BASE
    assert cc.cwnd_g(st) == pytest.approx(10.0)
    cs, sst = fresh(cwnd_g_rtt="srtt")
    assert cs.cwnd_g(sst) == pytest.approx(10.0)         # no srtt yet: rtt_base
    sst.srtt_us = 2 * RTT_BASE
    assert cs.cwnd_g(sst) == pytest.approx(20.0)
    none, nst = fresh(rate=0.0)
    assert none.cwnd_g(nst) == 0.0
    early = Gtcp(rate_g_bps=RATE_G)
    est = CcState(mss_bytes=MSS)
    early.on_init(est)
    assert early.cwnd_g(est) == 0.0


@pytest.mark.parametrize("sack,timeouts", [(False, 2), (True, 1)])
def test_forced_new_data_in_timeout_recovery_does_not_cut_the_resending_short(sack, timeouts):
    """Two segments lost twice each (the original and its first resend): after the
    timeout, GTCP's forced segments go out at snd_max while the transport goes on
    resending from snd_una (without SACK, go-back-N) or the holes (with SACK), so
    each loss costs no timeout beyond what the dropped resends force: with SACK one
    (the second hole is resent from the scoreboard), without it two (the walk's
    resend of the second segment is dropped as well). Were the forced segments to
    move the walk to snd_max, the second loss would wait for one more timeout."""
    from hosts.sim.channel import LinkModel, Simulation
    from hosts.transport.sender import SenderConfig
    from hosts.transport.source import PatternSource, pattern_bytes
    from hosts.transport.wire import F_DATA, TransportHeader
    drops = {300 * MSS: 0, 310 * MSS: 0}

    def drop(t, pkt):
        h = TransportHeader.unpack(pkt)
        if h.flags & F_DATA and h.seq in drops and drops[h.seq] < 2:
            drops[h.seq] += 1
            return True
        return False

    sim = Simulation(LinkModel(delay_us=20_000, rate_bps=10e6, queue_packets=300, drop_if=drop),
                     LinkModel(delay_us=20_000), seed=1)
    s = sim.add_flow(Gtcp(rate_g_bps=6e6, initial_ssthresh=40), PatternSource(1500 * MSS, MSS),
                     config=SenderConfig(mss_bytes=MSS, sack=sack))
    sim.run(until_us=60_000_000)
    assert s.state.value == "done" and bytes(sim.sink_of(s).data) == pattern_bytes(0, 1500 * MSS)
    assert drops == {300 * MSS: 2, 310 * MSS: 2} and s.forced_segments > 0
    assert s.timeouts == timeouts


@pytest.mark.parametrize("kw,message", [
    ({"rate_g_bps": -1.0}, "rate_g_bps must be >= 0, got -1.0"),
    ({"rate_g_bps": 1e6, "initial_ssthresh": 0.0}, "initial_ssthresh must be > 0, got 0.0"),
    ({"rate_g_bps": 1e6, "cwnd_g_rtt": "min"}, "cwnd_g_rtt must be 'base' (the paper's rtt_base) or 'srtt', got 'min'"),
])
def test_bad_parameters_are_refused_with_the_rule(kw, message):
    with pytest.raises(ValueError) as err:
        Gtcp(**kw)
    assert str(err.value) == message


def test_a_fresh_flow_logs_no_recovery_and_accepts_the_smallest_threshold():
    """Before any loss the log shows the open phase, nothing forced and the
    best-effort part as cwnd - cwnd_G; a threshold just above 0 is accepted."""
    cc, st = fresh()
    st.cwnd = 14.0
    cc.on_ack(st, ack())
    assert st.extra["phase"] == "open" and st.extra["forced"] == 0.0
    assert st.extra["cwnd_be"] == pytest.approx(st.cwnd - 10.0)
    assert cc.fr_active is False and cc.to_active is False and cc.cwnd_update is None
    assert Gtcp(rate_g_bps=1e6, initial_ssthresh=0.5).initial_ssthresh == 0.5


def test_gtcp_without_a_reservation_by_default():
    """`--algo gtcp` with no reserved rate is NewReno (rate_G = 0 disables GTCP's rules)."""
    cc = Gtcp()
    assert cc.rate_g_bps == 0.0 and not cc.enabled and cc.cwnd_g_rtt == "base"
