"""The calibrated judge's linear decision, numpy only: scoring a release's millions of pairs
needs this, not the fitting (model.py, which loads scikit-learn)."""

import numpy as np


def linear_decision(X, mean, scale, weights, intercept) -> np.ndarray:
    """intercept + Σ_k w_k (X_k − mean_k) / scale_k, summed feature by feature in order (the
    same arithmetic for one pair or many, so exported judges score identically everywhere)."""
    X = np.asarray(X, dtype=float)
    X = np.where(np.isnan(X), 0.0, X)
    z = np.full(X.shape[0], float(intercept))
    for k in range(X.shape[1]):
        z = z + float(weights[k]) * ((X[:, k] - float(mean[k])) / float(scale[k]))
    return z
