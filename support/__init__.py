"""Platform layer: status and errors, flags, logging, tracing.

This package imports nothing else of the project. Its public API is re-exported
here; the implementation lives in `support._src`.
"""

from support._src.status import AbortedError as AbortedError
from support._src.status import AlreadyExistsError as AlreadyExistsError
from support._src.status import CancelledError as CancelledError
from support._src.status import DataLossError as DataLossError
from support._src.status import DeadlineExceededError as DeadlineExceededError
from support._src.status import error_for_code as error_for_code
from support._src.status import FailedPreconditionError as FailedPreconditionError
from support._src.status import InternalError as InternalError
from support._src.status import InvalidArgumentError as InvalidArgumentError
from support._src.status import NotFoundError as NotFoundError
from support._src.status import OutOfRangeError as OutOfRangeError
from support._src.status import PermissionDeniedError as PermissionDeniedError
from support._src.status import ResourceExhaustedError as ResourceExhaustedError
from support._src.status import Status as Status
from support._src.status import StatusCode as StatusCode
from support._src.status import UnauthenticatedError as UnauthenticatedError
from support._src.status import UnavailableError as UnavailableError
from support._src.status import unimplemented as unimplemented
from support._src.status import UnimplementedError as UnimplementedError
from support._src.status import UnknownError as UnknownError
from support._src.status import XlaError as XlaError

# Environment helpers, flags, logging and tracing are used through their
# modules (`support.env.source_root`, `support.flags.define_bool`,
# `support.log.vlog`, `support.trace.scope`), because their short names
# (override, scope, info, ...) would clash here. `support.heap.gc_paused`
# pauses the cyclic garbage collector around a burst of allocation.
from support._src import env as env
from support._src import flags as flags
from support._src import heap as heap
from support._src import log as log
from support._src import trace as trace
