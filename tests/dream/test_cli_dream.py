"""``tideline dream`` as a user runs it: real subprocesses, a command provider, exit codes.

The dream runs and the agent's apply run on both backends (tests/backend.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.backend import Backend
from tests.dream.helpers import DEMO

pytestmark = pytest.mark.backends

# A stand-in for `claude -p`: it reads the prompt on stdin and answers each layer from it.
FAKE_LLM = r'''
import json, re, sys
prompt = sys.stdin.read()
if "--- your previous answer ---" in prompt:
    sys.stderr.write("unexpected retry\n"); sys.exit(9)
if "Layer 0 — solidify" in prompt:
    turns = [int(x) for x in re.findall(r"^turn (\d+) ·", prompt, re.M)]
    out = {"memories": [{"gesture": "Atlas load fails because PgBouncer drops idle "
                         "connections; fix tracked as ATL-5542.", "kind": "decision",
                         "source_links": turns[:6], "importance": 4, "emotional": 2,
                         "recurrence": 1, "unresolved": 2}],
           "skipped": [{"source_links": turns[6:], "reason": "later"}]}
elif "Layer 1 — comb" in prompt:
    out = {"weights": [], "conflicts": [], "profiles": [
        {"entity": "Mira", "facet": "impression", "content": "Wants short answers."}],
        "self_concept": [], "threads": []}
elif "Layer 2 — night wander" in prompt:
    out = {"found": False, "note": "nothing tonight"}
else:
    ids = [int(x) for x in re.findall(r"^#(\d+) v\d+", prompt, re.M)]
    out = {"symbols": [{"symbol": s, "memory_ids": ids[:1]} for s in ("bridge", "tide", "key")],
           "story": "A bridge at low tide.", "reflection": "I wait for the water.",
           "importance": 5, "emotional": 3, "recurrence": 1, "unresolved": 2}
print("```json")
print(json.dumps(out))
print("```")
'''


def run(*args: str, store: Path, code: int = 0,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, TIDELINE_EMBEDDER="hashing", **(env or {}))
    for key in [k for k in full if k.startswith("TIDELINE_DREAM_")]:
        if not env or key not in env:
            full.pop(key)
    proc = subprocess.run([sys.executable, "-m", "tideline", *args, "--store", str(store)],
                          capture_output=True, text=True, env=full, timeout=300)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def _setup(tmp_path: Path) -> tuple[Path, str]:
    store = tmp_path / "s"
    atlas = tmp_path / "atlas.jsonl"
    atlas.write_text("".join(line + "\n" for line in DEMO.read_text("utf-8").splitlines()
                             if "atlas" in line), encoding="utf-8")
    run("turns", "import", str(atlas), "--scope", "atlas", "--json", store=store)
    script = tmp_path / "fake_llm.py"
    script.write_text(FAKE_LLM, encoding="utf-8")
    return store, f"{sys.executable} {script}"


def test_dream_with_a_command_provider(tmp_path: Path, backend: Backend) -> None:
    store, cmd = _setup(tmp_path)
    dry = run("dream", "--provider", "command", "--command", cmd, "--layers", "solidify",
              "--dry-run", store=store)
    assert "dry run — nothing was changed" in dry.stdout and "+ new new decision@atlas" in \
        dry.stdout
    assert json.loads(run("introspect", "--json", store=store).stdout)["memories"] == 0

    out = run("dream", "--provider", "command", "--command", cmd, "--no-sleep", "--json",
              store=store)
    result = json.loads(out.stdout)
    assert [r["layer"] for r in result["layers"]] == ["solidify", "comb", "wander", "dream"]
    # One memory is too few to wander among: that layer has nothing to do and costs nothing.
    assert [r["status"] for r in result["layers"]] == ["applied", "applied", "empty", "applied"]
    assert result["provider"] == "command" and result["tokens_in"] > 0
    solid = result["layers"][0]["changes"][0]
    shown = json.loads(run("show", str(solid["id"]), "--scope", "atlas", "--json",
                           store=store).stdout)
    assert len(shown["turns"]) == 6 and shown["turns"][0]["message_id"] == "msg-0001"
    dream = next(c for c in result["layers"][3]["changes"] if c["op"] == "write")
    assert dream["kind"] == "dream" and dream["weights"]["importance"] == 1
    assert out.stderr == ""  # --json keeps progress off the terminal


def test_print_prompt_and_agent_apply(tmp_path: Path, backend: Backend) -> None:
    store, _ = _setup(tmp_path)
    prompt = run("dream", "--print-prompt", "solidify", store=store).stdout
    assert prompt.startswith("# Layer 0 — solidify") and "turn 1 ·" in prompt
    as_json = json.loads(run("dream", "--print-prompt", "comb", "--json", store=store).stdout)
    assert as_json["prompt"].startswith("Nothing to do for the comb layer")
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"memories": [
        {"gesture": "E1234 means the supplier CSV header changed.", "kind": "fact",
         "source_links": [7, 8, 9], "importance": 3, "emotional": 1, "recurrence": 1,
         "unresolved": 1}]}), encoding="utf-8")
    applied = json.loads(run("dream", "apply", "solidify", str(answer), "--json",
                             store=store).stdout)
    assert applied["counts"]["written"] == 1 and applied["source"] == "agent"
    text = run("dream", "apply", "solidify", str(answer), store=store).stdout
    assert "replayed" in text  # the same answer twice is a no-op


def test_failures_exit_non_zero_with_one_line(tmp_path: Path) -> None:
    store, _ = _setup(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"memories": [{"gesture": "x"}]}', encoding="utf-8")
    err = run("dream", "apply", "solidify", str(bad), store=store, code=31).stderr
    assert err.startswith("tideline: error: llm_output_invalid: solidify: invalid answer")
    assert err.count("\n") == 1 and "Traceback" not in err
    none = run("dream", "--no-sleep", store=store, code=30).stderr
    assert "no dream provider configured" in none and none.count("\n") == 1
    garbage = tmp_path / "garbage.py"
    garbage.write_text("import sys; sys.stdin.read(); print('I dreamt of sheep.')\n",
                       encoding="utf-8")
    env = {"TIDELINE_DREAM_COMMAND": f"{sys.executable} {garbage}"}
    out = run("dream", "--layers", "solidify", "--no-sleep", store=store, code=31, env=env)
    errors = [line for line in out.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "after 2 attempts: not valid JSON" in errors[0]
    assert run("dream", "--print-prompt", "nap", store=store, code=30).stderr.count("\n") == 1
    missing = run("dream", "apply", "comb", str(tmp_path / "nope.json"), store=store, code=3)
    assert "cannot read" in missing.stderr


def test_every_dream_option_is_documented() -> None:
    from typer.main import get_command

    from tideline.cli import app
    from tideline.cli import dream as _  # noqa: F401

    doc = (Path(__file__).resolve().parents[2] / "docs" / "dream.md").read_text("utf-8")
    group = get_command(app).commands["dream"]  # type: ignore[attr-defined]
    options = {o for p in group.params for o in p.opts if o.startswith("--")}
    options |= {o for c in group.commands.values() for p in c.params for o in p.opts
                if o.startswith("--")}
    common = {"--store", "--namespace", "--embedder", "--json", "--help"}
    missing = sorted(o for o in options - common if o not in doc)
    assert not missing, missing
    assert "tideline dream apply" in doc and "cron" in doc


def test_dream_sleeps_first_unless_told_not_to(tmp_path: Path) -> None:
    store, cmd = _setup(tmp_path)
    out = run("dream", "--provider", "command", "--command", cmd, "--layers", "solidify",
              "--json", store=store)
    result = json.loads(out.stdout)
    assert result["sleep"]["skipped"] is False and "scan" in result["sleep"]["steps"]
    assert result["layers"][0]["counts"]["written"] == 1
    text = run("dream", "--provider", "command", "--command", cmd, "--layers", "comb",
               store=store).stdout
    assert text.startswith("sleep: ") and "comb: applied" in text


def test_no_provider_fails_before_the_sleep_and_writes_nothing(tmp_path: Path) -> None:
    """Issue 28 §2.5: `tideline dream` without a provider ran a whole sleep and wrote a
    backup before it failed (exit 30). Now the typed error comes first."""
    store, _ = _setup(tmp_path)
    before = sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file()
                    and not p.name.endswith(("-wal", "-shm")))
    events = run("introspect", "--json", store=store).stdout
    err = run("dream", store=store, code=30).stderr
    assert err.startswith("tideline: error: dream_error: no dream provider configured")
    assert "sleep" not in err and err.count("\n") == 1
    assert not (store / "backups").exists() or not any((store / "backups").iterdir())
    after = sorted(p.relative_to(store) for p in store.rglob("*") if p.is_file()
                   and not p.name.endswith(("-wal", "-shm")))
    assert after == before
    assert json.loads(run("introspect", "--json", store=store).stdout)["events"] == \
        json.loads(events)["events"]
