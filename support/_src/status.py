"""Status codes and the project's one error hierarchy.

`StatusCode` uses absl's numbering (absl/status/status.h), which the PJRT C
API also reuses for `PJRT_Error_Code`, so a code crosses every layer unchanged.

Every error raised on purpose by this project derives from `XlaError`, and
each subclass also inherits the builtin exception a Python caller would expect
(`InvalidArgumentError` is a `ValueError`, `NotFoundError` a `LookupError`...),
so `except ValueError` keeps working for callers who do not know our types.
"""

from __future__ import annotations

import dataclasses
import enum


class StatusCode(enum.IntEnum):
  """absl::StatusCode values (absl/status/status.h)."""

  OK = 0
  CANCELLED = 1
  UNKNOWN = 2
  INVALID_ARGUMENT = 3
  DEADLINE_EXCEEDED = 4
  NOT_FOUND = 5
  ALREADY_EXISTS = 6
  PERMISSION_DENIED = 7
  RESOURCE_EXHAUSTED = 8
  FAILED_PRECONDITION = 9
  ABORTED = 10
  OUT_OF_RANGE = 11
  UNIMPLEMENTED = 12
  INTERNAL = 13
  UNAVAILABLE = 14
  DATA_LOSS = 15
  UNAUTHENTICATED = 16


class XlaError(Exception):
  """Root of every error this project raises on purpose.

  Attributes:
    code: the `StatusCode` of this error.
    message: the human-readable message (without the code prefix).
  """

  code: StatusCode = StatusCode.UNKNOWN

  def __init__(self, message: str = "", *args):
    super().__init__(message, *args)
    self.message = message

  def __str__(self) -> str:
    return self.message

  def to_status(self) -> "Status":
    return Status(self.code, self.message)


class CancelledError(XlaError):
  code = StatusCode.CANCELLED


class UnknownError(XlaError, RuntimeError):
  code = StatusCode.UNKNOWN


class InvalidArgumentError(XlaError, ValueError):
  code = StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(XlaError, TimeoutError):
  code = StatusCode.DEADLINE_EXCEEDED


class NotFoundError(XlaError, LookupError):
  code = StatusCode.NOT_FOUND


class AlreadyExistsError(XlaError, ValueError):
  code = StatusCode.ALREADY_EXISTS


class PermissionDeniedError(XlaError, PermissionError):
  code = StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(XlaError, MemoryError):
  code = StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(XlaError, RuntimeError):
  code = StatusCode.FAILED_PRECONDITION


class AbortedError(XlaError, RuntimeError):
  code = StatusCode.ABORTED


class OutOfRangeError(XlaError, IndexError):
  code = StatusCode.OUT_OF_RANGE


class UnimplementedError(XlaError, NotImplementedError):
  code = StatusCode.UNIMPLEMENTED


class InternalError(XlaError, RuntimeError):
  code = StatusCode.INTERNAL


class UnavailableError(XlaError, RuntimeError):
  code = StatusCode.UNAVAILABLE


class DataLossError(XlaError, IOError):
  code = StatusCode.DATA_LOSS


class UnauthenticatedError(XlaError, PermissionError):
  code = StatusCode.UNAUTHENTICATED


# One table, code -> class; `Status.raise_if_error` and `error_for_code` use it.
_ERROR_FOR_CODE: dict[StatusCode, type[XlaError]] = {
    cls.code: cls
    for cls in (
        CancelledError, UnknownError, InvalidArgumentError,
        DeadlineExceededError, NotFoundError, AlreadyExistsError,
        PermissionDeniedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError,
        UnimplementedError, InternalError, UnavailableError, DataLossError,
        UnauthenticatedError,
    )
}


def error_for_code(code: StatusCode | int, message: str) -> XlaError:
  """Returns (does not raise) the error of `code` carrying `message`."""
  code = StatusCode(code)
  if code == StatusCode.OK:
    raise ValueError("error_for_code: OK is not an error")
  return _ERROR_FOR_CODE[code](message)


@dataclasses.dataclass(frozen=True)
class Status:
  """A status value, as absl::Status: a code and a message."""

  code: StatusCode = StatusCode.OK
  message: str = ""

  def __post_init__(self):
    object.__setattr__(self, "code", StatusCode(self.code))

  @classmethod
  def ok_status(cls) -> "Status":
    return cls()

  @classmethod
  def from_exception(cls, exc: BaseException) -> "Status":
    """Maps any exception to a status; non-XlaError ones become INTERNAL."""
    if isinstance(exc, XlaError):
      return exc.to_status()
    return cls(StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")

  def ok(self) -> bool:
    return self.code == StatusCode.OK

  def raise_if_error(self) -> None:
    if not self.ok():
      raise error_for_code(self.code, self.message)

  def __str__(self) -> str:
    if self.ok():
      return "OK"
    return f"{self.code.name}: {self.message}"


def unimplemented(feature: str) -> UnimplementedError:
  """The error for a feature we do not support yet; it names the feature."""
  return UnimplementedError(f"Unimplemented: {feature}")
