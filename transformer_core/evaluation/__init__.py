"""Scores of translations and models: BLEU both ways (``bleu``), bootstrap intervals and
paired tests (``significance``), perplexity (``perplexity``), BLEU against training steps
(``curves``)."""
