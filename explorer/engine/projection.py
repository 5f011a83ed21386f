"""2-D views of vectors: principal component analysis in numpy, for the query–key space plot.

The queries q_t and keys k_i live in the same D-dimensional space (their dot product is the score),
so one projection fitted on both shows where the current query sits among the keys. The projection
goes through the origin by default: a dot product favours keys lying in the query's direction, which
the plot keeps. It is linear and loses dimensions: read it as a sketch, the exact scores are in the
lookup table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Projection:
    """A fitted linear projection x -> (x - mean) @ components.T."""

    mean: np.ndarray  # (D,)
    components: np.ndarray  # (k, D) orthonormal rows, largest variance first
    explained: np.ndarray  # (k,) share of the total variance each component keeps (0..1)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Coordinates (N, k) of the rows of x (N, D)."""
        x = np.asarray(x, dtype=np.float64)
        return (x - self.mean) @ self.components.T


def fit_pca(points: np.ndarray, k: int = 2, centre: bool = True) -> Projection:
    """The k principal directions of the rows of `points` (N, D), with a deterministic sign.

    With `centre=False` the directions pass through the origin (a truncated SVD): the origin stays
    at (0, 0), so a vector's direction from the origin, which a dot product measures, stays visible.
    Fewer than k directions (one point, or D < k) are padded with zero rows, so the result is
    always k-dimensional; each direction's sign makes its largest-magnitude coefficient positive.
    """
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"points must be a non-empty (N, D) array, got shape {x.shape}")
    mean = x.mean(axis=0) if centre else np.zeros(x.shape[1])
    centred = x - mean
    _, sing, vt = np.linalg.svd(centred, full_matrices=False)  # vt (r, D), r = min(N, D)
    total = float((sing ** 2).sum())
    r = min(k, vt.shape[0])
    components = np.zeros((k, x.shape[1]))
    explained = np.zeros(k)
    for j in range(r):
        direction = vt[j]
        if direction[np.argmax(np.abs(direction))] < 0:
            direction = -direction
        components[j] = direction
        explained[j] = (sing[j] ** 2) / total if total > 0 else 0.0
    return Projection(mean, components, explained)


def project_queries_keys(keys: np.ndarray, queries: np.ndarray,
                         centre: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys k_i (S, D) and queries q_t (T, D) in one 2-D plane fitted on both (PCA; through the origin by
    default, so q_t · k_i's geometry, direction and length from the origin, survives the projection).

    Returns (keys_2d (S, 2), queries_2d (T, 2), explained (2,)): `explained` is each direction's share of
    the total (uncentred) sum of squares."""
    keys = np.asarray(keys, dtype=np.float64)
    queries = np.asarray(queries, dtype=np.float64)
    projection = fit_pca(np.concatenate([keys, queries], axis=0), 2, centre=centre)
    return projection.apply(keys), projection.apply(queries), projection.explained
