"""OpenAI error objects: ``{"error": {"message", "type", "param", "code"}}`` with the matching HTTP status.

A server-side failure (5xx) tells the client a stable message and the request's id, never what failed inside
(a Triton node's address, gRPC's debug string, a traceback): that ``detail`` goes to the service's log under
the same request id (:meth:`APIError.report`), where an operator finds it from the id the client quotes.
"""

import logging
from typing import Optional

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",  # OpenAI's type for an unknown model or URL
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    499: "invalid_request_error",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
}


class APIError(Exception):
    """An error the client gets as an OpenAI error object."""

    def __init__(
        self,
        status: int,
        message: str,
        param: Optional[str] = None,
        code: Optional[str] = None,
        headers: Optional[dict] = None,
        *,
        detail: Optional[str] = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}
        # What happened inside, for the service's log only (never sent to the client).
        self.detail = detail

    def body(self) -> dict:
        return error_body(self.status, self.message, self.param, self.code)

    def report(self, request_id: str, log: logging.Logger) -> dict:
        """The body the client gets, the detail logged under ``request_id``: a 5xx's message names the request
        id (the client's handle on the log line), as OpenAI's server errors do."""
        message = self.message
        if self.status >= 500:
            log.warning("request %s: %s %s: %s", request_id, self.status, self.code, self.detail or self.message)
            if request_id:
                message = f"{message} (request id {request_id})"
        elif self.detail:
            log.info("request %s: %s %s: %s", request_id, self.status, self.code, self.detail)
        return error_body(self.status, message, self.param, self.code)


def internal_error(exc: BaseException) -> APIError:
    """An exception nothing expected: a 500 with a stable message; its type and text go to the log."""
    return APIError(
        500,
        "the server failed on this request; retry it, and report the request id if it keeps failing",
        code="internal_error",
        detail=f"{type(exc).__name__}: {exc}",
    )


def error_body(status: int, message: str, param: Optional[str] = None, code: Optional[str] = None) -> dict:
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }


def unsupported(param: str, why: str) -> APIError:
    return APIError(400, f"{param} is not supported by this server: {why}", param=param, code="unsupported_parameter")


def invalid(param: str, message: str) -> APIError:
    return APIError(400, message, param=param, code="invalid_value")
