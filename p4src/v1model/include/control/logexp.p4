/* -*- P4_16 -*- */
/*
 * bwn (v1model): base-2 logarithms and exponentials without a multiplier, for
 * XCP's and RCP's products and quotients (control/xcp.p4, control/rcp.p4;
 * docs/dataplane.md, "Logarithms and exponentials"). controller/xr_math.py's
 * log7() and exp7() are the reference model, bit for bit; the tables are
 * constants of the program (shared/logexp_tables.p4, generated from it).
 *
 *   Log7: l = round(128 log2(x)) of an unsigned 64-bit x (LOG7_ZERO for 0): the
 *         leading one's position k (an lpm table, one entry per bit, whose
 *         action shifts x by the constant that leaves LOG_MANTISSA_BITS + 1
 *         bits below it), the mantissa m rounded to LOG_MANTISSA_BITS bits
 *         (256 .. 512), then l = 128 k + frac(m) (an exact table).
 *   Exp7: v = 2^(l / 128) rounded, 0 below 0.5 and saturated from 2^49: the
 *         mantissa 2^(f / 128) * 2^15 of the fraction f = l & 127 (an exact
 *         table on l[6:0]), shifted by the octave e = l >> 7 (an exact table on
 *         l[14:7], e's low 8 bits, whose action is that constant shift,
 *         rounding when it is to the right); l is within [-128, 6272) there.
 *
 * Each use is an instance of its own (a table is applied once per packet); the
 * instances share the scratch header logexp_t (include/header.p4), which no
 * value outlives.
 */
#ifndef __BWN_V1MODEL_LOGEXP__
#define __BWN_V1MODEL_LOGEXP__

#include "../../../shared/logexp_tables.p4"

control Log7(in bit<64> x, out int<32> l, inout logexp_t s) {

    /* The leading one at bit K: keep the LOG_MANTISSA_BITS + 1 bits from it down. */
#define NORM_DOWN(K) action norm_##K() { s.wide = x >> (K - LOG_MANTISSA_BITS - 1); s.log_base = K * 128; }
#define NORM_UP(K)   action norm_##K() { s.wide = x << (LOG_MANTISSA_BITS + 1 - K); s.log_base = K * 128; }
    NORM_UP(0)    NORM_UP(1)    NORM_UP(2)    NORM_UP(3)    NORM_UP(4)
    NORM_UP(5)    NORM_UP(6)    NORM_UP(7)    NORM_UP(8)    NORM_UP(9)
    NORM_DOWN(10) NORM_DOWN(11) NORM_DOWN(12) NORM_DOWN(13) NORM_DOWN(14)
    NORM_DOWN(15) NORM_DOWN(16) NORM_DOWN(17) NORM_DOWN(18) NORM_DOWN(19)
    NORM_DOWN(20) NORM_DOWN(21) NORM_DOWN(22) NORM_DOWN(23) NORM_DOWN(24)
    NORM_DOWN(25) NORM_DOWN(26) NORM_DOWN(27) NORM_DOWN(28) NORM_DOWN(29)
    NORM_DOWN(30) NORM_DOWN(31) NORM_DOWN(32) NORM_DOWN(33) NORM_DOWN(34)
    NORM_DOWN(35) NORM_DOWN(36) NORM_DOWN(37) NORM_DOWN(38) NORM_DOWN(39)
    NORM_DOWN(40) NORM_DOWN(41) NORM_DOWN(42) NORM_DOWN(43) NORM_DOWN(44)
    NORM_DOWN(45) NORM_DOWN(46) NORM_DOWN(47) NORM_DOWN(48) NORM_DOWN(49)
    NORM_DOWN(50) NORM_DOWN(51) NORM_DOWN(52) NORM_DOWN(53) NORM_DOWN(54)
    NORM_DOWN(55) NORM_DOWN(56) NORM_DOWN(57) NORM_DOWN(58) NORM_DOWN(59)
    NORM_DOWN(60) NORM_DOWN(61) NORM_DOWN(62) NORM_DOWN(63)
#undef NORM_DOWN
#undef NORM_UP

    action log_of_zero() {
        l = LOG7_ZERO;
    }

    table msb {
        key = { x : lpm; }
        actions = {
            norm_0;  norm_1;  norm_2;  norm_3;  norm_4;  norm_5;  norm_6;  norm_7;
            norm_8;  norm_9;  norm_10; norm_11; norm_12; norm_13; norm_14; norm_15;
            norm_16; norm_17; norm_18; norm_19; norm_20; norm_21; norm_22; norm_23;
            norm_24; norm_25; norm_26; norm_27; norm_28; norm_29; norm_30; norm_31;
            norm_32; norm_33; norm_34; norm_35; norm_36; norm_37; norm_38; norm_39;
            norm_40; norm_41; norm_42; norm_43; norm_44; norm_45; norm_46; norm_47;
            norm_48; norm_49; norm_50; norm_51; norm_52; norm_53; norm_54; norm_55;
            norm_56; norm_57; norm_58; norm_59; norm_60; norm_61; norm_62; norm_63;
            log_of_zero;
        }
        const entries = { LOG7_MSB_ENTRIES }
        default_action = log_of_zero();      /* x = 0 */
    }

    /* The mantissa, rounded: it may carry to 2 * 256 (the next octave, frac 128). */
    action round_mantissa() {
        s.log_m = (bit<16>)((s.wide + 1) >> 1);
    }

    action frac(int<32> f) {
        l = s.log_base + f;
    }

    table mant {
        key = { s.log_m : exact @name("m"); }
        actions = { frac; }
        const entries = { LOG7_FRAC_ENTRIES(frac) }
        default_action = frac(0);
    }

    apply {
        l = LOG7_ZERO;      /* log_of_zero's value, so that every path sets l */
        if (msb.apply().hit) {
            round_mantissa();
            mant.apply();
        }
    }
}

control Exp7(in int<32> l, out bit<64> v, inout logexp_t s) {

    action set_mantissa(bit<64> m) {
        s.exp_m = m;
    }

    table mant {
        key = { l[6:0] : exact @name("f"); }
        actions = { set_mantissa; }
        const entries = { EXP7_MANTISSA_ENTRIES(set_mantissa) }
        default_action = set_mantissa(0);
    }

    /* The octave e: the mantissa (2^15 for 1) shifted by e - 15, rounded to the right. */
#define SHL(K) action shl_##K() { v = s.exp_m << K; }
#define SHR(K) action shr_##K() { v = (s.exp_m + (64w1 << (K - 1))) >> K; }
    SHR(16) SHR(15) SHR(14) SHR(13) SHR(12) SHR(11) SHR(10) SHR(9)
    SHR(8)  SHR(7)  SHR(6)  SHR(5)  SHR(4)  SHR(3)  SHR(2)  SHR(1)
    SHL(0)  SHL(1)  SHL(2)  SHL(3)  SHL(4)  SHL(5)  SHL(6)  SHL(7)
    SHL(8)  SHL(9)  SHL(10) SHL(11) SHL(12) SHL(13) SHL(14) SHL(15)
    SHL(16) SHL(17) SHL(18) SHL(19) SHL(20) SHL(21) SHL(22) SHL(23)
    SHL(24) SHL(25) SHL(26) SHL(27) SHL(28) SHL(29) SHL(30) SHL(31)
    SHL(32) SHL(33)
#undef SHL
#undef SHR

    action exp_zero() {
        v = 0;
    }

    table octave {
        key = { l[14:7] : exact @name("e"); }
        actions = {
            shr_16; shr_15; shr_14; shr_13; shr_12; shr_11; shr_10; shr_9;
            shr_8;  shr_7;  shr_6;  shr_5;  shr_4;  shr_3;  shr_2;  shr_1;
            shl_0;  shl_1;  shl_2;  shl_3;  shl_4;  shl_5;  shl_6;  shl_7;
            shl_8;  shl_9;  shl_10; shl_11; shl_12; shl_13; shl_14; shl_15;
            shl_16; shl_17; shl_18; shl_19; shl_20; shl_21; shl_22; shl_23;
            shl_24; shl_25; shl_26; shl_27; shl_28; shl_29; shl_30; shl_31;
            shl_32; shl_33; exp_zero;
        }
        const entries = { EXP7_OCTAVE_ENTRIES }
        default_action = exp_zero();
    }

    apply {
        if (l < EXP7_LOW) {
            v = 0;
        } else if (l >= EXP7_HIGH) {
            v = 64w0xFFFFFFFFFFFFFFFF;
        } else {
            mant.apply();
            octave.apply();
        }
    }
}

#endif
