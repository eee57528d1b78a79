"""make_embedder, embedder_from_marker, markers and profiles."""

from __future__ import annotations

import dataclasses

import pytest

from tideline.embed import (
    PROFILES,
    E5Embedder,
    HashingEmbedder,
    HttpEmbedder,
    ThresholdProfile,
    embedder_from_marker,
    make_embedder,
    parse_marker,
    profile_for,
)
from tideline.errors import EmbedderError, InvalidInput

ENV = (
    "TIDELINE_EMBED_URL",
    "TIDELINE_EMBED_MODEL",
    "TIDELINE_EMBED_API_KEY",
    "TIDELINE_EMBED_QUERY_PREFIX",
    "TIDELINE_EMBED_PASSAGE_PREFIX",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def test_make_embedder_by_name() -> None:
    assert isinstance(make_embedder(), E5Embedder)
    assert isinstance(make_embedder("E5 "), E5Embedder)
    assert make_embedder("e5", dim=384, model="multilingual-e5-small-q4").dim == 384
    h = make_embedder("hashing", dim=128)
    assert isinstance(h, HashingEmbedder)
    assert h.marker == "hashing:hashing-v1/128"
    assert make_embedder("hashing").dim == 384
    http = make_embedder("http", url="http://127.0.0.1:9", model="m", api_key="k", dim=16)
    assert isinstance(http, HttpEmbedder)
    assert http.marker == "http:m/16"


def test_make_embedder_rejects() -> None:
    for name in ("bert", "", "openai"):
        with pytest.raises(InvalidInput, match="unknown embedder"):
            make_embedder(name)
    with pytest.raises(InvalidInput):
        make_embedder("e5", dim=768)
    with pytest.raises(InvalidInput):
        make_embedder("e5", model="e5-large")
    with pytest.raises(InvalidInput):
        make_embedder("hashing", model="other")
    with pytest.raises(InvalidInput, match="TIDELINE_EMBED_URL"):
        make_embedder("http", model="m")
    with pytest.raises(InvalidInput, match="TIDELINE_EMBED_MODEL"):
        make_embedder("http", url="http://127.0.0.1:9")


def test_make_http_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDELINE_EMBED_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TIDELINE_EMBED_MODEL", "bge-m3")
    monkeypatch.setenv("TIDELINE_EMBED_API_KEY", "secret-key")
    monkeypatch.setenv("TIDELINE_EMBED_QUERY_PREFIX", "query: ")
    emb = make_embedder("http", dim=1024)
    assert isinstance(emb, HttpEmbedder)
    assert emb.endpoint == "http://127.0.0.1:9/v1/embeddings"
    assert emb.model == "bge-m3"
    assert emb.query_prefix == "query: "
    assert emb.passage_prefix == ""
    assert "secret-key" not in repr(emb)
    # explicit arguments win over the environment
    assert make_embedder("http", model="other", dim=3).marker == "http:other/3"


def test_markers_round_trip(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_marker("hashing:hashing-v1/384") == ("hashing", "hashing-v1", 384)
    assert parse_marker("http:BAAI/bge-m3/1024") == ("http", "BAAI/bge-m3", 1024)
    assert parse_marker("http:nomic-embed-text:latest/768") == (
        "http",
        "nomic-embed-text:latest",
        768,
    )
    for bad in ("", "hashing", "hashing:/384", "hashing:x/0", "hashing:x/abc", "x:y"):
        with pytest.raises(InvalidInput):
            parse_marker(bad)

    h = embedder_from_marker("hashing:hashing-v1/256")
    assert isinstance(h, HashingEmbedder) and h.dim == 256
    e = embedder_from_marker("e5:multilingual-e5-small-q4/384")
    assert isinstance(e, E5Embedder)
    assert e.marker == "e5:multilingual-e5-small-q4/384"

    with pytest.raises(EmbedderError, match="TIDELINE_EMBED_URL"):
        embedder_from_marker("http:BAAI/bge-m3/1024")
    monkeypatch.setenv("TIDELINE_EMBED_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("TIDELINE_EMBED_MODEL", "ignored-the-marker-wins")
    http = embedder_from_marker("http:BAAI/bge-m3/1024")
    assert isinstance(http, HttpEmbedder)
    assert http.marker == "http:BAAI/bge-m3/1024"  # no request made: dim from the marker

    for unknown in (
        "hashing:hashing-v2/384",
        "e5:e5-large/1024",
        "e5:multilingual-e5-small-q4/768",
        "sbert:all-minilm/384",
        "hashing:hashing-v1/4",
    ):
        with pytest.raises(EmbedderError):
            embedder_from_marker(unknown)


def test_profiles() -> None:
    assert set(PROFILES) >= {"hashing", "e5", "http-default"}
    for p in PROFILES.values():
        assert 1 >= p.same >= p.related
        assert p.abstain >= p.floor >= -1
    assert profile_for("e5", "multilingual-e5-small-q4") is PROFILES["e5"]
    assert profile_for("hashing", "hashing-v1") is PROFILES["hashing"]
    assert profile_for("http", "intfloat/multilingual-e5-large") is PROFILES["e5"]
    assert profile_for("http", "text-embedding-3-small") is PROFILES["http-default"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROFILES["e5"].same = 0.5  # type: ignore[misc]
    with pytest.raises(InvalidInput):
        ThresholdProfile(same=0.5, related=0.9, abstain=0.3, floor=0.1)
    with pytest.raises(InvalidInput):
        ThresholdProfile(same=0.9, related=0.5, abstain=0.1, floor=0.3)
    with pytest.raises(InvalidInput):
        ThresholdProfile(same=1.5, related=0.5, abstain=0.3, floor=0.1)


def test_profile_is_per_instance() -> None:
    """Tests and callers may override one embedder's profile without touching others."""
    a, b = HashingEmbedder(), HashingEmbedder()
    a.profile = ThresholdProfile(same=0.9, related=0.55, abstain=0.35, floor=0.1)
    assert b.profile is PROFILES["hashing"]
