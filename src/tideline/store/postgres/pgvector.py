"""pgvector's wire forms: a query vector as a binary parameter, a stored vector read
back as little-endian float32 bytes (what SQLite's ``BLOB`` holds), and the text form.

See :mod:`tideline.store.postgres.connection` for why a ``SELECT`` from ``vectors``
asks for binary results.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

if TYPE_CHECKING:
    import numpy as np

__all__ = ["VectorBinaryLoader", "VectorParam", "VectorTextLoader", "register_loaders",
           "vector_text"]


class VectorBinaryLoader(Loader):
    """pgvector's binary form (int16 dimensions, int16 zero, big-endian float32s) →
    little-endian float32 bytes."""

    format = Format.BINARY

    def load(self, data: Any) -> bytes:
        import numpy as np  # here: a hook that reads no vector must not load numpy

        return np.frombuffer(data, dtype=">f4", offset=4).astype("<f4").tobytes()


class VectorTextLoader(Loader):
    """pgvector's text form (``[0.1,0.2]``, every float32 printed exactly) → the bytes."""

    def load(self, data: Any) -> bytes:
        import numpy as np

        return np.array(bytes(data)[1:-1].split(b","), dtype="<f4").tobytes()


class VectorParam:
    """A query vector sent as a parameter in pgvector's binary form (its text form cost
    ~0.4 ms of client CPU per 384-d vector to print, and the server as long to parse).

    Args:
        vector: the float32 vector.
    """

    __slots__ = ("data",)

    def __init__(self, vector: Any) -> None:
        import numpy as np

        arr = np.ascontiguousarray(vector, dtype=np.float32).ravel()
        # int16 dimensions, int16 unused, big-endian float32s: the same floats exactly.
        self.data = (len(arr).to_bytes(2, "big") + b"\x00\x00"
                     + arr.astype(">f4").tobytes())


class _VectorBinaryDumper(Dumper):
    """:class:`VectorParam` → its bytes, binary, type left to the server (oid 0): every
    statement casts the parameter (``?::vector(384)``), so the server reads it as a
    vector, whatever oid the type has in this database."""

    format = Format.BINARY
    oid = 0

    def dump(self, obj: Any) -> bytes:
        return bytes(obj.data)


psycopg.adapters.register_dumper(VectorParam, _VectorBinaryDumper)  # only our own type


def register_loaders(raw: psycopg.Connection[Any], oid: int | None) -> None:
    """Read this database's ``vector`` type (``oid``) back as bytes on ``raw``, once."""
    if oid is not None and raw.adapters.get_loader(oid, Format.BINARY) is None:
        raw.adapters.register_loader(oid, VectorBinaryLoader)
        raw.adapters.register_loader(oid, VectorTextLoader)


def vector_text(vector: np.ndarray) -> str:
    """pgvector's text form of a float32 vector (exact: float32 values print exactly)."""
    import numpy as np  # here: the connection imports this module, a hook must not load numpy

    arr = np.ascontiguousarray(vector, dtype=np.float32).ravel()
    return "[" + ",".join(map(repr, arr.tolist())) + "]"  # tolist() gives Python floats
