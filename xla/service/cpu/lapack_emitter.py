"""Native kernels for JAX's LAPACK custom calls (`lapack_<t><routine>_ffi`).

`lapack_handlers.py` runs these calls from Python: per matrix it makes
Fortran-ordered numpy copies, boxes every scalar argument with ctypes and
calls LAPACK. On the small matrices programs factorize in a step (a batch of
64 x 64, say) that costs about 100 us a call beyond LAPACK's own time, and a
program with such a call cannot run without Python. Here the same call is a
kernel (kernel_api's ABI) that calls the same LAPACK routine directly: per
matrix of its part of the batch it copies the operands transposed into
column-major scratch, calls the routine with pointers to constant scalar
arguments (workspace sizes were asked from LAPACK once, at compile time),
and copies the results back transposed, converting LAPACK's integers to the
int32 results JAX expects. The conventions and results are exactly the
Python handlers', which stay the path for everything else (routines not
listed in `_SPECS`, matrices above `lapack_handlers.SINGLE_THREAD_ELEMENTS`,
which run on OpenBLAS's threads, and empty matrices). The parallel extent is
the number of matrices: the runtime may split a batch across its workers,
each calling LAPACK on one thread (the executable pins OpenBLAS to one
thread while it runs, as for gemm).

A routine's argument list is data: `_SPECS[routine](call)` returns the
argument descriptors (`_Char`, `_Int`, `_One`, `_Null`, `_Mat`, `_Vec`,
`_Work`, `_Info`) in LAPACK's order, and one generator emits every kernel.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import re
from typing import Callable, Optional, Sequence

import numpy as np
from llvmlite import ir

from xla.service.cpu import kernel_api
from xla.service.cpu import lapack
from xla.service.cpu import lapack_handlers
from xla.service.cpu import op_emitter_util as u
from xla.xla_data import PrimitiveType

P = PrimitiveType
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8_PTR = I8.as_pointer()

_TARGET = re.compile(r"lapack_([sdcz])(\w+)_ffi$")
_LETTER_TYPES = {"s": P.F32, "d": P.F64, "c": P.C64, "z": P.C128}
SYMBOL_PREFIX = "xla_cpu_lapack_"

# --- argument descriptors ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Char:
  """A CHARACTER argument (adds a hidden length of 1 at the end)."""
  value: str


@dataclasses.dataclass(frozen=True)
class _Int:
  """An INTEGER argument (the library's integer width)."""
  value: int


@dataclasses.dataclass(frozen=True)
class _One:
  """The scalar 1 of the routine's type (trsm's alpha)."""


@dataclasses.dataclass(frozen=True)
class _Null:
  """A null pointer (an argument LAPACK does not reference)."""


@dataclasses.dataclass(frozen=True)
class _Mat:
  """A column-major `ld` x `cols` scratch matrix of the routine's type.
  `src`: the operand whose matrix (`src_dims`, row-major) is copied in,
  transposed; without one the scratch starts zeroed. `dst`: the result the
  leading `dst_dims` block is copied out to, transposed. `pairs`: the
  argument index of geev's `wi`; the matrix holds real eigenvectors packed
  in LAPACK's way and the complex result gets them unpacked (zeros unless
  INFO is 0)."""
  ld: int
  cols: int
  src: Optional[int] = None
  src_dims: tuple = ()
  dst: Optional[int] = None
  dst_dims: tuple = ()
  pairs: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class _Vec:
  """A scratch vector of `length` elements of `kind` ("t": the routine's
  type, "r": its real type, "i": LAPACK's integer). `src`/`dst`: operand or
  result vectors of `count_in` / `count_out` elements copied in / out (an
  integer result is int32)."""
  length: int
  kind: str
  src: Optional[int] = None
  count_in: int = 0
  dst: Optional[int] = None
  count_out: int = 0


@dataclasses.dataclass(frozen=True)
class _Work:
  """Workspace of `length` elements of `kind` (as `_Vec`)."""
  length: int
  kind: str = "t"


@dataclasses.dataclass(frozen=True)
class _Info:
  """LAPACK's INFO; copied to int32 result `dst` when there is one."""
  dst: Optional[int] = None


# --- the routines --------------------------------------------------------------


class _Call:
  """What a spec needs to know about one custom call."""

  def __init__(self, instr, letter: str, routine: str):
    self.instr = instr
    self.letter = letter
    self.routine = routine
    self.complex = letter in "cz"
    self.lib = lapack.library()
    self.attrs = lapack_handlers.parse_backend_config(instr.backend_config)
    self.operands = [tuple(o.shape.dimensions) for o in instr.operands]
    leaves = kernel_api.array_leaves(instr.shape)
    self.results = [tuple(s.dimensions) for s in leaves]

  def char(self, name: str, default=None) -> Optional[str]:
    v = self.attrs.get(name, default)
    if v is None:
      return None
    return chr(v) if isinstance(v, int) else str(v)

  def query(self, *args) -> None:
    """A workspace query (lwork = -1) with Python arguments, as in
    lapack_handlers."""
    self.lib.call(self.letter + self.routine, *args,
                  scalar=np.dtype(_NUMPY[self.letter]))

  def work(self, n: int, real: bool = False) -> np.ndarray:
    dt = np.dtype(_NUMPY[self.letter])
    if real:
      dt = dt.type(0).real.dtype
    return np.zeros(max(1, int(n)), dt)

  def work1(self, real: bool = False) -> np.ndarray:
    return self.work(1, real)


_NUMPY = {"s": np.float32, "d": np.float64, "c": np.complex64,
          "z": np.complex128}


def _lwork(w: np.ndarray) -> int:
  return max(1, int(np.real(w[0])))


def _ld(n: int) -> int:
  return max(1, int(n))


def _trsm(c: _Call):
  (k, _), (m, n) = c.operands[0][-2:], c.operands[1][-2:]
  chars = [c.char(a) for a in ("side", "uplo", "trans_x", "diag")]
  if None in chars:
    return None
  return [*map(_Char, chars), _Int(m), _Int(n), _One(),
          _Mat(_ld(k), k, src=0, src_dims=(k, k)), _Int(_ld(k)),
          _Mat(_ld(m), n, src=1, src_dims=(m, n), dst=0, dst_dims=(m, n)),
          _Int(_ld(m))]


def _getrf(c: _Call):
  m, n = c.operands[0][-2:]
  mn = min(m, n)
  return [_Int(m), _Int(n),
          _Mat(_ld(m), n, src=0, src_dims=(m, n), dst=0, dst_dims=(m, n)),
          _Int(_ld(m)), _Vec(mn, "i", dst=1, count_out=mn), _Info(2)]


def _potrf(c: _Call):
  n = c.operands[0][-1]
  uplo = c.char("uplo")
  if uplo is None:
    return None
  return [_Char(uplo), _Int(n),
          _Mat(_ld(n), n, src=0, src_dims=(n, n), dst=0, dst_dims=(n, n)),
          _Int(_ld(n)), _Info(1)]


def _geqrf(c: _Call):
  m, n = c.operands[0][-2:]
  mn = min(m, n)
  w = c.work1()
  c.query(m, n, None, _ld(m), None, w, -1, c.lib.ints(1))
  lwork = _lwork(w)
  return [_Int(m), _Int(n),
          _Mat(_ld(m), n, src=0, src_dims=(m, n), dst=0, dst_dims=(m, n)),
          _Int(_ld(m)), _Vec(mn, "t", dst=1, count_out=mn),
          _Work(lwork), _Int(lwork), _Info()]


def _orgqr(c: _Call):
  m, n = c.operands[0][-2:]
  k = c.operands[1][-1]
  w = c.work1()
  c.query(m, n, k, None, _ld(m), None, w, -1, c.lib.ints(1))
  lwork = _lwork(w)
  return [_Int(m), _Int(n), _Int(k),
          _Mat(_ld(m), n, src=0, src_dims=(m, n), dst=0, dst_dims=(m, n)),
          _Int(_ld(m)), _Vec(k, "t", src=1, count_in=k),
          _Work(lwork), _Int(lwork), _Info()]


def _syevd(c: _Call):
  n = c.operands[0][-1]
  mode, uplo = c.char("mode"), c.char("uplo")
  if mode is None or uplo is None:
    return None
  w, iw, info = c.work1(), c.lib.ints(1), c.lib.ints(1)
  head = [_Char(mode), _Char(uplo), _Int(n),
          _Mat(_ld(n), n, src=0, src_dims=(n, n), dst=0, dst_dims=(n, n)),
          _Int(_ld(n)), _Vec(n, "r", dst=1, count_out=n)]
  if c.complex:
    rw = c.work1(real=True)
    c.query(mode, uplo, n, None, _ld(n), None, w, -1, rw, -1, iw, -1, info)
    lwork, lrwork, liwork = _lwork(w), _lwork(rw), _lwork(iw)
    tail = [_Work(lwork), _Int(lwork), _Work(lrwork, "r"), _Int(lrwork)]
  else:
    c.query(mode, uplo, n, None, _ld(n), None, w, -1, iw, -1, info)
    lwork, liwork = _lwork(w), _lwork(iw)
    tail = [_Work(lwork), _Int(lwork)]
  return head + tail + [_Work(liwork, "i"), _Int(liwork), _Info(2)]


def _svd(c: _Call, qr: bool):
  m, n = c.operands[0][-2:]
  mode = c.char("mode")
  if mode is None or mode == "O":
    return None  # the Python handler reports mode 'O'
  _, s_dims, u_dims, vt_dims, _ = c.results
  ucols = u_dims[-1]
  vt_rows, vt_cols = vt_dims[-2:]
  ldu, ldvt = _ld(m), _ld(vt_rows)
  mn = min(m, n)
  w, info = c.work1(), c.lib.ints(1)
  a = _Mat(_ld(m), n, src=0, src_dims=(m, n), dst=0, dst_dims=(m, n))
  s = _Vec(mn, "r", dst=1, count_out=s_dims[-1])
  um = _Mat(ldu, max(ucols, 1), dst=2, dst_dims=u_dims[-2:])
  vm = _Mat(ldvt, max(vt_cols, 1), dst=3, dst_dims=vt_dims[-2:])
  if qr:
    head = (mode, mode, m, n)
    lrwork = 5 * mn if c.complex else 0
  else:
    head = (mode, m, n)
    if not c.complex:
      lrwork = 0
    elif mode == "N":
      lrwork = 7 * mn
    else:
      lrwork = max(5 * mn * mn + 5 * mn, 2 * max(m, n) * mn + 2 * mn * mn + mn)
  rwork = [_Work(lrwork, "r")] if lrwork else []
  q_tail = [c.work(lrwork, real=True)] if lrwork else []
  if not qr:
    rwork.append(_Work(8 * mn, "i"))
    q_tail.append(c.lib.ints(8 * mn))
  c.query(*head, None, _ld(m), None, None, ldu, None, ldvt, w, -1, *q_tail,
          info)
  lwork = _lwork(w)
  return ([_Char(head[0])] + ([_Char(head[1])] if qr else []) +
          [_Int(m), _Int(n), a, _Int(_ld(m)), s, um, _Int(ldu), vm,
           _Int(ldvt), _Work(lwork), _Int(lwork)] + rwork + [_Info(4)])


def _gees(c: _Call):
  n = c.operands[0][-1]
  mode, sort = c.char("mode"), c.char("sort", ord("N"))
  if mode is None or sort != "N":
    return None  # the Python handler reports sorting
  nres = len(c.results)
  w, sdim, info = c.work1(), c.lib.ints(1), c.lib.ints(1)
  a = _Mat(_ld(n), n, src=0, src_dims=(n, n), dst=0, dst_dims=(n, n))
  vs = _Mat(_ld(n), n, dst=1, dst_dims=(n, n))
  head = [_Char(mode), _Char(sort), _Null(), _Int(n), a, _Int(_ld(n)),
          _Vec(1, "i", dst=nres - 2, count_out=1)]
  if c.complex:
    c.query(mode, sort, None, n, None, _ld(n), sdim, None, None, _ld(n), w,
            -1, c.work(n, real=True), None, info)
    lwork = _lwork(w)
    return head + [_Vec(n, "t", dst=2, count_out=n), vs, _Int(_ld(n)),
                   _Work(lwork), _Int(lwork), _Work(n, "r"), _Null(),
                   _Info(nres - 1)]
  c.query(mode, sort, None, n, None, _ld(n), sdim, None, None, None, _ld(n),
          w, -1, None, info)
  lwork = _lwork(w)
  return head + [_Vec(n, "t", dst=2, count_out=n),
                 _Vec(n, "t", dst=3, count_out=n), vs, _Int(_ld(n)),
                 _Work(lwork), _Int(lwork), _Null(), _Info(nres - 1)]


def _geev(c: _Call):
  n = c.operands[0][-1]
  jobvl, jobvr = c.char("compute_left"), c.char("compute_right")
  if jobvl is None or jobvr is None:
    return None
  nres = len(c.results)
  w, info = c.work1(), c.lib.ints(1)
  a = _Mat(_ld(n), n, src=0, src_dims=(n, n))
  head = [_Char(jobvl), _Char(jobvr), _Int(n), a, _Int(_ld(n))]
  if c.complex:
    c.query(jobvl, jobvr, n, None, _ld(n), None, None, _ld(n), None, _ld(n),
            w, -1, c.work(2 * n, real=True), info)
    lwork = _lwork(w)
    return head + [
        _Vec(n, "t", dst=0, count_out=n),
        _Mat(_ld(n), n, dst=1, dst_dims=(n, n)), _Int(_ld(n)),
        _Mat(_ld(n), n, dst=2, dst_dims=(n, n)), _Int(_ld(n)),
        _Work(lwork), _Int(lwork), _Work(2 * n, "r"), _Info(nres - 1)]
  c.query(jobvl, jobvr, n, None, _ld(n), None, None, None, _ld(n), None,
          _ld(n), w, -1, info)
  lwork = _lwork(w)
  wi = len(head) + 1
  return head + [
      _Vec(n, "t", dst=0, count_out=n), _Vec(n, "t", dst=1, count_out=n),
      _Mat(_ld(n), n, dst=2, dst_dims=(n, n), pairs=wi), _Int(_ld(n)),
      _Mat(_ld(n), n, dst=3, dst_dims=(n, n), pairs=wi), _Int(_ld(n)),
      _Work(lwork), _Int(lwork), _Info(nres - 1)]


# geev: an input with a non-finite entry is not factorized; its results are
# zeros and INFO is -4 (jaxlib's convention).
_FINITE_INPUT_INFO = {"geev": -4}


def _gehrd(c: _Call):
  m, n = c.operands[0][-2:]
  low, high = int(c.attrs.get("low", 1)), int(c.attrs.get("high", n))
  ntau = c.results[1][-1]
  w = c.work1()
  c.query(n, low, high, None, _ld(m), None, w, -1, c.lib.ints(1))
  lwork = _lwork(w)
  return [_Int(n), _Int(low), _Int(high),
          _Mat(_ld(m), n, src=0, src_dims=(m, n), dst=0, dst_dims=(m, n)),
          _Int(_ld(m)), _Vec(max(n - 1, 1), "t", dst=1, count_out=ntau),
          _Work(lwork), _Int(lwork), _Info(2)]


def _sytrd(c: _Call):
  m, n = c.operands[0][-2:]
  uplo = c.char("uplo")
  if uplo is None:
    return None
  _, d_dims, e_dims, tau_dims, _ = c.results
  w = c.work1()
  c.query(uplo, n, None, _ld(m), None, None, None, w, -1, c.lib.ints(1))
  lwork = _lwork(w)
  return [_Char(uplo), _Int(n),
          _Mat(_ld(m), n, src=0, src_dims=(m, n), dst=0, dst_dims=(m, n)),
          _Int(_ld(m)), _Vec(n, "r", dst=1, count_out=d_dims[-1]),
          _Vec(max(n - 1, 1), "r", dst=2, count_out=e_dims[-1]),
          _Vec(max(n - 1, 1), "t", dst=3, count_out=tau_dims[-1]),
          _Work(lwork), _Int(lwork), _Info(4)]


# routine (real name) -> (complex name, spec); a spec returns None for a call
# it leaves to the Python handler.
_SPECS: dict[str, tuple[str, Callable]] = {
    "trsm": ("trsm", _trsm),
    "getrf": ("getrf", _getrf),
    "potrf": ("potrf", _potrf),
    "geqrf": ("geqrf", _geqrf),
    "orgqr": ("ungqr", _orgqr),
    "syevd": ("heevd", _syevd),
    "gesdd": ("gesdd", lambda c: _svd(c, qr=False)),
    "gesvd": ("gesvd", lambda c: _svd(c, qr=True)),
    "gees": ("gees", _gees),
    "geev": ("geev", _geev),
    "gehrd": ("gehrd", _gehrd),
    "sytrd": ("hetrd", _sytrd),
}
_BY_NAME = {}
for _real, (_cplx, _spec) in _SPECS.items():
  _BY_NAME[_real] = _spec
  _BY_NAME[_cplx] = _spec
del _real, _cplx, _spec


def targets() -> list[str]:
  """The custom-call targets this module can run natively."""
  out = []
  for real, (cplx, _) in _SPECS.items():
    out += [f"lapack_{t}{real}_ffi" for t in "sd"]
    out += [f"lapack_{t}{cplx}_ffi" for t in "cz"]
  return sorted(out)


# --- symbols -------------------------------------------------------------------


def _symbol(name: str) -> str:
  return SYMBOL_PREFIX + name


_REGISTERED: list[bool] = []


def register_symbols() -> bool:
  """Binds `xla_cpu_lapack_<routine>` for every routine of `targets()` to
  the library's function (the disk cache needs them before it loads a
  kernel); False when there is no LAPACK."""
  if _REGISTERED:
    return _REGISTERED[0]
  if not lapack.available():
    _REGISTERED.append(False)
    return False
  lib = lapack.library()
  for target in targets():
    name = _TARGET.match(target).group(1) + _TARGET.match(target).group(2)
    try:
      fn = lib.function(name)
    except Exception:  # pylint: disable=broad-except
      continue  # not exported: such calls stay on the Python handler
    kernel_api.register_symbol(_symbol(name),
                               ctypes.cast(fn, ctypes.c_void_p).value)
  _REGISTERED.append(True)
  return True


# --- emission ------------------------------------------------------------------


def _scalar_type(kind: str, et: PrimitiveType, int_ty: ir.IntType) -> ir.Type:
  if kind == "i":
    return int_ty
  ty = kernel_api.llvm_storage_type(et)
  if kind == "r" and isinstance(ty, ir.LiteralStructType):
    return ty.elements[0]
  return ty


def _type_bytes(ty: ir.Type) -> int:
  if isinstance(ty, ir.IntType):
    return ty.width // 8
  if isinstance(ty, ir.FloatType):
    return 4
  if isinstance(ty, ir.DoubleType):
    return 8
  return sum(_type_bytes(e) for e in ty.elements)


def _global_constant(module: ir.Module, ty: ir.Type, value, base: str):
  g = ir.GlobalVariable(module, ty, module.get_unique_name(base))
  g.global_constant = True
  g.linkage = "private"
  g.unnamed_addr = True
  g.initializer = ir.Constant(ty, value)
  return g


def _one(ty: ir.Type):
  if isinstance(ty, ir.LiteralStructType):
    return [1.0, 0.0]
  return 1.0


def _convert_int(b: ir.IRBuilder, v: ir.Value, ty: ir.Type) -> ir.Value:
  if v.type == ty:
    return v
  if v.type.width > ty.width:
    return b.trunc(v, ty)
  return b.sext(v, ty)


def emit(ctx: kernel_api.KernelContext, instr) -> Optional[kernel_api.KernelSpec]:
  """A native kernel for the LAPACK custom call `instr`, or None when it
  stays with the Python handler (see the module docstring)."""
  m = _TARGET.match(instr.custom_call_target or "")
  if m is None or not lapack.available():
    return None
  letter, routine = m.group(1), m.group(2)
  spec_fn = _BY_NAME.get(routine)
  if spec_fn is None or not instr.operands:
    return None
  et = instr.operand(0).shape.element_type
  if _LETTER_TYPES[letter] != et:
    return None  # the handler reports the mismatch
  shapes = [o.shape for o in instr.operands] + kernel_api.array_leaves(
      instr.shape)
  if any(not s.is_array() for s in shapes):
    return None
  for s in shapes:
    try:
      u.check_row_major(s, "custom-call")
    except Exception:  # pylint: disable=broad-except
      return None
  if any(math.prod(o.shape.dimensions) == 0 for o in instr.operands):
    return None  # results may be empty (u and vt of values-only svd)
  matrices = [math.prod(d[-2:]) for d in
              (tuple(o.shape.dimensions) for o in instr.operands)
              if len(d) >= 2]
  if not matrices or max(matrices) > lapack_handlers.SINGLE_THREAD_ELEMENTS:
    return None
  call = _Call(instr, letter, routine)
  args = spec_fn(call)
  if args is None:
    return None
  name = letter + routine
  register_symbols()
  if not hasattr(call.lib.lib, call.lib.scheme.format(name)):
    return None
  return _emit_kernel(ctx, instr, call, name, args,
                      _FINITE_INPUT_INFO.get(routine))


def _emit_kernel(ctx, instr, call: _Call, name: str, args: Sequence,
                 nonfinite_info: Optional[int] = None
                 ) -> kernel_api.KernelSpec:
  et = instr.operand(0).shape.element_type
  int_ty = ir.IntType(call.lib.int_bits)
  module = ctx.module
  # optsize: the kernel's own loops copy matrices (O(n^2) around the
  # routine's O(n^3)); vectorised for size they compile in about 60% of
  # the time (a 64 x 64 dgeev kernel: 73 -> 46 ms of LLVM).
  ka = u.KernelArgs(ctx, instr, f"lapack_{name}", optsize=True)
  b = ka.b
  # Every routine here takes a batch of matrices first.
  batch_dims = tuple(instr.operand(0).shape.dimensions[:-2])
  batch = math.prod(batch_dims)

  # Scratch layout: one 16-byte aligned region per buffer argument.
  offsets: dict[int, tuple[int, ir.Type]] = {}
  total = 0
  for k, a in enumerate(args):
    if isinstance(a, _Mat):
      ty, count = _scalar_type("t", et, int_ty), a.ld * a.cols
    elif isinstance(a, (_Vec, _Work)):
      ty, count = _scalar_type(a.kind, et, int_ty), a.length
    elif isinstance(a, _Info):
      ty, count = int_ty, 1
    else:
      continue
    offsets[k] = (total, ty)
    total += (max(1, count) * _type_bytes(ty) + 15) // 16 * 16
  scratch = u.Scratch(b, total, name="lapack_scratch")

  # The routine and its constant arguments.
  n_chars = sum(isinstance(a, _Char) for a in args)
  fnty = ir.FunctionType(ir.VoidType(), [I8_PTR] * len(args) + [I64] * n_chars)
  fn = module.globals.get(_symbol(name))
  if fn is None:
    fn = ir.Function(module, fnty, _symbol(name))
  pointers: list = [None] * len(args)
  for k, a in enumerate(args):
    if isinstance(a, _Char):
      g = _global_constant(module, I8, ord(a.value), "lapack_char")
    elif isinstance(a, _Int):
      g = _global_constant(module, int_ty, int(a.value), "lapack_int")
    elif isinstance(a, _One):
      ty = _scalar_type("t", et, int_ty)
      g = _global_constant(module, ty, _one(ty), "lapack_one")
    elif isinstance(a, _Null):
      pointers[k] = ir.Constant(I8_PTR, None)
      continue
    else:
      off, ty = offsets[k]
      pointers[k] = scratch.at(b, off, ty)
      continue
    pointers[k] = g.bitcast(I8_PTR)

  operand_stride = [math.prod(s.dimensions[len(batch_dims):])
                    for s in ka.operand_shapes]
  result_stride = [math.prod(s.dimensions[len(batch_dims):])
                   for s in ka.result_shapes]
  memset = module.declare_intrinsic("llvm.memset", [I8_PTR, I64])

  def zero(ptr, nbytes: int) -> None:
    b.call(memset, [b.bitcast(ptr, I8_PTR), ir.Constant(I8, 0),
                    u.i64(nbytes), ir.Constant(ir.IntType(1), 0)])

  with u.for_range(b, ka.begin, ka.end, name="matrix") as bi:
    def operand(i):
      return b.gep(ka.operands[i], [b.mul(bi, u.i64(operand_stride[i]))])

    def result(i):
      return b.gep(ka.results[i], [b.mul(bi, u.i64(result_stride[i]))])

    def solve():
      _copy_in(b, args, pointers, offsets, operand, zero)
      b.call(fn, [b.bitcast(p, I8_PTR) for p in pointers] +
             [u.i64(1)] * n_chars)
      _copy_out(b, args, pointers, result, zero)

    if nonfinite_info is None:
      solve()
    else:
      rows, cols = instr.operand(0).shape.dimensions[-2:]
      finite = _all_finite(b, operand(0), rows * cols)
      with b.if_else(finite) as (then, otherwise):
        with then:
          solve()
        with otherwise:
          for i, shape in enumerate(ka.result_shapes):
            zero(result(i), result_stride[i] * u.byte_size(shape.element_type))
          info = [a for a in args if isinstance(a, _Info)][0]
          dst = result(info.dst)
          b.store(ir.Constant(dst.type.pointee, nonfinite_info), dst)
  scratch.release(b)
  b.ret_void()
  n = max(max(d[-2:]) for d in call.operands if len(d) >= 2)
  return kernel_api.KernelSpec(ka.fn.name, parallel_extent=batch,
                               cost=batch * n * n * n)



def _all_finite(b: ir.IRBuilder, ptr, count: int) -> ir.Value:
  """Whether none of `count` elements at `ptr` is an infinity or a NaN
  (x - x is 0 exactly for the finite ones)."""
  flag = u.entry_alloca(b, ir.IntType(1), name="finite")
  b.store(ir.Constant(ir.IntType(1), 1), flag)
  with u.for_range(b, u.i64(0), u.i64(count), name="fin") as i:
    v = b.load(b.gep(ptr, [i]))
    parts = ([b.extract_value(v, 0), b.extract_value(v, 1)]
             if isinstance(v.type, ir.LiteralStructType) else [v])
    ok = b.load(flag)
    for x in parts:
      ok = b.and_(ok, b.fcmp_ordered("==", b.fsub(x, x),
                                     ir.Constant(x.type, 0.0)))
    b.store(ok, flag)
  return b.load(flag)


def _copy_in(b: ir.IRBuilder, args, pointers, offsets, operand, zero):
  """Operands into the scratch arguments, transposed; other matrices
  zeroed."""
  for k, a in enumerate(args):
    if isinstance(a, _Mat):
      buf = pointers[k]
      if a.src is None:
        zero(buf, a.ld * a.cols * _type_bytes(offsets[k][1]))
        continue
      rows, cols = a.src_dims
      src = operand(a.src)
      with u.loop_nest(b, [rows, cols], name="in") as (i, j):
        v = b.load(b.gep(src, [u.linear_index(b, [i, j], [cols, 1])]))
        b.store(v, b.gep(buf, [u.linear_index(b, [i, j], [1, a.ld])]))
    elif isinstance(a, _Vec) and a.src is None:
      # Fresh per matrix, as the handlers' vectors are (LAPACK may leave
      # part of an output unwritten when it fails).
      zero(pointers[k], max(1, a.length) * _type_bytes(offsets[k][1]))
    elif isinstance(a, _Vec):
      src = operand(a.src)
      with u.for_range(b, u.i64(0), u.i64(a.count_in), name="vin") as i:
        v = b.load(b.gep(src, [i]))
        if isinstance(v.type, ir.IntType):
          v = _convert_int(b, v, offsets[k][1])
        b.store(v, b.gep(pointers[k], [i]))


def _copy_out(b: ir.IRBuilder, args, pointers, result, zero):
  """The scratch results out to the results, transposed and converted."""
  info_ptr = next((pointers[k] for k, a in enumerate(args)
                   if isinstance(a, _Info)), None)
  for k, a in enumerate(args):
    if isinstance(a, _Mat) and a.dst is not None:
      rows, cols = a.dst_dims
      dst = result(a.dst)
      if a.pairs is not None:
        ok = b.icmp_signed("==", b.load(info_ptr),
                           ir.Constant(info_ptr.type.pointee, 0))
        with b.if_else(ok) as (then, otherwise):
          with then:
            _unpack_eigenvectors(b, pointers[k], a.ld, pointers[a.pairs], dst,
                                 rows)
          with otherwise:
            zero(dst, rows * cols * _type_bytes(dst.type.pointee))
        continue
      with u.loop_nest(b, [rows, cols], name="out") as (i, j):
        v = b.load(b.gep(pointers[k], [u.linear_index(b, [i, j], [1, a.ld])]))
        b.store(v, b.gep(dst, [u.linear_index(b, [i, j], [cols, 1])]))
    elif isinstance(a, _Vec) and a.dst is not None:
      dst = result(a.dst)
      with u.for_range(b, u.i64(0), u.i64(a.count_out), name="vout") as i:
        v = b.load(b.gep(pointers[k], [i]))
        if isinstance(v.type, ir.IntType):
          v = _convert_int(b, v, dst.type.pointee)
        b.store(v, b.gep(dst, [i]))
    elif isinstance(a, _Info) and a.dst is not None:
      dst = result(a.dst)
      b.store(_convert_int(b, b.load(pointers[k]), dst.type.pointee), dst)


def _unpack_eigenvectors(b: ir.IRBuilder, v, ld: int, wi, out, n: int):
  """LAPACK's real eigenvectors (column-major `v`) as the complex row-major
  n x n `out`: a column j with wi[j] == 0 (or NaN, or the last one) is real;
  otherwise columns j and j + 1 hold the real and imaginary parts of the
  pair v[:, j] +/- i v[:, j + 1]."""
  cty = out.type.pointee
  zero_re = ir.Constant(cty.elements[0], 0.0)
  col = u.entry_alloca(b, I64, name="col")
  b.store(u.i64(0), col)
  cond_bb = b.append_basic_block("unpack.cond")
  body_bb = b.append_basic_block("unpack.body")
  done_bb = b.append_basic_block("unpack.done")
  b.branch(cond_bb)
  b.position_at_end(cond_bb)
  j = b.load(col)
  b.cbranch(b.icmp_signed("<", j, u.i64(n)), body_bb, done_bb)
  b.position_at_end(body_bb)
  j = b.load(col)
  w = b.load(b.gep(wi, [j]))
  last = b.icmp_signed(">=", b.add(j, u.i64(1)), u.i64(n))
  real = b.or_(b.fcmp_unordered("==", w, ir.Constant(w.type, 0.0)), last)

  def put(row, c, re, im):
    z = b.insert_value(ir.Constant(cty, ir.Undefined), re, 0)
    z = b.insert_value(z, im, 1)
    b.store(z, b.gep(out, [b.add(b.mul(row, u.i64(n)), c)]))

  with b.if_else(real) as (then, otherwise):
    with then:
      with u.for_range(b, u.i64(0), u.i64(n), name="r") as r:
        re = b.load(b.gep(v, [b.add(b.mul(j, u.i64(ld)), r)]))
        put(r, j, re, zero_re)
      b.store(b.add(j, u.i64(1)), col)
    with otherwise:
      j1 = b.add(j, u.i64(1))
      with u.for_range(b, u.i64(0), u.i64(n), name="r") as r:
        re = b.load(b.gep(v, [b.add(b.mul(j, u.i64(ld)), r)]))
        im = b.load(b.gep(v, [b.add(b.mul(j1, u.i64(ld)), r)]))
        put(r, j, re, im)
        put(r, j1, re, b.fneg(im))
      b.store(b.add(j, u.i64(2)), col)
  b.branch(cond_bb)
  b.position_at_end(done_bb)


register_symbols()
