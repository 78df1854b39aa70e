"""The paper's tables and figures from the pipeline's results, beside the paper's numbers
(``transformer_core.paper``): Tables 2 and 3 (``translation``) with Table 3's deltas
(``deltas``), Table 4 (``table4``), parameter counts (``params``), CSV and markdown
(``markdown``), the evaluation sets a table measured (``evaluation_sets``), Figures 3-5
(``attention_maps``, ``figures``) and the report (``report``)."""
