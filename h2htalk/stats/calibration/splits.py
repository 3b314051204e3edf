"""Cross-validation splits by scenario, checked so that no scenario is ever both trained and
tested on. Callers use `splits.group_splits` through the module, so every split (outer folds and
the inner folds that choose C) goes through the one checked function."""

from collections.abc import Iterator

import numpy as np
from sklearn.model_selection import GroupKFold


class LeakError(AssertionError):
    """A cross-validation split put one scenario in both training and test data."""


def group_splits(groups, n_splits: int, seed: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """GroupKFold (shuffled, seeded) train/test index arrays; no group is on both sides
    (checked on every split: LeakError otherwise). n_splits is capped at the number of groups."""
    groups = np.asarray(groups)
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise ValueError("cross-validation needs at least two scenarios")
    splitter = GroupKFold(n_splits=min(n_splits, n_groups), shuffle=True, random_state=seed)
    for train, test in splitter.split(np.zeros(len(groups)), groups=groups):
        if np.intersect1d(groups[train], groups[test]).size:
            raise LeakError("a scenario is in both the training and the test fold")
        yield train, test
