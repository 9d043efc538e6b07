"""Reachability probabilities in a DTMC, with numpy and scipy.

``matrix`` is a square ``scipy.sparse`` matrix whose rows are probability distributions;
``targets`` a boolean vector. The probability of eventually reaching a target, ``x``, is 1 on the
targets, 0 on the states from which no target can be reached (found on the graph, not by
rounding), and on the remaining states ``S?`` the unique solution of ``(I - A) x = b``, where
``A`` is the matrix restricted to ``S?`` and ``b`` the probability of stepping into a target: a
sparse direct solve. The system is non-singular because from every state of ``S?`` a target can
be reached, so the chain leaves ``S?`` with probability 1.

The probability of reaching a target within ``k`` steps is ``k`` sparse matrix-vector products:
``x_0 = [targets]``, ``x_{j+1} = A x_j`` with the targets held at 1.

>>> import numpy as np, scipy.sparse as sp
>>> m = sp.csr_matrix(np.array([[0.5, 0.25, 0.25], [0, 1, 0], [0, 0, 1]]))
>>> eventually(m, np.array([False, True, False])).round(6).tolist()
[0.5, 1.0, 0.0]
>>> within(m, np.array([False, True, False]), [1, 2])[2].round(6).tolist()
[0.375, 1.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve


def can_reach(matrix: Any, targets: np.ndarray) -> np.ndarray:
    """The states from which some target can be reached through positive probabilities
    (the targets included)."""
    backward = sp.csr_matrix(matrix.T, dtype=float)
    backward.eliminate_zeros()
    indptr, indices = backward.indptr, backward.indices
    found = np.array(targets, dtype=bool)
    frontier = list(np.flatnonzero(found))
    while frontier:
        j = frontier.pop()
        for i in indices[indptr[j] : indptr[j + 1]]:
            if not found[i]:
                found[i] = True
                frontier.append(i)
    return found


def eventually(matrix: Any, targets: np.ndarray) -> np.ndarray:
    """P(F target) for every state."""
    matrix = sp.csr_matrix(matrix, dtype=float)
    n = matrix.shape[0]
    x = np.zeros(n)
    x[targets] = 1.0
    maybe = can_reach(matrix, targets) & ~targets
    if maybe.any():
        inner = matrix[maybe][:, maybe]
        b = np.asarray(matrix[maybe][:, targets].sum(axis=1)).ravel()
        system = sp.identity(int(maybe.sum()), format="csc") - inner.tocsc()
        solved = spsolve(system, b)
        x[maybe] = np.clip(np.atleast_1d(solved), 0.0, 1.0)
    return x


def within(matrix: Any, targets: np.ndarray, horizons: list[int]) -> dict[int, np.ndarray]:
    """P(F<=k target) for every state and every horizon ``k``."""
    matrix = sp.csr_matrix(matrix, dtype=float)
    wanted = sorted(set(horizons))
    found: dict[int, np.ndarray] = {}
    x = targets.astype(float)
    if 0 in wanted:
        found[0] = x.copy()
    for step in range(1, (wanted[-1] if wanted else 0) + 1):
        x = matrix @ x
        x[targets] = 1.0
        x = np.clip(x, 0.0, 1.0)
        if step in wanted:
            found[step] = x.copy()
    return found
