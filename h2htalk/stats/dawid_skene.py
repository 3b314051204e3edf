"""Dawid–Skene (1979) label aggregation by EM, in numpy.

Each annotator w has a confusion matrix π_w[t, o] = P(w says o | true class t) and the classes
have a prior p. EM alternates the posterior of every unit's true class (E-step) with the
confusion matrices and prior that maximise the expected likelihood (M-step). It starts, like
crowd-kit's `DawidSkene`, from the majority-vote shares, so with equal confusion matrices it
reduces to a majority vote; a reliable annotator weighs more, a random one (always-left in a
randomised layout) weighs almost nothing, and a systematic one (A/B swapped) is read backwards.

Input is long: one row per vote (unit, worker, label). Work is O(votes × classes²) per
iteration with `np.bincount`, so 100,000 votes take well under a second.
"""

from dataclasses import dataclass

import numpy as np
import pandas as pd

EPS = 1e-10  # floor for confusion entries and the prior, as in crowd-kit


@dataclass
class DawidSkeneFit:
    """A fitted model. Rows of `posterior` follow `units`; classes follow `classes`."""

    units: np.ndarray  # unit ids, sorted
    workers: np.ndarray  # worker ids, sorted
    classes: np.ndarray  # class values, sorted
    posterior: np.ndarray  # units × classes: P(true class | all votes)
    labels: np.ndarray  # most probable class value per unit (first class on exact ties)
    confusion: np.ndarray  # workers × true × observed; each [w, t, :] sums to 1
    prior: np.ndarray  # classes
    log_likelihood: float  # marginal log-likelihood of the votes at the fitted parameters
    n_iter: int
    converged: bool

    def frame(self) -> pd.DataFrame:
        """Posterior per unit (one column per class) and the label, indexed by unit."""
        table = pd.DataFrame(self.posterior, index=self.units, columns=list(self.classes))
        table["label"] = self.labels
        return table

    def confusion_frame(self, worker) -> pd.DataFrame:
        """One worker's confusion matrix: rows = true class, columns = the class they gave."""
        index = int(np.searchsorted(self.workers, worker))
        if index >= len(self.workers) or self.workers[index] != worker:
            raise KeyError(worker)
        return pd.DataFrame(
            self.confusion[index], index=list(self.classes), columns=list(self.classes)
        )

    def accuracy(self) -> pd.Series:
        """Per worker: Σ_t prior_t · π_w[t, t], the chance their vote equals the truth."""
        diagonal = np.einsum("wtt->wt", self.confusion)
        return pd.Series(diagonal @ self.prior, index=self.workers, name="ds_accuracy")


def _m_step(unit, worker, label, posterior, n_workers, n_classes, mirrored=False):
    """Confusion matrices and prior from the current posteriors (symmetric when mirrored)."""
    cells = worker * n_classes + label
    confusion = np.empty((n_workers, n_classes, n_classes))
    for t in range(n_classes):
        weight = posterior[unit, t]
        order = np.lexsort((weight, cells))  # each cell's weights summed smallest first
        counts = np.bincount(cells[order], weights=weight[order], minlength=n_workers * n_classes)
        confusion[:, t, :] = counts.reshape(n_workers, n_classes)
    confusion = np.clip(confusion, EPS, None)
    confusion /= confusion.sum(axis=2, keepdims=True)
    prior = np.clip(np.sort(posterior, axis=0).mean(axis=0), EPS, None)
    if mirrored:
        confusion = (confusion + confusion[:, ::-1, ::-1]) / 2
        prior = (prior + prior[::-1]) / 2
    return confusion, prior / prior.sum()


def _e_step(unit, worker, label, confusion, prior, n_units):
    """Posteriors and the marginal log-likelihood (log-space, shifted per row)."""
    n_classes = len(prior)
    votes = np.log(confusion[worker, :, label])  # votes × true classes
    log_joint = np.tile(np.log(prior), (n_units, 1))
    for t in range(n_classes):
        log_joint[:, t] += np.bincount(unit, weights=votes[:, t], minlength=n_units)
    top = log_joint.max(axis=1, keepdims=True)
    scaled = np.exp(log_joint - top)
    total = scaled.sum(axis=1, keepdims=True)
    log_likelihood = float(np.sort((np.log(total) + top).ravel()).sum())
    return scaled / total, log_likelihood


def _encode(units, workers, labels, classes):
    """Votes as integer codes, in a canonical order (by unit, then worker and label).

    With every sum also taken in an order fixed by the values (see _m_step), renumbering units
    or listing the votes in another order changes no bit of the fit: on small data EM's path
    is sensitive enough that rounding noise alone could lead it to a different optimum of
    equal likelihood.
    """
    unit_ids, unit = np.unique(np.asarray(units), return_inverse=True)
    worker_ids, worker = np.unique(np.asarray(workers), return_inverse=True)
    values = np.asarray(labels)
    if len(values) == 0:
        raise ValueError("no votes to aggregate")
    classes = np.unique(values if classes is None else np.asarray(classes))
    label = np.minimum(np.searchsorted(classes, values), len(classes) - 1)
    if (classes[label] != values).any():
        raise ValueError("labels outside `classes`")
    canonical = np.lexsort((label, worker, unit))
    return unit_ids, unit[canonical], worker_ids, worker[canonical], classes, label[canonical]


def fit(
    units,
    workers,
    labels,
    classes=None,
    max_iter: int = 100,
    tol: float = 1e-7,
    mirrored: bool = False,
) -> DawidSkeneFit:
    """Fit Dawid–Skene to votes (parallel sequences: unit id, worker id, label).

    `mirrored`: the votes hold every unit twice, once with its classes reversed (A/tie/B read
    from either side). The parameters are then kept symmetric under that reversal, so a unit
    and its mirror get mirrored posteriors; otherwise EM can drift, from rounding alone, to an
    equally likely solution that favours one side, and which side would depend on the order of
    the units.

    `classes` fixes the label set (sorted; default: the labels seen); a class
    nobody used keeps a near-zero prior. Stops when the log-likelihood per vote improves by
    less than `tol`, or after `max_iter` EM rounds (`converged` says which).
    """
    unit_ids, unit, worker_ids, worker, classes, label = _encode(units, workers, labels, classes)
    n_units, n_workers, n_classes = len(unit_ids), len(worker_ids), len(classes)

    # Start from the majority-vote shares per unit.
    shares = np.zeros((n_units, n_classes))
    np.add.at(shares, (unit, label), 1.0)
    posterior = shares / shares.sum(axis=1, keepdims=True)
    confusion, prior = _m_step(unit, worker, label, posterior, n_workers, n_classes, mirrored)

    previous = -np.inf
    converged = False
    n_iter = 0
    log_likelihood = -np.inf
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        posterior, log_likelihood = _e_step(unit, worker, label, confusion, prior, n_units)
        confusion, prior = _m_step(unit, worker, label, posterior, n_workers, n_classes, mirrored)
        if (log_likelihood - previous) / len(label) < tol:
            converged = True
            break
        previous = log_likelihood
    posterior, log_likelihood = _e_step(unit, worker, label, confusion, prior, n_units)
    return DawidSkeneFit(
        units=unit_ids,
        workers=worker_ids,
        classes=classes,
        posterior=posterior,
        labels=classes[posterior.argmax(axis=1)],
        confusion=confusion,
        prior=prior,
        log_likelihood=log_likelihood,
        n_iter=n_iter,
        converged=converged,
    )
