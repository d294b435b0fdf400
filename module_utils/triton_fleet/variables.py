"""Unknown inventory variables: a name with a role's prefix (or the shared ``triton_fleet_``) that nothing declares.

Ansible ignores a variable nobody reads, so a typo (``model_artifacts_source`` for
``model_artifacts_source_type``) silently keeps the default. Declarations come from every role's
``meta/argument_specs.yml`` (prefix ``<role>_``) and from ``meta/shared_variables.yml`` (prefix
``triton_fleet_``). Pure Python, no Ansible import.
"""

import difflib
import re

SHARED_PREFIX = "triton_fleet_"
# Shared variables of these kinds are set by the playbooks or gathered, never by an inventory.
NOT_FROM_INVENTORY = ("internal", "fact")


class VariablesError(ValueError):
    """The declarations themselves are unusable (a spec file that is not a mapping, ...)."""


def role_options(role, spec):
    """Option names of every entry point of one role's argument_specs document."""
    if not isinstance(spec, dict) or not isinstance(spec.get("argument_specs"), dict):
        raise VariablesError(f"roles/{role}/meta/argument_specs.yml has no argument_specs mapping")
    names = set()
    for entry, body in spec["argument_specs"].items():
        options = (body or {}).get("options") or {}
        if not isinstance(options, dict):
            raise VariablesError(f"roles/{role}/meta/argument_specs.yml: {entry}.options is not a mapping")
        names.update(options)
    return names


def shared_options(doc):
    """``{name: kind}`` from meta/shared_variables.yml (kind: inventory, internal or fact)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("shared_variables"), dict):
        raise VariablesError("meta/shared_variables.yml has no shared_variables mapping")
    out = {}
    for name, body in doc["shared_variables"].items():
        if not name.startswith(SHARED_PREFIX):
            raise VariablesError(f"meta/shared_variables.yml: {name} does not start with {SHARED_PREFIX}")
        kind = (body or {}).get("kind", "inventory")
        if kind not in ("inventory",) + NOT_FROM_INVENTORY:
            raise VariablesError(f"meta/shared_variables.yml: {name} has kind {kind!r} (inventory, internal or fact)")
        out[name] = kind
    return out


def declarations(role_specs, shared_doc):
    """``{prefix: {name: (declared_by, kind)}}`` for every role prefix and the shared prefix."""
    decl = {}
    for role, spec in sorted(role_specs.items()):
        decl[role + "_"] = {n: (f"roles/{role}/meta/argument_specs.yml", "inventory") for n in role_options(role, spec)}
    decl[SHARED_PREFIX] = {n: ("meta/shared_variables.yml", k) for n, k in shared_options(shared_doc).items()}
    return decl


def owner(name, decl):
    """The longest declared prefix ``name`` starts with, or None (not ours: not checked)."""
    best = None
    for prefix in decl:
        if name.startswith(prefix) and len(name) > len(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def _tokens(name, prefix):
    return set(t for t in re.split(r"_+", name[len(prefix):]) if t)


def suggest(name, prefix, decl):
    """The closest declared name of the same prefix (difflib), preferring shared words; None when nothing is close."""
    names = sorted(n for n, (_, kind) in decl[prefix].items() if kind == "inventory")
    close = difflib.get_close_matches(name, names, n=6, cutoff=0.6)
    if not close:
        return None
    words = _tokens(name, prefix)
    ranked = sorted(
        close,
        key=lambda c: (-len(words & _tokens(c, prefix)), -difflib.SequenceMatcher(None, name, c).ratio(), c),
    )
    return ranked[0]


def check(hosts, decl, ignore=None):
    """Problems in ``hosts`` (``{host: [variable names]}``); ``ignore`` is ``{host: [names]}`` (facts).

    Returns a sorted list of ``{"variable", "hosts", "message", "suggestion"}``.
    """
    ignore = ignore or {}
    found = {}
    for host, names in hosts.items():
        skip = set(ignore.get(host) or ())
        for name in names:
            if name in skip:
                continue
            prefix = owner(name, decl)
            if prefix is None:
                continue
            entry = decl[prefix].get(name)
            if entry is not None and entry[1] == "inventory":
                continue
            found.setdefault(name, (prefix, []))[1].append(host)
    problems = []
    for name in sorted(found):
        prefix, where = found[name]
        hosts_txt = "every host" if len(where) == len(hosts) > 1 else ", ".join(sorted(where))
        entry = decl[prefix].get(name)
        if entry is not None:
            message = (
                f"variable {name} is set by the playbooks ({entry[1]}, see {entry[0]}), not by an inventory: "
                f"remove it from the inventory (set for {hosts_txt})"
            )
            suggestion = None
        else:
            suggestion = suggest(name, prefix, decl)
            source = (
                "meta/shared_variables.yml" if prefix == SHARED_PREFIX
                else f"roles/{prefix[:-1]}/meta/argument_specs.yml"
            )
            hint = f" (did you mean {suggestion}?)" if suggestion else ""
            message = (
                f"unknown variable {name}{hint}: nothing declares it in {source}, so it would be ignored "
                f"(set for {hosts_txt}); fix or remove it"
            )
        problems.append({"variable": name, "hosts": sorted(where), "message": message, "suggestion": suggestion})
    return problems
