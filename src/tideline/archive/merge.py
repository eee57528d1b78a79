"""Importing an archive into a store that already holds rows: identities, new ids, every
reference remapped.

Every store numbers its rows from 1, so a laptop's memory #1 and a team store's #1 are
two memories. An import therefore decides for each archived row whether the store holds
it already, and gives the others ids of their own:

- **Identity from content, never from an id.** A row is "already there" when the store
  holds a row of the same table with the same identity: a memory by (namespace, scope,
  text, time recorded), a turn by (namespace, scope, source, message id), a journal
  event by (namespace, kind, time, memory, data), a profile facet by (namespace, entity,
  facet), and so on (:data:`IDENTITY`). Such a row is skipped and its archived id maps to
  the store's. Each stored row answers for one archived row at most, so two equal
  archived rows stay two. A second import of the same archive, or of a later archive
  of the same store, therefore adds only what is new.
- **Ids kept where free.** A new row keeps its archived id when the store does not use
  it (an archive loads into a fresh store exactly as it was); otherwise it gets the next
  id past both the store's and the archive's highest.
- **Every reference follows.** ``supersedes``, ``source_links``, edges, vectors, write
  keys, keywords, the journal (its ``memory_id`` and the ids inside its data: ``old``,
  ``new``, ``nearest``, ``ids``, ``memory_ids``, ``skipped_turns``, a thread event's
  ``id``), attention, eligibility (its recall event), threads' source memories, topic
  and embedding clusters, the entity graph. A new turn of a session the store already
  holds is placed after that session's last turn. A reference to a row the archive does
  not hold (a forgotten memory) is dropped when it would point at another row of this
  store.
- **The store's own rows win.** A row whose key the store already holds (an edge, a
  write key, a sleep-state value, an entity node) is kept as the store has it. Sleep's
  cursors into another store's ids are not imported into a store that holds rows.

The plan is made inside the import's one write transaction (:meth:`MergePlan.resolve`)
from what :meth:`MergePlan.observe` gathered while the archive was verified; then each
row passes :meth:`MergePlan.transform` on its way into the store.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from tideline.archive.checks import ID_LISTS, REFERENCES

__all__ = ["IDENTITY", "REDACTED_IDENTITY", "MergePlan"]

# Per table with an id: the column candidates are looked up by, and the identity's
# columns ("x#": compared by hash; "x@table": an id of that table, remapped; "data{}":
# the journal's data, remapped and compared as JSON).
IDENTITY: dict[str, tuple[str, tuple[str, ...]]] = {
    "memories": ("recorded_at", ("namespace", "scope", "gesture#", "recorded_at")),
    "turns": ("message_id", ("namespace", "scope", "source", "message_id")),
    "threads": ("created_at", ("namespace", "title", "created_at")),
    "profiles": ("entity", ("namespace", "entity", "facet")),
    "self_concept": ("facet", ("namespace", "facet")),
    "events": ("ts", ("namespace", "kind", "ts", "memory_id@memories", "data{}")),
    "eligibility": ("ts", ("namespace", "recall_id@events", "memory_id@memories", "rank",
                           "ts")),
    "attention_log": ("ts", ("namespace", "memory_id@memories", "tier", "ts")),
    "topic_clusters": ("built_at", ("namespace", "scope", "label", "built_at")),
    "emb_clusters": ("built_at", ("namespace", "scope", "built_at", "centroid#")),
    "retention_snapshots": ("ts", ("namespace", "ts")),
}
#: Tables whose identity holds a text that redaction may change (observed redacted).
REDACTED_IDENTITY = frozenset({"memories", "events", "threads", "topic_clusters",
                               "emb_clusters", "profiles"})
# The order plans are made in: a table's identity uses the maps of those before it.
_ORDER = ("memories", "turns", "threads", "profiles", "self_concept", "events",
          "eligibility", "attention_log", "topic_clusters", "emb_clusters",
          "retention_snapshots")
# Ids inside a journal event's data: key → table.
_EVENT_IDS = {"old": "memories", "new": "memories", "nearest": "memories",
              "ids": "memories", "memory_ids": "memories", "skipped_turns": "turns"}
_REQUIRED_REFS = frozenset({
    ("edges", "src"), ("edges", "dst"), ("write_keys", "memory_id"),
    ("memory_keywords", "memory_id"), ("attention_log", "memory_id"),
    ("eligibility", "recall_id"), ("eligibility", "memory_id"),
    ("topic_members", "cluster_id"), ("topic_members", "memory_id"),
    ("emb_members", "memory_id"), ("emb_members", "cluster_id"),
    ("emb_adjacency", "a"), ("emb_adjacency", "b"),
})
_CHUNK = 400
# The reference columns of each table: [(column, referenced table)].
_REFS_OF: dict[str, list[tuple[str, str]]] = defaultdict(list)
for (_t, _c), _target in REFERENCES.items():
    _REFS_OF[_t].append((_c, _target))
_LISTS_OF: dict[str, list[tuple[str, str]]] = defaultdict(list)
for (_t, _c), _target in ID_LISTS.items():
    _LISTS_OF[_t].append((_c, _target))


def _digest(value: Any) -> str:
    raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _column(spec: str) -> str:
    return spec.rstrip("#{}").split("@")[0]


class MergePlan:
    """Which archived rows a store holds already, and the ids of the others.

    Use: :meth:`observe` every (redacted) archived row while verifying, :meth:`resolve`
    inside the load's transaction, then :meth:`transform` every row on its way in.

    Attributes:
        maps: per table with an id, archived id → id in this store.
        fresh: the store held no memories, turns or journal before the import.
    """

    def __init__(self) -> None:
        self._seen: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self._places: dict[int, tuple[str, str, int]] = {}
        self.maps: dict[str, dict[int, int]] = {}
        self._matched: dict[str, set[int]] = defaultdict(set)
        self._turn_index: dict[int, int] = {}
        self._resolved = False
        self.fresh = True

    # -- gathering -------------------------------------------------------------------

    def observe(self, table: str, row: Mapping[str, Any]) -> None:
        """Remember what identifies one archived row (called while verifying)."""
        spec = IDENTITY.get(table)
        if self._resolved or spec is None or not isinstance(row.get("id"), int):
            return
        probe, cols = spec
        kept: dict[str, Any] = {probe: row.get(probe)}
        for c in cols:
            name = _column(c)
            kept[name] = _digest(row.get(name)) if c.endswith("#") else row.get(name)
        self._seen[table].append((int(row["id"]), kept))
        if table == "turns":
            self._places[int(row["id"])] = (str(row.get("namespace")), str(row.get("session")),
                                            int(row.get("turn_index") or 0))

    # -- references ------------------------------------------------------------------

    def ref(self, table: str, old: Any) -> int | None:
        """The id in this store of an archived id of ``table`` (None: not there)."""
        if not isinstance(old, int) or isinstance(old, bool):
            return None
        got = self.maps.get(table, {}).get(old)
        if got is not None:
            return got
        # Not in the archive: in a fresh store nothing else can hold that id.
        return old if self.fresh else None

    def _ids(self, table: str, ids: Any) -> Any:
        if not isinstance(ids, list):
            return ids
        out = [self.ref(table, i) for i in ids]
        return [i for i in out if i is not None]

    def _event_data(self, kind: Any, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for key, table in _EVENT_IDS.items():
            if key in out:
                v = out[key]
                out[key] = self._ids(table, v) if isinstance(v, list) else (
                    self.ref(table, v) if isinstance(v, int) and not isinstance(v, bool) else v)
        if kind == "thread" and isinstance(out.get("id"), int):
            out["id"] = self.ref("threads", out["id"])
        return out

    def _key(self, table: str, values: Mapping[str, Any], archived: bool) -> tuple[Any, ...]:
        key: list[Any] = []
        for c in IDENTITY[table][1]:
            name = _column(c)
            v = values.get(name)
            if "@" in c and archived:
                v = self.ref(c.split("@")[1], v)
            elif c.endswith("{}"):
                try:
                    parsed = json.loads(v) if isinstance(v, str) else v
                except ValueError:
                    parsed = v
                if archived:
                    parsed = self._event_data(values.get("kind"), parsed)
                v = _canonical(parsed)
            elif c.endswith("#") and not archived:
                v = _digest(v)
            key.append(v)
        return tuple(key)

    # -- planning --------------------------------------------------------------------

    def resolve(self, c: Any) -> None:
        """Look the archived rows up in the store and give the new ones ids.

        Args:
            c: the load's connection (portable SQL, ``?`` placeholders), inside its
                write transaction and before any row is loaded.
        """
        self.fresh = not any(
            c.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone()  # noqa: S608 - fixed names
            for t in ("memories", "turns", "events"))
        for table in _ORDER:
            self._resolve_table(c, table)
        self._place_turns(c)
        self._resolved = True
        self._seen.clear()

    def _candidates(self, c: Any, table: str, probes: Sequence[Any]) -> dict[tuple[Any, ...],
                                                                              list[int]]:
        probe, cols = IDENTITY[table]
        names = list(dict.fromkeys(_column(x) for x in cols))
        found: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        for start in range(0, len(probes), _CHUNK):
            chunk = list(probes[start:start + _CHUNK])
            marks = ", ".join("?" * len(chunk))
            rows = c.execute(
                f"SELECT id, {', '.join(names)} FROM {table} "  # noqa: S608 - fixed names
                f"WHERE {probe} IN ({marks})", chunk).fetchall()
            for row in rows:
                values = {n: (bytes(v) if isinstance(v, memoryview) else v)
                          for n, v in zip(names, row[1:], strict=True)}
                found[self._key(table, values, archived=False)].append(int(row[0]))
        for ids in found.values():
            ids.sort()
        return found

    def _taken(self, c: Any, table: str, ids: Sequence[int]) -> set[int]:
        taken: set[int] = set()
        for start in range(0, len(ids), _CHUNK):
            chunk = list(ids[start:start + _CHUNK])
            marks = ", ".join("?" * len(chunk))
            taken.update(int(r[0]) for r in c.execute(
                f"SELECT id FROM {table} WHERE id IN ({marks})", chunk).fetchall())  # noqa: S608
        return taken

    def _resolve_table(self, c: Any, table: str) -> None:
        seen = sorted(self._seen.get(table, ()), key=lambda x: x[0])
        mapping: dict[int, int] = {}
        self.maps[table] = mapping
        if not seen:
            return
        probe = IDENTITY[table][0]
        probes = list(dict.fromkeys(v[probe] for _, v in seen if v[probe] is not None))
        found = {} if self.fresh else self._candidates(c, table, probes)
        new: list[int] = []
        for old, values in seen:
            held = found.get(self._key(table, values, archived=True))
            if held:
                mapping[old] = held.pop(0)
                self._matched[table].add(old)
            else:
                new.append(old)
        taken = set() if self.fresh else self._taken(c, table, new)
        top = c.execute(f"SELECT max(id) FROM {table}").fetchone()[0]  # noqa: S608
        nxt = max(int(top or 0), seen[-1][0]) + 1
        for old in new:
            if old in taken:
                mapping[old] = nxt
                nxt += 1
            else:
                mapping[old] = old

    def _place_turns(self, c: Any) -> None:
        """A new turn of a session the store holds goes after that session's last turn."""
        if self.fresh:
            return
        sessions: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        for old, (ns, session, index) in self._places.items():
            if old not in self._matched["turns"]:
                sessions[(ns, session)].append((index, old))
        for (ns, session), turns in sessions.items():
            last = c.execute("SELECT max(turn_index) FROM turns WHERE namespace = ? AND "
                             "session = ?", (ns, session)).fetchone()[0]
            if last is None:
                continue
            for n, (_, old) in enumerate(sorted(turns)):
                self._turn_index[old] = int(last) + 1 + n

    # -- rows ------------------------------------------------------------------------

    def id_map(self) -> dict[str, dict[str, int]]:
        """Archived id → id in this store, for memories and turns (JSON keys are text)."""
        return {t: {str(k): v for k, v in self.maps.get(t, {}).items()}
                for t in ("memories", "turns")}

    def remapped(self) -> dict[str, int]:
        """How many archived ids became another id, per table."""
        out = {t: sum(1 for k, v in m.items() if k != v) for t, m in self.maps.items()}
        return {t: n for t, n in out.items() if n}

    def is_matched(self, table: str, old: int) -> bool:
        """Whether the archived row ``old`` of ``table`` is one the store held already."""
        return old in self._matched.get(table, ())

    def vector_key(self, space: str, old: int) -> int | None:
        """The key in this store of an archived vector (None: leave it out)."""
        table = "memories" if space.startswith("m:") else "turns"
        if self.is_matched(table, old):
            return None  # the store's row has its own vector (or will get one)
        return self.ref(table, old)

    def transform(self, table: str, row: dict[str, Any]) -> dict[str, Any] | None:
        """``row`` with its id and references in this store's ids; None to skip it (the
        store holds it already, or it refers to a row that is not there)."""
        out = dict(row)
        rid = row.get("id")
        if table in IDENTITY and isinstance(rid, int):
            if self.is_matched(table, rid):
                return None
            out["id"] = self.ref(table, rid)
        if table == "vectors":
            key = self.vector_key(str(row.get("space")), int(row["key"]))
            if key is None:
                return None
            out["key"] = key
            return out
        if table == "sleep_state" and not self.fresh and str(row.get("key", "")).endswith(
                "cursor"):
            return None  # a cursor into the other store's ids: this store keeps its own
        if table == "turns" and isinstance(rid, int) and rid in self._turn_index:
            out["turn_index"] = self._turn_index[rid]
        for col, target in _REFS_OF.get(table, ()):
            if row.get(col) is None:
                continue
            new = self.ref(target, row[col])
            if new is None and (table, col) in _REQUIRED_REFS:
                return None
            out[col] = new
        for col, target in _LISTS_OF.get(table, ()):
            if isinstance(row.get(col), str):
                out[col] = self._rewrite_json(row[col], lambda v, tg=target: self._ids(tg, v))
        if table == "events" and isinstance(row.get("data"), str):
            out["data"] = self._rewrite_json(
                row["data"], lambda v: self._event_data(row.get("kind"), v))
        return out

    @staticmethod
    def _rewrite_json(text: str, fix: Any) -> str:
        try:
            parsed = json.loads(text)
        except ValueError:
            return text
        fixed = fix(parsed)
        # Unchanged ids keep the text as it was, byte for byte (an archive's digest).
        return text if fixed == parsed else json.dumps(fixed, ensure_ascii=False)
