"""Agreement between human raters of pairwise comparisons, annotator quality, aggregated labels.

Plain functions on a judgments DataFrame (one row per judgment) and on raters × units
matrices; nothing here touches the database. Import the functions from their modules:
- `labels`: the pair-keyed preference, labels and their levels, raters × units matrices, and
  the mirrored reliability data of a label;
- `krippendorff_alpha`: α and its bootstrap intervals (plain and paired units);
- `coefficients`: percent agreement, Cohen's κ (and `pair_kappa`), Fleiss' κ, the rater ×
  rater agreement of a heat map;
- `reliability`: `label_agreement`, the per-label table of every report;
- `annotators`: `annotator_report` and the leave-one-out consensus it rests on;
- `aggregation`: majority and Dawid–Skene labels per comparison.

Judgments columns (missing optional ones leave the statistics that need them empty):
- ``comparison`` (or ``comparison_id``): the unit; ``annotator``: the rater.
- ``preference``: −2..2 keyed by the model pair, negative = response A of the comparison
  better (A's companion has the lower id). Every agreement statistic uses this key, never the
  screen side: "left better" with A on the left and "right better" with A on the right are the
  same label. When ``screen_preference`` and ``left_is_a`` are present too, they are checked
  against it (`check_keying`); without ``preference`` it is derived from them.
- ``screen_preference`` (as shown, negative = left better) and ``left_is_a``: only for
  position bias.
- ``time_on_task_ms``, ``is_gold``, ``gold_preference`` (−1/0/1 keyed by the pair, or NaN).
- ratings as ``a_<dim>`` / ``b_<dim>`` columns (1–5), or a ``ratings`` column of dicts
  ``{"a": {dim: n}, "b": {dim: n}}`` (see `expand_ratings`).

Labels (`rating_matrix`) and the level of measurement α uses for each:
- ``preference5``: the 5-point pair-keyed preference, ordinal;
- ``winner3``: its sign, A (−1) / tie (0) / B (1), nominal;
- ``outcome4``: winner3 with "both unacceptable" (column ``both_unacceptable``; such a
  judgment's preference is the tie point 0, `annotation.rating_details`) as a category of its
  own, nominal; mirrored as A ↔ B with tie and both unacceptable fixed;
- ``rating_<dim>``: a 1–5 rating of a response, interval; its units are the two responses of
  every comparison (A's and B's rating as a unit and its mirror);
- ``a_<dim>``, ``b_<dim>``: a 1–5 rating of response A or B alone, interval (generic matrices
  only: which response is A depends on the numbering, so reports use ``rating_<dim>``);
- ``screen5`` / ``screen3``: the preference *as shown* (left/right). Diagnostics only: agreement
  on these mixes position with preference and is not a reliability figure.

Orientation (the one definition of every chance-corrected figure on preference data). A
comparison has no natural "A": A is only the lower companion id, so any fixed orientation (the
lower id, a hash of the comparison id) makes chance-corrected figures depend on how companions
and comparisons happen to be numbered. With one dominant companion a fixed orientation piles the
labels up on one side, the pooled marginals go lopsided, the chance baseline approaches the
observed agreement and α or κ collapse while raw agreement stays high. So every unit is
*mirrored*: each comparison enters once as its votes v and once as −v (A and B swapped). The
pooled distribution is then symmetric and within-unit disagreement is unchanged, and because
swapping A and B of any comparison only swaps a unit with its mirror, every figure is the same
under any renumbering of companions or comparisons (and under any screen layout). Applied to:
- α at each level (`preference_reliability` / `label_agreement`): the reliability data is the
  raters × 2N matrix [v, −v] (for a 1–5 rating of a response: [rating of A, rating of B], the
  same pairing); the bootstrap resamples comparisons and keeps each with its mirror;
- percent agreement and Fleiss' κ on the same mirrored data (percent agreement is unchanged by
  mirroring; Fleiss' κ gets the symmetric marginals);
- Cohen's κ between two raters or between a judge and the human majority (`pair_kappa`): each
  item once as (x, y) and once as (−x, −y);
- Dawid–Skene labels (`aggregate_labels`): fitted on the mirrored votes.
`alpha`, `alpha_with_ci`, `cohen_kappa`, `percent_agreement` and `fleiss_kappa` stay the
generic textbook coefficients on reliability data as given (they reproduce the published
values); mirroring applies to pair-keyed preference data only.

Krippendorff's α: units (columns) with fewer than two values are not pairable and are dropped;
`n_units` and `n_pairable` count what is left. α is NaN when nothing is pairable or every
pairable value is the same (no variation to agree on). The point estimate comes from the
`krippendorff` package; the bootstrap CI resamples units with replacement, done as a
multinomial reweighting of the distinct unit patterns (value-count rows) with α computed from
the weighted coincidence matrix, which is exact and makes 1,000 draws cost milliseconds.
"""
