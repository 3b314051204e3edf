"""Calibrating an automatic judge to human pairwise preferences, and judging judges.

Plain functions on arrays and DataFrames; nothing here touches the database. Import the
functions from their modules:
- `data`: votes per comparison, soft targets, the feature-difference matrix, the fingerprint;
- `splits`: the cross-validation splits by scenario, checked for leaks;
- `model`: the calibrated model (C by cross-validation) and the composite's one-slope fit;
- `metrics`: the held-out numbers of one judge and the reliability table;
- `system`: Bradley–Terry strengths from humans and judges, and their rank correlations;
- `cross_validation`: the nested cross-validation of the three judges, their comparison, the
  verdict sentence and the held-out part of an exported document.

The model. For a comparison of response A with response B (A is the canonical side: the
companion with the lower id, as in annotation.models; it is not a screen position),

    P(a human prefers A over B) = σ(b + Σ_k w_k · (Δ_k − mean_k) / scale_k),  Δ_k = f_k(A) − f_k(B)

where f are judge features (reference metrics, LLM rubric scores, length). A feature missing
on either side gives Δ_k = 0 (it says nothing about the pair). Because A/B is only the
canonical order, the model is fitted *antisymmetric*: no intercept (b = 0) and mean_k = 0, so
P(A over B) = 1 − P(B over A) exactly and an identity effect of "the lower-id companion" cannot
leak into the weights. scale_k is the root mean square of Δ_k on the training data (the
standard deviation of the mirrored, ±Δ, data), 1 for a feature that is always 0.

Targets. Every human vote is an outcome: A better = 1, B better = 0, tie = ½. A comparison
with votes (n_A, n_tie, n_B) enters the likelihood as two rows, y = 1 with weight n_A + ½n_tie
and y = 0 with weight n_B + ½n_tie: the fitted p is the probability that one more human prefers
A (ties counting half). The L2 strength C of scikit-learn's LogisticRegression is chosen from
a grid by cross-validated vote-level log-loss with GroupKFold *by scenario* inside the training
data; held-out numbers come from an outer GroupKFold by scenario, so no scenario is ever both
trained and tested on (`group_splits` checks it on every split).

The three judges compared, each giving p = P(A over B) for a comparison:
- raw: the LLM judge's own verdict turned into a probability (single-answer grading:
  σ(mean rubric score of A − mean of B), scale 1; pairwise: the share of its verdicts for A
  over both presentation orders, ties half); it has no parameter, so nothing is fitted;
- composite: the paper's hand-set composite, σ(s · Δcomposite) with the single slope s fitted
  on the training folds only (so it is calibrated as fairly as one parameter allows);
- calibrated: the full model above.

Metrics on held-out predictions (pooled over the outer folds):
- accuracy against the human majority (agreement.majority_labels: plurality of A / tie / B,
  a tied top broken by the summed 5-point preference):
  * without ties: comparisons whose majority is A or B; the judge is right when p is on that
    side of ½; p exactly ½ scores ½ (a coin flip);
  * with ties: all comparisons; the judge says "tie" when |p − ½| ≤ δ, the tie band δ chosen on
    the *training* folds to maximise this accuracy (grid TIE_BANDS); A when p > ½ + δ, B below;
- Cohen's κ between those three-way calls and the majority, on mirrored items (each
  comparison once as (call, majority) and once as (−call, −majority), agreement.pair_kappa):
  with A = the lower companion id and id order following strength, an unmirrored κ collapses
  towards 0 for a good judge because both marginals pile up on one side;
- log-loss and Brier score over votes (each vote an outcome as above, so the Brier score includes
  the humans' own disagreement, the same for every judge);
- expected calibration error: equal-width bins of p (10 by default), the vote-weighted
  |observed share − mean p| per bin, weighted by the bin's share of votes, on mirrored items
  (each comparison as p and as 1 − p with its votes swapped, `mirrored_reliability`, so
  it does not depend on which companion is A); the bins are the data of the reliability
  diagram;
- system level: Bradley–Terry strengths of the companions from the human votes (a tie half a
  win each) and from the judge's held-out probabilities (each comparison p wins for A, 1 − p
  for B: the same comparisons, so both rankings rest on the same design; a judge's mean score
  would instead depend on which scenarios each companion happened to meet), and the Spearman
  and Kendall (τ-b) correlations between the two; undefined (None) with fewer than three
  companions.
"""
