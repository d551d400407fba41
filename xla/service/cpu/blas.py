"""OpenBLAS for CPU kernels: finding it, calling its gemm from LLVM IR, threads.

The library is the OpenBLAS that numpy ships (`numpy.libs/libscipy_openblas*`
in numpy wheels); numpy has already loaded it, so opening it again by path
returns the same copy. Wheels build it with the 64-bit integer interface and
prefix/suffix its symbols (`scipy_cblas_sgemm64_`); other builds export plain
`cblas_sgemm` with 32-bit integers. `library()` probes the names it knows and
reports which integer width the interface takes; kernels call the routines
under our own stable names (`xla_cpu_cblas_sgemm_i64`, ...) that
`ensure_symbols` / `register_symbols` bind to the found addresses with
`kernel_api.register_symbol`.

When no library is found (`library()` is None) emitters use their generated
loop kernels instead; nothing else changes.

Planning a call: `plan_gemm` maps a strided matrix product
`C[m, n] = sum_k A[m, k] * B[k, n]` (each operand described by an element
stride per index) to one row-major `cblas_?gemm` call, swapping the roles of
A and B (computing C^T = B^T A^T) when C is stored column-major, or says that
no single call can express it. `emit_gemm_call` writes that call into a
kernel.

Threads: OpenBLAS keeps one process-wide thread count (its `_local` setter
is process-wide too in pthread builds) and runs a gemm with M*N*K <=
`SINGLE_THREAD_MNK` on the calling thread only; a threaded gemm takes a
process-wide lock, so threaded calls from several runtime workers run one
after the other. The emitters therefore give the runtime all the
parallelism (their parallel extents split gemms into independent calls),
and the executable runs them with OpenBLAS pinned to one thread
(`single_threaded` / `pin_single_thread`, restoring the previous count
afterwards so numpy in the same process keeps its threads).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import glob
import os
import threading
from typing import Optional

from llvmlite import ir

from xla import xla_data
from xla.service.cpu import kernel_api
from xla.service.cpu import native_ir

PrimitiveType = xla_data.PrimitiveType

# interface/gemm.c: a gemm with M*N*K <= 65536 * GEMM_MULTITHREAD_THRESHOLD
# (4 in default builds) runs on the calling thread.
SINGLE_THREAD_MNK = 65536 * 4

# CBLAS enums (cblas.h).
ROW_MAJOR = 101
NO_TRANS = 111
TRANS = 112

# Element type -> gemm routine letter.
GEMM_TYPES = {
    PrimitiveType.F32: "s",
    PrimitiveType.F64: "d",
    PrimitiveType.C64: "c",
    PrimitiveType.C128: "z",
}

# (symbol pattern, integer bits of the interface), most specific first.
_NAME_SCHEMES = (
    ("scipy_cblas_{}64_", 64),
    ("cblas_{}64_", 64),
    ("scipy_cblas_{}", 32),
    ("cblas_{}", 32),
)
_THREAD_SETTERS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


@dataclasses.dataclass(frozen=True)
class BlasLibrary:
  """A loaded BLAS: its file, gemm addresses by letter, interface int width."""
  path: str
  int_bits: int
  gemm: dict  # letter ("s", "d", "c", "z") -> (exported name, address)
  set_threads: Optional[ctypes._CFuncPtr] = None
  get_threads: Optional[ctypes._CFuncPtr] = None

  def symbol(self, letter: str) -> str:
    """The name kernels call the `letter`gemm routine by. It carries the
    interface's integer width, so cached machine code made for another
    interface fails to link instead of passing wrong-sized arguments."""
    return f"xla_cpu_cblas_{letter}gemm_i{self.int_bits}"


def candidate_paths() -> list[str]:
  """Shared libraries that may hold numpy's OpenBLAS, most likely first."""
  paths = []
  env = os.environ.get("XLA_CPU_BLAS_LIBRARY")
  if env:
    paths.append(env)
  try:
    import numpy  # pylint: disable=g-import-not-at-top
  except ImportError:  # pragma: no cover - numpy is a dependency
    return paths
  site = os.path.dirname(os.path.dirname(numpy.__file__))
  for pattern in ("numpy.libs/libscipy_openblas*.so*", "numpy.libs/*blas*.so*",
                  "numpy/.dylibs/*blas*.dylib", "scipy_openblas64/lib/*.so*",
                  "scipy_openblas32/lib/*.so*"):
    paths.extend(sorted(glob.glob(os.path.join(site, pattern))))
  return paths


def _probe(path: str) -> Optional[BlasLibrary]:
  try:
    lib = ctypes.CDLL(path)
  except OSError:
    return None
  for scheme, bits in _NAME_SCHEMES:
    found = {}
    for letter in "sdcz":
      name = scheme.format(letter + "gemm")
      try:
        fn = getattr(lib, name)
      except AttributeError:
        break
      found[letter] = (name, ctypes.cast(fn, ctypes.c_void_p).value)
    if len(found) == 4:
      setter = getter = None
      for set_name, get_name in _THREAD_SETTERS:
        if hasattr(lib, set_name) and hasattr(lib, get_name):
          setter, getter = getattr(lib, set_name), getattr(lib, get_name)
          setter.argtypes, setter.restype = [ctypes.c_int], None
          getter.argtypes, getter.restype = [], ctypes.c_int
          break
      return BlasLibrary(path=path, int_bits=bits, gemm=found,
                         set_threads=setter, get_threads=getter)
  return None


_DISABLED = threading.local()


@functools.lru_cache(maxsize=None)
def _find() -> Optional[BlasLibrary]:
  if os.environ.get("XLA_CPU_DISABLE_BLAS"):
    return None
  for path in candidate_paths():
    lib = _probe(path)
    if lib is not None:
      return lib
  return None


def library() -> Optional[BlasLibrary]:
  """numpy's BLAS, or None when it cannot be found (or is disabled, through
  the XLA_CPU_DISABLE_BLAS environment variable or `disabled()`)."""
  if getattr(_DISABLED, "on", False):
    return None
  return _find()


class disabled:  # pylint: disable=invalid-name
  """`with blas.disabled():` emitters on this thread behave as if no BLAS
  were found (tests and benchmarks use it to reach the loop kernels)."""

  def __enter__(self):
    self._old = getattr(_DISABLED, "on", False)
    _DISABLED.on = True

  def __exit__(self, *exc):
    _DISABLED.on = self._old


def ensure_symbols(lib: BlasLibrary) -> None:
  """Makes the gemm routines callable from JIT'ed kernels by `lib.symbol()`."""
  for letter, (_, address) in lib.gemm.items():
    kernel_api.register_symbol(lib.symbol(letter), address)


def register_symbols() -> bool:
  """Registers the gemm symbols of the library found, if any (emitter modules
  call this on import, so machine code loaded from a cache links)."""
  lib = _find()
  if lib is None:
    return False
  ensure_symbols(lib)
  return True


def set_num_threads(n: int) -> bool:
  """Sets OpenBLAS's (process-wide) thread count; False if it can't."""
  lib = library()
  if lib is None or lib.set_threads is None:
    return False
  lib.set_threads(max(1, int(n)))
  return True


def get_num_threads() -> Optional[int]:
  lib = library()
  if lib is None or lib.get_threads is None:
    return None
  return int(lib.get_threads())


# The native pin: a spin lock, the depth, the saved count, and OpenBLAS's
# get / set thread-count functions, in one int64 array (`pin_state`).
_PIN_LOCK, _PIN_DEPTH, _PIN_SAVED, _PIN_GET, _PIN_SET = range(5)
_PIN_IR = native_ir.WORDS + native_ir.SPIN_LOCK + f"""
define void @xla_cpu_blas_pin(ptr %s) {{
entry:
  call void @lock(ptr %s)
  %dp = getelementptr i64, ptr %s, i64 {_PIN_DEPTH}
  %depth = load i64, ptr %dp
  %first = icmp eq i64 %depth, 0
  br i1 %first, label %save, label %count
save:
  %get = call ptr @pword(ptr %s, i64 {_PIN_GET})
  %prev = call i32 %get()
  %prev64 = sext i32 %prev to i64
  %sp = getelementptr i64, ptr %s, i64 {_PIN_SAVED}
  store i64 %prev64, ptr %sp
  %one = icmp eq i32 %prev, 1
  br i1 %one, label %count, label %set
set:
  %setf = call ptr @pword(ptr %s, i64 {_PIN_SET})
  call void %setf(i32 1)
  br label %count
count:
  %d1 = add i64 %depth, 1
  store i64 %d1, ptr %dp
  call void @unlock(ptr %s)
  ret void
}}

define void @xla_cpu_blas_unpin(ptr %s) {{
entry:
  call void @lock(ptr %s)
  %dp = getelementptr i64, ptr %s, i64 {_PIN_DEPTH}
  %depth = load i64, ptr %dp
  %none = icmp eq i64 %depth, 0
  br i1 %none, label %out, label %dec
dec:
  %d1 = sub i64 %depth, 1
  store i64 %d1, ptr %dp
  %last = icmp eq i64 %d1, 0
  br i1 %last, label %restore, label %out
restore:
  %saved = call i64 @word(ptr %s, i64 {_PIN_SAVED})
  %same = icmp eq i64 %saved, 1
  br i1 %same, label %out, label %set
set:
  %setf = call ptr @pword(ptr %s, i64 {_PIN_SET})
  %n = trunc i64 %saved to i32
  call void %setf(i32 %n)
  br label %out
out:
  call void @unlock(ptr %s)
  ret void
}}
"""
_PIN_BUILD_LOCK = threading.Lock()
_PIN: dict = {}


def _pin_built(lib: BlasLibrary) -> dict:
  with _PIN_BUILD_LOCK:
    if not _PIN:
      from xla.service.cpu import jit as jit_lib  # pylint: disable=g-import-not-at-top
      state = (ctypes.c_int64 * 8)()
      state[_PIN_GET] = ctypes.cast(lib.get_threads, ctypes.c_void_p).value
      state[_PIN_SET] = ctypes.cast(lib.set_threads, ctypes.c_void_p).value
      jit = jit_lib.CpuJit(1)
      jit.load_cached(_PIN_IR, "blas_pin")
      pin, unpin = (jit.address("xla_cpu_blas_pin"),
                    jit.address("xla_cpu_blas_unpin"))
      fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
      _PIN.update(state=state, jit=jit, address=ctypes.addressof(state),
                  functions=(pin, unpin), pin=fn(pin), unpin=fn(unpin))
    return _PIN


def pin_state() -> int:
  """The address of the process's native pin state (0 when the BLAS found
  cannot set its thread count). Native executions pin through it with
  `pin_functions()` (native_execute.py), Python through
  `pin_single_thread`, so both share one depth."""
  lib = library()
  if lib is None or lib.set_threads is None or lib.get_threads is None:
    return 0
  return _pin_built(lib)["address"]


def pin_functions() -> tuple[int, int]:
  """Addresses of the native pin and unpin (void f(int64* state))."""
  pin_state()
  return _PIN["functions"]


def pin_depth() -> int:
  """The pin's current depth (for tests)."""
  state = pin_state()
  if not state:
    return 0
  return ctypes.c_int64.from_address(state + 8 * _PIN_DEPTH).value


def pin_single_thread() -> None:
  """Makes OpenBLAS run every call on its calling thread until the matching
  `unpin()`. Executables whose kernels call BLAS pin around each run: the
  runtime already splits gemms into independent calls across its workers,
  and a threaded gemm there takes OpenBLAS's process-wide lock (the other
  worker's call waits) while its own threads spin, competing with the
  runtime's workers for the cores (measured 2-10x slower matmul / mlp /
  transformer on 2 cores). Nested / concurrent pins share one save and
  restore of the previous count (a native spin lock, a depth and the saved
  count; at depth 0 two calls into OpenBLAS, about a microsecond each)."""
  state = pin_state()
  if state:
    _PIN["pin"](state)


def unpin() -> None:
  """Ends one `pin_single_thread()`; the last one restores the count."""
  state = pin_state()
  if state:
    _PIN["unpin"](state)


class single_threaded:  # pylint: disable=invalid-name
  """`with blas.single_threaded():` pin_single_thread() ... unpin()."""

  def __enter__(self):
    pin_single_thread()
    return self

  def __exit__(self, *exc):
    unpin()


# Library routines (runtime_library.py) that call BLAS for a kernel: the
# BLAS dot's part loop (dot_emitter.py).
BLAS_ROUTINE_PREFIX = "__xla_cpu_lib_gemm_"


def uses_blas(externals) -> bool:
  """Whether a program whose kernels call the external functions
  `externals` (names) calls BLAS or LAPACK (our `xla_cpu_cblas_*` and
  `xla_cpu_lapack_*` names, or a library routine that calls BLAS): such a
  program holds OpenBLAS at one thread while it runs."""
  return any(n.startswith(("xla_cpu_cblas_", "xla_cpu_lapack_",
                           BLAS_ROUTINE_PREFIX)) for n in externals)


# --- planning -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class GemmPlan:
  """One row-major cblas gemm: C = op(A) op(B), with A, B, C the operands to
  pass (after a possible swap: `swapped` means the call's A is our B)."""
  m: int
  n: int
  k: int
  trans_a: int
  trans_b: int
  lda: int
  ldb: int
  ldc: int
  swapped: bool


def _operand(rows: int, cols: int, s_row: int, s_col: int):
  """(trans, ld) so that X[r, c] = p[r * s_row + c * s_col] is a row-major
  op(stored) matrix, or None."""
  if cols <= 1:
    s_col = 1
  if rows <= 1:
    s_row = max(cols, 1) if s_col == 1 else 1
  if s_col == 1 and s_row >= max(cols, 1):
    return NO_TRANS, s_row
  if s_row == 1 and s_col >= max(rows, 1):
    return TRANS, s_col
  return None


def plan_gemm(m: int, n: int, k: int, a_strides: tuple[int, int],
              b_strides: tuple[int, int],
              c_strides: tuple[int, int]) -> Optional[GemmPlan]:
  """A single row-major gemm computing C[i, j] = sum_l A[i, l] * B[l, j]
  where X[r, c] sits at element r * strides[0] + c * strides[1]; None if the
  strides don't allow one (no dimension of an operand has unit stride)."""
  if min(m, n, k) <= 0:
    return None
  for swapped in (False, True):
    if swapped:  # C^T[j, i] = sum_l B^T[j, l] A^T[l, i]
      mm, nn = n, m
      sa = (b_strides[1], b_strides[0])
      sb = (a_strides[1], a_strides[0])
      sc = (c_strides[1], c_strides[0])
    else:
      mm, nn, sa, sb, sc = m, n, a_strides, b_strides, c_strides
    c = _operand(mm, nn, sc[0], sc[1])
    if c is None or c[0] != NO_TRANS:
      continue
    a = _operand(mm, k, sa[0], sa[1])
    b = _operand(k, nn, sb[0], sb[1])
    if a is None or b is None:
      continue
    return GemmPlan(m=mm, n=nn, k=k, trans_a=a[0], trans_b=b[0], lda=a[1],
                    ldb=b[1], ldc=c[1], swapped=swapped)
  return None


# --- emission -----------------------------------------------------------------


def _gemm_decl(module: ir.Module, lib: BlasLibrary,
               element_type: PrimitiveType) -> ir.Function:
  letter = GEMM_TYPES[element_type]
  name = lib.symbol(letter)
  existing = module.globals.get(name)
  if existing is not None:
    return existing
  i32 = ir.IntType(32)
  it = ir.IntType(lib.int_bits)
  elem = kernel_api.llvm_storage_type(element_type)
  ptr = elem.as_pointer()
  if letter in "sd":
    scalar = elem
  else:  # complex alpha / beta are passed by pointer
    scalar = ir.IntType(8).as_pointer()
  fnty = ir.FunctionType(ir.VoidType(), [
      i32, i32, i32, it, it, it, scalar, ptr, it, ptr, it, scalar, ptr, it])
  fn = ir.Function(module, fnty, name)
  return fn


def emit_gemm_call(b: ir.IRBuilder, lib: BlasLibrary,
                   element_type: PrimitiveType, plan: GemmPlan, a_ptr, b_ptr,
                   c_ptr, beta_one, m=None, n=None) -> None:
  """Emits `C = A B + beta C` per `plan`. Pointers are to our A, B, C (typed
  as the element's storage); `beta_one` is an i1 (accumulate into C) or a
  Python bool. `m` / `n` (i64 values) override the plan's sizes (of our,
  unswapped, A rows / B columns) when the caller clips them at run time."""
  it = ir.IntType(lib.int_bits)
  i32 = ir.IntType(32)
  if plan.swapped:
    a_ptr, b_ptr = b_ptr, a_ptr
    m, n = n, m
  m_val = ir.Constant(it, plan.m) if m is None else _int(b, m, it)
  n_val = ir.Constant(it, plan.n) if n is None else _int(b, n, it)
  if isinstance(beta_one, bool):
    beta_one = ir.Constant(ir.IntType(1), int(beta_one))
  _call_gemm(b, lib, element_type,
             (ir.Constant(i32, plan.trans_a), ir.Constant(i32, plan.trans_b),
              m_val, n_val, ir.Constant(it, plan.k), ir.Constant(it, plan.lda),
              ir.Constant(it, plan.ldb), ir.Constant(it, plan.ldc)),
             a_ptr, b_ptr, c_ptr, beta_one)


def emit_runtime_gemm_call(b: ir.IRBuilder, lib: BlasLibrary,
                           element_type: PrimitiveType, word, fields,
                           a_ptr, b_ptr, c_ptr, beta_one, m, n) -> None:
  """`emit_gemm_call` for a plan known at run time: `word(i)` loads entry i
  of the caller's table, `fields` are the entries holding (trans_a,
  trans_b, k, lda, ldb, ldc); the operands are already swapped as the plan
  says, and m / n are i64 values."""
  it = ir.IntType(lib.int_bits)
  i32 = ir.IntType(32)
  trans_a, trans_b, k, lda, ldb, ldc = (word(f) for f in fields)
  _call_gemm(b, lib, element_type,
             (b.trunc(trans_a, i32), b.trunc(trans_b, i32), _int(b, m, it),
              _int(b, n, it), _int(b, k, it), _int(b, lda, it),
              _int(b, ldb, it), _int(b, ldc, it)),
             a_ptr, b_ptr, c_ptr, beta_one)


def _call_gemm(b: ir.IRBuilder, lib: BlasLibrary, element_type: PrimitiveType,
               sizes, a_ptr, b_ptr, c_ptr, beta_one) -> None:
  """The row-major cblas call C = op(A) op(B) + beta C with alpha 1 and
  beta 0 or 1 (i1 `beta_one`); `sizes` are (trans_a, trans_b) as i32 and
  (m, n, k, lda, ldb, ldc) in the interface's integer type."""
  fn = _gemm_decl(b.module, lib, element_type)
  trans_a, trans_b, m, n, k, lda, ldb, ldc = sizes
  letter = GEMM_TYPES[element_type]
  elem = kernel_api.llvm_storage_type(element_type)
  if letter in "sd":
    alpha = ir.Constant(elem, 1.0)
    beta = b.select(beta_one, ir.Constant(elem, 1.0), ir.Constant(elem, 0.0))
  else:  # complex alpha / beta are passed by pointer
    part = elem.elements[0]
    one = ir.Constant(elem, [ir.Constant(part, 1.0), ir.Constant(part, 0.0)])
    zero = ir.Constant(elem, [ir.Constant(part, 0.0), ir.Constant(part, 0.0)])
    with b.goto_entry_block():
      alpha_slot = b.alloca(elem, name="gemm_alpha")
      beta_slot = b.alloca(elem, name="gemm_beta")
    b.store(one, alpha_slot)
    b.store(b.select(beta_one, one, zero), beta_slot)
    i8p = ir.IntType(8).as_pointer()
    alpha = b.bitcast(alpha_slot, i8p)
    beta = b.bitcast(beta_slot, i8p)
  b.call(fn, [ir.Constant(ir.IntType(32), ROW_MAJOR), trans_a, trans_b, m, n,
              k, alpha, a_ptr, lda, b_ptr, ldb, beta, c_ptr, ldc])


def _int(b: ir.IRBuilder, v, ty: ir.IntType):
  if v.type.width == ty.width:
    return v
  return b.trunc(v, ty) if v.type.width > ty.width else b.sext(v, ty)
