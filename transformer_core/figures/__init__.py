"""The paper's Figures 3-5 from a trained model: the encoder's self-attention recorded for one
sentence and the heads each figure shows (``attention_maps``), and the figures drawn in the
paper's style (``draw``)."""
