"""Library warnings stay off a user's terminal: :func:`quiet`, used where a library is called.

scikit-learn warns about data it handles correctly (``ConvergenceWarning``: "Number of
distinct clusters found smaller than n_clusters" when memories embed alike), and such a
line on ``tideline sleep``'s stderr reads like a failure. The filter sits at each call
into the library (not process-wide), so Tideline's own warnings and a host program's
filters are untouched.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

__all__ = ["quiet"]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Drop every warning raised inside the block (the previous filters come back after)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
