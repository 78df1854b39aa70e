"""Every plot of the report: the paper's Figures 3-5 from a trained model, the encoder's
self-attention recorded for one sentence and the heads each figure shows (``attention_maps``)
drawn in the paper's style (``draw``); the learning curves (``learning_curves``); dev BLEU
against training steps (``bleu_curves``); and the chart of Table 3's deltas against base
(``table3_deltas``)."""
