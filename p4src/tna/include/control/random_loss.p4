/* -*- P4_16 -*- */
/*
 * bwn (TNA): random loss at an egress port: drop when the route's 16-bit
 * draw (Routing: the RNG reaches an action through its table) is below the
 * top 16 bits of the threshold round(p * 2^32): a resolution of 2^-16
 * (README.md; BMv2: 2^-32). A lost packet still counts in the port's BR.
 */
#ifndef __BWN_TNA_RANDOM_LOSS__
#define __BWN_TNA_RANDOM_LOSS__

control RandomLoss(inout ingress_metadata_t ig_md) {

    /* Non-zero <=> draw < threshold: a saturating subtraction, since a
     * gateway compares a field with a constant only. */
    action loss_margin() {
        ig_md.loss_margin = ig_md.loss_threshold |-| ig_md.loss_draw;
    }

    action drop_random_loss() {
        ig_md.drop_reason = DROP_RANDOM_LOSS;
        ig_md.drop = 1;
    }

    apply {
        loss_margin();
        if (ig_md.loss_margin != 0) {
            drop_random_loss();
        }
    }
}

#endif
