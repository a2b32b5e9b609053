/* -*- P4_16 -*- */
/*
 * bwn (v1model): random loss at an egress port, for the papers' lossy links
 * (SARBE, DFT): drop when a uniform 32-bit draw is below the route's threshold
 * round(p * 2^32), a resolution of 2.3e-10 (docs/dataplane.md, "Random loss").
 * A lost packet still counts as received in the port's BR (the loss models
 * the link after the switch), and under its own drop reason.
 */
#ifndef __BWN_V1MODEL_RANDOM_LOSS__
#define __BWN_V1MODEL_RANDOM_LOSS__

control RandomLoss(inout local_metadata_t meta) {

    action draw_loss() {
        random(meta.loss_draw, 32w0, 32w0xFFFFFFFF);
        if (meta.loss_draw < meta.route.loss_threshold) {
            meta.drop = true;
            meta.drop_reason = DROP_RANDOM_LOSS;
        }
    }

    apply {
        if (meta.route.loss_threshold != 0) {
            draw_loss();
        }
    }
}

#endif
