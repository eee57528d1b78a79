"""Identities taken from the raw value: idempotency keys, message ids and session ids.

Secret redaction (:mod:`tideline.secrets`) rewrites what it matches into a label such as
``[REDACTED:openai_key]``. Applied to an identifier *before* identity is decided, two
different ids that both match a rule became the same text: a second keyed write replayed
the first one's outcome and its text was never stored, a second turn was skipped as
already stored, two sessions became one (issue 33 item 1).

Identity is therefore decided on the raw value, validated and normalised (NFC, stripped)
but not redacted. What is *stored* must still hold no secret, so an identifier that
redaction would change is stored as its redacted text followed by a digest of the raw
value (:func:`stored_identity`): ``[REDACTED:openai_key]#3f0c…``. Two different raw
values keep two different stored forms; the same raw value always gets the same one.

The digest is a SHA-256 of the raw value under a fixed, versioned domain label, not a
keyed hash with a per-store secret: the stored form is then the same in every store, so
an export imported elsewhere, a migration to PostgreSQL or a restored backup still
recognises the retry of a write or the re-import of a turn (a per-store key would have to
travel with every copy, and whoever holds the copy holds the key anyway). It is only
ever applied to values that matched a secret rule, i.e. high-entropy credentials, whose
digest cannot be searched back. The value an identity is compared with is computed by
the same function, so a stored form never needs to be read back.

An identifier without a secret is stored exactly as before, so the stores written
before this change keep their identities.
"""

from __future__ import annotations

import hashlib
import unicodedata

from tideline.errors import InputTooLarge, InvalidInput
from tideline.secrets import redact_secrets

__all__ = ["IDENTITY_DOMAIN", "clean_identity", "normalise_text", "stored_identity"]

#: The domain label the digest of a redacted identifier is taken under (versioned: a
#: change of formula must come with a migration of the stored forms).
IDENTITY_DOMAIN = "tideline/identity/v1\x1f"
#: Hex digits of the digest kept (128 bits: no two distinct ids of a store share one).
DIGEST_CHARS = 32


def normalise_text(value: object, field: str, cap: int, *, required: bool = False) -> str:
    """Validate one text field and normalise it (NFC, stripped), without redaction.

    Args:
        value: the raw value (must be a ``str`` or ``None``).
        field: the field name, for error messages.
        cap: maximum length in characters after normalisation.
        required: reject empty (whitespace-only) text.

    Returns:
        The NFC-normalised, stripped text.

    Raises:
        InvalidInput: not a string, NUL byte, lone surrogate, or empty when required.
        InputTooLarge: longer than ``cap``.
    """
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInput(f"{field} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{field} contains a lone surrogate at position {exc.start}") from exc
    if len(value) > cap * 4:
        raise InputTooLarge(f"{field} is {len(value)} characters; the cap is {cap}")
    text = unicodedata.normalize("NFC", value).strip()
    if len(text) > cap:
        raise InputTooLarge(f"{field} is {len(text)} characters; the cap is {cap}")
    if required and not text:
        raise InvalidInput(f"{field} must not be empty")
    return text


def stored_identity(raw: str) -> str:
    """The form an already normalised identifier is stored and compared as.

    The raw text itself when it holds no secret; otherwise its redacted text, ``#`` and
    the digest of the raw text. Idempotent: the stored form of a stored form is itself
    (a redaction label matches no rule), so a value that went through it twice is
    still the same identity.
    """
    redacted, _ = redact_secrets(raw)
    if redacted == raw:
        return raw
    digest = hashlib.sha256((IDENTITY_DOMAIN + raw).encode("utf-8")).hexdigest()
    return f"{redacted}#{digest[:DIGEST_CHARS]}"


def clean_identity(value: object, field: str, cap: int) -> str:
    """Validate an identifier (an idempotency key, a message or session id) and return
    the form it is stored and compared as (see :func:`stored_identity`).

    Raises:
        InvalidInput: not text, empty, a NUL byte or a lone surrogate.
        InputTooLarge: longer than ``cap`` (the raw value's length counts).
    """
    return stored_identity(normalise_text(value, field, cap, required=True))
