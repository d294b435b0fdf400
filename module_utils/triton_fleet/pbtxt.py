"""Render Triton model configurations (``config.pbtxt``) from Python data, and check them.

A config is a plain dict that mirrors Triton's ``ModelConfig`` protobuf
(``inference.ModelConfig`` in ``model_config.proto``):

- ``str``        -> a quoted string (``name: "ensemble"``)
- ``Enum("X")``  -> a bare enum identifier (``data_type: TYPE_INT32``)
- ``bool``       -> ``true`` / ``false``
- ``int/float``  -> a number
- ``dict``       -> a nested message (``model_transaction_policy { ... }``)
- ``list``       -> a repeated field (``dims: [ -1 ]`` or ``input [ { ... }, ... ]``)

``parameters`` may be given as a plain ``{key: value}`` dict: it is rendered as Triton's
``map<string, ModelParameter>`` (``parameters { key: "k" value { string_value: "v" } }``), in the
dict's order.

:func:`validate` parses the text into ``ModelConfig`` with ``google.protobuf.text_format`` (the
same schema the server uses) and adds the semantic rules that protobuf cannot express (the
mistakes that were made in this project's seeds). Every failure is a :class:`PbtxtError` that
names the offending field.
"""

import math
import re

__all__ = ["Enum", "PbtxtError", "render", "validate", "render_validated", "parse"]


class Enum(str):
    """An enum value: rendered without quotes (``TYPE_INT32``, ``KIND_GPU``)."""

    __slots__ = ()

    def __repr__(self):
        return f"Enum({str.__repr__(self)})"


class PbtxtError(ValueError):
    """A config that Triton would reject. ``field`` names the offending field."""

    def __init__(self, message, field=None, model=None, line=None):
        self.field = field
        self.model = model
        self.line = line
        where = []
        if model:
            where.append(f"model {model!r}")
        if field:
            where.append(f"field {field!r}")
        if line:
            where.append(f"line {line}")
        prefix = ("config.pbtxt of " + ", ".join(where) + ": ") if where else "config.pbtxt: "
        super().__init__(prefix + message)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_INDENT = "  "


def _escape(value):
    out = []
    for ch in value:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20:
            out.append(f"\\{ord(ch):03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _scalar(value, path):
    if isinstance(value, Enum):
        if not _IDENT.match(value):
            raise PbtxtError(f"enum value {str(value)!r} is not an identifier", field=path)
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or value in (float("inf"), float("-inf")):
            raise PbtxtError(f"number {value!r} is not finite", field=path)
        return repr(value)
    if isinstance(value, str):
        return _escape(value)
    raise PbtxtError(f"unsupported value type {type(value).__name__} ({value!r})", field=path)


def _parameters_entries(params):
    """``{"k": v}`` -> Triton's map entries; lists of entries are passed through."""
    if isinstance(params, list):
        return params
    entries = []
    for key, value in params.items():
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        entries.append({"key": str(key), "value": {"string_value": text}})
    return entries


def _render_fields(msg, depth, path, lines):
    pad = _INDENT * depth
    for key, value in msg.items():
        if not _IDENT.match(str(key)):
            raise PbtxtError(f"field name {key!r} is not an identifier", field=path + str(key))
        field = path + key
        if value is None:
            continue
        if key == "parameters" and isinstance(value, dict):
            for entry in _parameters_entries(value):
                lines.append(f"{pad}parameters {{")
                _render_fields(entry, depth + 1, field + ".", lines)
                lines.append(f"{pad}}}")
            continue
        if isinstance(value, dict):
            lines.append(f"{pad}{key} {{")
            _render_fields(value, depth + 1, field + ".", lines)
            lines.append(f"{pad}}}")
        elif isinstance(value, (list, tuple)):
            if value and all(isinstance(v, dict) for v in value):
                lines.append(f"{pad}{key} [")
                for i, item in enumerate(value):
                    lines.append(f"{pad}{_INDENT}{{")
                    _render_fields(item, depth + 2, f"{field}[{i}].", lines)
                    lines.append("{}{}}}{}".format(pad, _INDENT, "," if i < len(value) - 1 else ""))
                lines.append(f"{pad}]")
            elif any(isinstance(v, dict) for v in value):
                raise PbtxtError("a repeated field mixes messages and scalars", field=field)
            else:
                items = ", ".join(_scalar(v, field) for v in value)
                lines.append(f"{pad}{key}: [ {items} ]" if items else f"{pad}{key}: [ ]")
        else:
            lines.append(f"{pad}{key}: {_scalar(value, field)}")


def render(config, header=None):
    """Protobuf text for ``config`` (a dict). ``header`` lines become ``#`` comments on top."""
    if not isinstance(config, dict):
        raise PbtxtError(f"a model config must be a dict, got {type(config).__name__}")
    lines = []
    for line in (header or "").splitlines():
        lines.append(("# " + line).rstrip())
    _render_fields(config, 0, "", lines)
    return "\n".join(lines) + "\n"


_UNKNOWN_FIELD = re.compile(r'has no field named "([^"]+)"')
_UNKNOWN_ENUM = re.compile(r"has no value named (\w+)")
_LOCATION = re.compile(r"^(\d+):(\d+) : (.*)$", re.S)


def parse(text, model=None):
    """Parse ``text`` into ``tritonclient.grpc.model_config_pb2.ModelConfig``; errors name the field."""
    from google.protobuf import text_format

    from .model_config_schema import model_config_class

    msg = model_config_class()()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as exc:
        detail = str(exc)
        line = exc.GetLine() if hasattr(exc, "GetLine") else None
        m = _LOCATION.match(detail)
        if m:
            line = int(m.group(1))
            detail = m.group(3)
        field = None
        fm = _UNKNOWN_FIELD.search(detail)
        if fm:
            field = fm.group(1)
        elif line:
            src = text.splitlines()[line - 1] if line - 1 < len(text.splitlines()) else ""
            token = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", src)
            field = token.group(1) if token else None
        detail = detail.rstrip(".")
        if _UNKNOWN_ENUM.search(detail):
            detail += " (enum values are bare identifiers such as TYPE_INT32 or KIND_GPU)"
        raise PbtxtError(
            f"does not parse as Triton's ModelConfig: {detail}. Fix or remove this field.",
            field=field,
            model=model,
            line=line,
        ) from None
    return msg


# Parameters a TensorRT-LLM engine needs; a model that carries any of them is an LLM engine.
_LLM_ENGINE_PARAMETERS = {"plan", "engine_dir", "gpt_model_path", "gpt_model_type", "batching_strategy"}
# The TensorRT backend accepts exactly one model parameter (tensorrt_backend README).
_TENSORRT_PLAN_PARAMETERS = {"execution_context_allocation_strategy"}
_KNOWN_BACKENDS = {"tensorrtllm", "python", "onnxruntime", "tensorrt", "pytorch", "openvino", "fil", "vllm"}


def validate(text, model=None, expect_name=None):
    """Parse ``text`` and apply Triton's semantic rules; returns the ``ModelConfig`` message."""
    msg = parse(text, model=model)
    name = msg.name or model
    if expect_name is not None and msg.name and msg.name != expect_name:
        raise PbtxtError(
            f"name {msg.name!r} does not match its directory {expect_name!r}: Triton refuses to load it. Use name: {expect_name!r}.",
            field="name",
            model=name,
        )
    if not msg.backend and not msg.platform:
        raise PbtxtError(
            'neither backend nor platform is set: set backend (e.g. "python", "tensorrtllm") or platform: "ensemble"',
            field="backend",
            model=name,
        )
    if msg.backend and msg.backend not in _KNOWN_BACKENDS:
        raise PbtxtError(
            "unknown backend {!r}: expected one of {}".format(msg.backend, ", ".join(sorted(_KNOWN_BACKENDS))),
            field="backend",
            model=name,
        )
    params = set(msg.parameters.keys())
    if msg.platform in ("tensorrt_plan", "tensorrt") or msg.backend == "tensorrt":
        engine = sorted(params & _LLM_ENGINE_PARAMETERS)
        if engine:
            raise PbtxtError(
                f"platform {msg.platform or msg.backend!r} cannot load a TensorRT-LLM engine (parameter {engine[0]!r}): a TRT-LLM engine needs "
                'the TRT-LLM plugins and executor. Use backend: "tensorrtllm" with the '
                "inflight_batcher_llm layout (runtime trtllm-engine).",
                field="platform",
                model=name,
            )
        unknown = sorted(params - _TENSORRT_PLAN_PARAMETERS)
        if unknown:
            raise PbtxtError(
                "the TensorRT backend accepts only the parameter execution_context_allocation_strategy, "
                f"not {unknown[0]!r}",
                field="parameters",
                model=name,
            )
    if msg.platform == "pytorch_libtorch" or msg.backend == "pytorch":
        raise PbtxtError(
            "pytorch_libtorch serves one TorchScript forward pass (no KV cache, no generation loop): "
            'use runtime transformers (backend: "python") or a TensorRT-LLM runtime',
            field="platform" if msg.platform else "backend",
            model=name,
        )
    if msg.platform == "ensemble" and not msg.ensemble_scheduling.step:
        raise PbtxtError("an ensemble needs ensemble_scheduling steps", field="ensemble_scheduling", model=name)
    seen = set()
    for tensor in list(msg.input) + list(msg.output):
        if not tensor.name:
            raise PbtxtError("a tensor has no name", field="input/output", model=name)
        if not tensor.dims and msg.platform != "ensemble":
            raise PbtxtError(f"tensor {tensor.name!r} has no dims", field="dims", model=name)
    for tensor in msg.input:
        if tensor.name in seen:
            raise PbtxtError(f"input {tensor.name!r} is declared twice", field="input", model=name)
        seen.add(tensor.name)
    if msg.max_batch_size < 0:
        raise PbtxtError("max_batch_size must be >= 0", field="max_batch_size", model=name)
    return msg


def render_validated(config, header=None, expect_name=None):
    """Render ``config`` and validate it; returns the text or raises :class:`PbtxtError`."""
    text = render(config, header=header)
    validate(text, model=config.get("name") or expect_name, expect_name=expect_name)
    return text
