"""CPU kernels for `cholesky` and `triangular-solve` (batched; f32, f64,
c64, c128), computed in the element type like XLA's CPU runtime. The
parallel extent is the number of matrices in the batch.

cholesky: L with A = L L^H from A's lower triangle (`lower=true`), or U
with A = U^H U from its upper triangle, column by column (Cholesky-Crout,
the evaluator's order); the other triangle of the result is zero. A matrix
whose pivot is NaN (not positive definite) becomes all NaN, as XLA does.
The upper case runs the lower algorithm on the transpose, reading a[j, i]
for (i, j) and writing back transposed; as Hermitian A has a^T = conj(A),
that yields exactly U = L^H.

triangular-solve: op(A) X = B (`left_side`) or X op(A) = B with op = id,
transpose or adjoint, reading only A's `lower` (or upper) triangle and
taking its diagonal as ones with `unit_diagonal`. Every transposition is
folded into how elements are addressed: op(A) flips the triangle, and a
right-side solve is solved as op(A)^T X^T = B^T (flipping it again), so
one forward / backward substitution over rows i of X^(T) serves all 16
combinations: X[i, :] = (B[i, :] - sum_k A'[i, k] X[k, :]) / A'[i, i],
the inner update along a row of X so it vectorizes for left-side solves.
Both kernels read each input element before writing the output element in
the same place, so the output may share the input's buffer.
"""

from __future__ import annotations

import math

from llvmlite import ir

import support
from xla import primitive_util
from xla.service.cpu import kernel_api
from xla.service.cpu import op_emitter_util as u
from xla.xla_data import PrimitiveType

P = PrimitiveType
_TYPES = {P.F32: (ir.FloatType(), False), P.F64: (ir.DoubleType(), False),
          P.C64: (ir.FloatType(), True), P.C128: (ir.DoubleType(), True)}


class _Arith:
  """Scalar arithmetic on real floats or {re, im} complex structs."""

  def __init__(self, b: ir.IRBuilder, et: PrimitiveType, opcode: str):
    if et not in _TYPES:
      raise support.UnimplementedError(
          f"CPU codegen for {opcode}: element type "
          f"{primitive_util.lowercase_name(et)} (f32, f64, c64, c128 only)")
    self.b = b
    self.real_ty, self.is_complex = _TYPES[et]

  def _parts(self, z):
    return self.b.extract_value(z, 0), self.b.extract_value(z, 1)

  def _make(self, re, im):
    z = ir.Constant(ir.LiteralStructType([self.real_ty, self.real_ty]),
                    ir.Undefined)
    z = self.b.insert_value(z, re, 0)
    return self.b.insert_value(z, im, 1)

  def sub(self, x, y):
    b = self.b
    if not self.is_complex:
      return b.fsub(x, y)
    (a, c), (d, e) = self._parts(x), self._parts(y)
    return self._make(b.fsub(a, d), b.fsub(c, e))

  def mul(self, x, y):
    b = self.b
    if not self.is_complex:
      return b.fmul(x, y)
    (a, c), (d, e) = self._parts(x), self._parts(y)
    return self._make(b.fsub(b.fmul(a, d), b.fmul(c, e)),
                      b.fadd(b.fmul(a, e), b.fmul(c, d)))

  def div(self, x, y):
    """x / y; complex by Smith's algorithm (no needless overflow)."""
    b = self.b
    if not self.is_complex:
      return b.fdiv(x, y)
    (a, c), (d, e) = self._parts(x), self._parts(y)
    fabs = b.module.declare_intrinsic("llvm.fabs", [self.real_ty])
    small_im = b.fcmp_ordered(">=", b.call(fabs, [d]), b.call(fabs, [e]))
    # |d| >= |e|: r = e/d, den = d + e r; else r = d/e, den = d r + e.
    r1 = b.fdiv(e, d)
    den1 = b.fadd(d, b.fmul(e, r1))
    re1 = b.fdiv(b.fadd(a, b.fmul(c, r1)), den1)
    im1 = b.fdiv(b.fsub(c, b.fmul(a, r1)), den1)
    r2 = b.fdiv(d, e)
    den2 = b.fadd(b.fmul(d, r2), e)
    re2 = b.fdiv(b.fadd(b.fmul(a, r2), c), den2)
    im2 = b.fdiv(b.fsub(b.fmul(c, r2), a), den2)
    return self._make(b.select(small_im, re1, re2),
                      b.select(small_im, im1, im2))

  def conj(self, x):
    if not self.is_complex:
      return x
    re, im = self._parts(x)
    return self._make(re, self.b.fneg(im))

  def real(self, x):
    return self._parts(x)[0] if self.is_complex else x

  def from_real(self, r):
    if not self.is_complex:
      return r
    return self._make(r, ir.Constant(self.real_ty, 0.0))

  def zero(self):
    return self.from_real(ir.Constant(self.real_ty, 0.0))

  def nan(self):
    n = ir.Constant(self.real_ty, float("nan"))
    return self._make(n, n) if self.is_complex else n

  def sqrt(self, r):
    fn = self.b.module.declare_intrinsic("llvm.sqrt", [self.real_ty])
    return self.b.call(fn, [r])


def _matrix_dims(instr, shape, what):
  dims = tuple(shape.dimensions)
  if len(dims) < 2:
    raise support.InvalidArgumentError(
        f"{instr.opcode.value} {instr.name}: {what} must have rank >= 2")
  return dims


@kernel_api.register_kernel_emitter("cholesky")
def emit_cholesky(ctx: kernel_api.KernelContext,
                  instr) -> kernel_api.KernelSpec:
  dims = _matrix_dims(instr, instr.operand(0).shape, "the operand")
  n = dims[-1]
  if dims[-2] != n:
    raise support.InvalidArgumentError(
        f"cholesky {instr.name}: matrices must be square, got {dims}")
  lower = bool(instr.attr("lower"))
  ka = u.KernelArgs(ctx, instr, f"cholesky_{instr.name}")
  b = ka.b
  ar = _Arith(b, instr.shape.element_type, "cholesky")
  batch = math.prod(dims[:-2])
  if batch == 0 or n == 0:
    b.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, 0)
  src, dst = ka.operands[0], ka.results[0]
  bad = u.entry_alloca(b, u.I1, name="bad")
  acc = u.entry_alloca(b, ar.zero().type, name="acc")

  def at(ptr, base, i, j):
    """&M[i, j] of the matrix as the lower algorithm sees it."""
    r, c = (i, j) if lower else (j, i)
    return b.gep(ptr, [b.add(base, b.add(b.mul(r, u.i64(n)), c))])

  with u.for_range(b, ka.begin, ka.end, "mat") as m:
    base = b.mul(m, u.i64(n * n))
    b.store(ir.Constant(u.I1, 0), bad)
    with u.for_range(b, 0, n, "j") as j:
      b.store(b.load(at(src, base, j, j)), acc)
      with u.for_range(b, 0, j, "k") as k:
        ljk = b.load(at(dst, base, j, k))
        b.store(ar.sub(b.load(acc), ar.mul(ljk, ar.conj(ljk))), acc)
      piv = ar.sqrt(ar.real(b.load(acc)))
      is_nan = b.fcmp_unordered("uno", piv, piv)
      b.store(b.or_(b.load(bad), is_nan), bad)
      pivv = ar.from_real(piv)
      b.store(pivv, at(dst, base, j, j))
      with u.for_range(b, b.add(j, u.i64(1)), n, "i") as i:
        b.store(b.load(at(src, base, i, j)), acc)
        with u.for_range(b, 0, j, "k2") as k:
          lik = b.load(at(dst, base, i, k))
          ljk = b.load(at(dst, base, j, k))
          b.store(ar.sub(b.load(acc), ar.mul(lik, ar.conj(ljk))), acc)
        b.store(ar.div(b.load(acc), pivv), at(dst, base, i, j))
    # The other triangle is zero; a failed factorization is all NaN.
    with b.if_else(b.load(bad)) as (then, otherwise):
      with then:
        with u.for_range(b, 0, n * n, "nan") as e:
          b.store(ar.nan(), b.gep(dst, [b.add(base, e)]))
      with otherwise:
        with u.for_range(b, 0, n, "zi") as i:
          with u.for_range(b, b.add(i, u.i64(1)), n, "zj") as j:
            b.store(ar.zero(), at(dst, base, i, j))
  b.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, batch, cost=batch * n ** 3 // 3)


@kernel_api.register_kernel_emitter("triangular-solve")
def emit_triangular_solve(ctx: kernel_api.KernelContext,
                          instr) -> kernel_api.KernelSpec:
  a_dims = _matrix_dims(instr, instr.operand(0).shape, "a")
  b_dims = _matrix_dims(instr, instr.operand(1).shape, "b")
  m = a_dims[-1]
  left = bool(instr.attr("left_side"))
  if a_dims[-2] != m or a_dims[:-2] != b_dims[:-2] or (
      b_dims[-2] if left else b_dims[-1]) != m:
    raise support.InvalidArgumentError(
        f"triangular-solve {instr.name}: incompatible shapes a={a_dims} "
        f"b={b_dims} (left_side={left})")
  lower = bool(instr.attr("lower"))
  unit = bool(instr.attr("unit_diagonal"))
  trans = instr.attr("transpose_a").name
  if trans not in ("TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE",
                   "ADJOINT"):
    raise support.UnimplementedError(
        f"triangular-solve {instr.name}: transpose_a={trans}")
  transposed = trans in ("TRANSPOSE", "ADJOINT")
  conj = trans == "ADJOINT"
  # Forward substitution iff the effective matrix is lower triangular.
  forward = lower != transposed
  swap_a = transposed  # A'(i, k) = A(k, i) after op()
  if not left:
    forward = not forward
    swap_a = not swap_a
  ncols = b_dims[-1] if left else b_dims[-2]
  ka = u.KernelArgs(ctx, instr, f"triangular_solve_{instr.name}")
  bld = ka.b
  ar = _Arith(bld, instr.shape.element_type, "triangular-solve")
  batch = math.prod(a_dims[:-2])
  if batch == 0 or m == 0 or ncols == 0:
    bld.ret_void()
    return kernel_api.KernelSpec(ka.fn.name, 1, 0)
  a_ptr, b_ptr = ka.operands
  x_ptr = ka.results[0]
  rhs_size = m * ncols

  def a_elem(base, i, k):
    r, c = (k, i) if swap_a else (i, k)
    v = bld.load(bld.gep(a_ptr, [bld.add(base, bld.add(
        bld.mul(r, u.i64(m)), c))]))
    return ar.conj(v) if conj else v

  def xb_at(ptr, base, i, c):
    """&X'[i, c] (X' = X for left side, X^T for right side)."""
    off = (bld.add(bld.mul(i, u.i64(ncols)), c) if left else
           bld.add(bld.mul(c, u.i64(m)), i))
    return bld.gep(ptr, [bld.add(base, off)])

  with u.for_range(bld, ka.begin, ka.end, "mat") as mat:
    abase = bld.mul(mat, u.i64(m * m))
    xbase = bld.mul(mat, u.i64(rhs_size))
    with u.for_range(bld, 0, m, "step") as step:
      i = step if forward else bld.sub(u.i64(m - 1), step)
      with u.for_range(bld, 0, ncols, "c0") as c:
        bld.store(bld.load(xb_at(b_ptr, xbase, i, c)),
                  xb_at(x_ptr, xbase, i, c))
      k_lo = u.i64(0) if forward else bld.add(i, u.i64(1))
      k_hi = i if forward else u.i64(m)
      with u.for_range(bld, k_lo, k_hi, "k") as k:
        aik = a_elem(abase, i, k)
        with u.for_range(bld, 0, ncols, "c1") as c:
          p = xb_at(x_ptr, xbase, i, c)
          xk = bld.load(xb_at(x_ptr, xbase, k, c))
          bld.store(ar.sub(bld.load(p), ar.mul(aik, xk)), p)
      if not unit:
        d = a_elem(abase, i, i)
        with u.for_range(bld, 0, ncols, "c2") as c:
          p = xb_at(x_ptr, xbase, i, c)
          bld.store(ar.div(bld.load(p), d), p)
  bld.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, batch,
                               cost=batch * m * m * ncols)
