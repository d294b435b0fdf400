"""The repository stands alone: no tracked file cites a document outside it (design notes, reference
notes of a development machine) or an absolute path of a development machine, and every relative link
in the Markdown files points at a file that exists. Facts the code relies on are in docs/sources.md."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Written with character classes so that this file does not match itself.
FORBIDDEN = re.compile(r"DESIGN\.md|shared[/]reference|\.\.[/]shared|/w[o]rk/|/r[o]ot/")

# path -> why a match there is not a reference outside the repository.
ALLOWED = {
    "tools/lab-image/Dockerfile": "the cache dir removed there is in the image root user home, not on this machine",
}

# Files whose owners are rewriting them in parallel branches; each entry must go once its file is clean
# (the test below fails while an entry is no longer needed).
PENDING = set()

LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def tracked():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def offending():
    hits = {}
    for rel in tracked():
        try:
            text = (ROOT / rel).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.setdefault(rel, []).append(f"{rel}:{n}: {line.strip()[:120]}")
    return hits


def test_no_reference_outside_the_repository():
    hits = offending()
    bad = [line for rel, lines in sorted(hits.items()) if rel not in ALLOWED and rel not in PENDING for line in lines]
    assert not bad, ("these lines cite files outside the repository or a machine path; state the fact in docs/ "
                     "with its public source (docs/sources.md) instead:\n" + "\n".join(bad))


def test_exemptions_are_still_needed():
    hits = offending()
    stale = sorted(rel for rel in {*ALLOWED, *PENDING} if rel not in hits)
    assert not stale, f"remove these from ALLOWED/PENDING in {Path(__file__).name}: they are clean now: {stale}"


def test_relative_markdown_links_resolve():
    missing = []
    for rel in tracked():
        if not rel.endswith(".md"):
            continue
        text = (ROOT / rel).read_text(encoding="utf-8")
        text = re.sub(r"`[^`]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))  # code is not a link
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            if not (ROOT / rel).parent.joinpath(target).exists():
                missing.append(f"{rel}: {target}")
    assert not missing, "links to files that do not exist:\n" + "\n".join(missing)


def test_the_pattern_catches_what_it_must():
    # Built by concatenation, for the same reason as the pattern.
    for sample in ("see DESIGN" + ".md", "/wo" + "rk/shared/x", "../sha" + "red/ref.md", "/ro" + "ot/.ssh",
                   "shared/" + "reference/a.md"):
        assert FORBIDDEN.search(sample), sample
