"""The service's configuration file (JSON, rendered by the openai_api role from the inventory and profile)."""

import json
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from . import sampling
from .thinking import Thinking


class ModelInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    served_name: str = Field(min_length=1)
    entry_model: str = Field(min_length=1)
    runtime: str
    context_length: int = Field(ge=1)
    max_input_len: int = Field(ge=1)
    max_output_len: int = Field(ge=1)
    fingerprint: str = ""
    # The model card's "created" (Unix seconds): the role renders the served checkpoint's time (the mtime of
    # its tokenizer.json on the serving host); 0 where none is known.
    created: int = Field(default=0, ge=0)
    # The served checkpoint's generation_config.json as the role fetched it ({} without one) and the operator's
    # per-parameter overrides: sampling.resolve makes the defaults of requests from them (``sampling``).
    generation_config: dict[str, Any] = Field(default_factory=dict)
    sampling_defaults: dict[str, Any] = Field(default_factory=dict)
    # The chat template's reasoning behaviour: the profile's model.thinking (thinking.py); the role renders a
    # profile planned before the field existed as switchable, which is also the default here.
    thinking: Thinking = Field(default_factory=Thinking)
    _sampling: dict = PrivateAttr(default_factory=dict)
    _sampling_thinking_off: Optional[dict] = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _resolve_sampling(self):
        try:
            self._sampling = sampling.resolve(self.generation_config, self.sampling_defaults)
            if self.thinking.mode == "switchable":
                self._sampling_thinking_off = sampling.resolve(
                    self.generation_config, self.sampling_defaults, thinking_off=True
                )
        except sampling.SamplingConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def sampling(self) -> dict:
        """The sampling parameters filled into a request that leaves them out (sampling.py)."""
        return dict(self._sampling)

    @property
    def sampling_thinking_off(self) -> Optional[dict]:
        """Those of a request that turns thinking off, on a switchable model (None on the others)."""
        return None if self._sampling_thinking_off is None else dict(self._sampling_thinking_off)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    listen_address: str = "127.0.0.1"
    port: int = Field(default=8090, ge=1, le=65535)
    metrics_address: str = "127.0.0.1"
    metrics_port: int = Field(default=9108, ge=0, le=65535)
    model: ModelInfo
    tokenizer_dir: str
    triton_nodes: list[str] = Field(min_length=1)
    # Written by the rolling playbook's drain step; re-read on SIGHUP (systemctl reload).
    drain_file: str = ""
    fail_timeout_s: float = Field(default=10.0, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    # A request's gRPC stream is kept open for the node's next request once the request has ended (backend.py);
    # false: a new stream per request.
    reuse_streams: bool = True
    default_max_tokens: Optional[int] = Field(default=None, ge=1)
    token_budgets: dict[str, int] = Field(default_factory=dict)
    owned_by: str = "triton-fleet"
    # Worker processes (__main__), each on its own port: port, port + 1, ... (see ``ports``); their shared
    # state lives in state_dir.
    workers: int = Field(default=1, ge=1, le=64)
    state_dir: str = ""
    # Checked by server_tools.ServerToolEngine.from_config when the app is created (and by --check).
    server_tools: dict[str, Any] = Field(default_factory=dict)

    @property
    def ports(self) -> list[int]:
        """One listening port per worker, from ``port`` up: NGINX balances over them by requests in flight
        (least_conn), which one socket shared by every worker cannot do."""
        return [self.port + i for i in range(self.workers)]

    @model_validator(mode="after")
    def _ports_fit(self):
        last = self.port + self.workers - 1
        if last > 65535:
            raise ValueError(
                f"port {self.port} with {self.workers} workers needs ports {self.port}-{last}, past 65535: "
                "lower port or workers"
            )
        if self.metrics_port in self.ports:
            raise ValueError(
                f"metrics_port {self.metrics_port} is one of the workers' ports {self.port}-{last}: "
                "give the metrics listener a port outside that range"
            )
        return self


def load(path: str) -> Settings:
    try:
        with open(path, encoding="utf-8") as fh:
            data: Any = json.load(fh)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"cannot read the configuration {path}: {exc}") from exc
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise SystemExit(f"configuration {path} is invalid:\n{exc}") from exc
