"""The paper's tables from the pipeline's results, beside the paper's numbers
(``transformer_core.paper``): Tables 2 and 3 (``translation``) with Table 3's deltas and their
chart (``deltas``), Table 4 (``table4``), parameter counts (``params``), CSV and markdown
(``markdown``), the evaluation sets a table measured (``evaluation_sets``) and the report
(``report``)."""
