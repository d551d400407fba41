"""`--stablehlo-legalize-quant-to-math`: rewrites a program on uniform
quantized types into one on their storage integers, with the quantization
arithmetic spelled out in integer and float StableHLO ops (the role of
upstream's pass of that name, which runs before XLA compiles such
programs).

After the pass no quantized type is left: every value, block argument,
function signature and constant of a quantized tensor type holds its
storage integers instead. Per op (the interpreter's rules, see
`interpreter/kernels_quantization.py`, so that results are identical):

* uniform_quantize / uniform_dequantize -> `quant_math.quantize`,
  `requantize`, `dequantize`;
* add on per-tensor quantized operands and result: both operands
  requantized to the result's scale in i32, added, the result zero point
  subtracted, clamped to the storage range; on identical per-axis i32 types:
  `x + y - zp`;
* maximum / minimum / select whose quantized operands and result share one
  per-tensor type (select: any one type): run on the storage integers;
* dot_general / dot / convolution with a per-tensor quantized lhs and
  quantized rhs and result ("static"): the storage integers are contracted
  in i32 and the zero-point corrections and combined scale applied after
  (`quant_math.finish_integer_dot`); convolution only for 2-D / 3-D NHWC /
  NCHW layouts, rhs zero points 0 and no lhs dilation, the lhs padded with
  its zero point;
* hybrid dot_general / convolution (float lhs, quantized rhs, float
  result): the rhs is dequantized and the float op runs;
* the arithmetic ops of the spec (abs, add, ..., tanh; `_ARITHMETIC`) and
  every case above whose conditions fail: dequantize the quantized
  operands, run the op on the expressed type, quantize the results;
* every other op (data movement, control flow, calls, returns, checks)
  keeps its operands and gets storage result types.

Dynamic shapes in quantized ops raise UnimplementedError.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from stablehlo._src.interpreter import kernels_linalg as linalg
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.ops import typeutil as tu
from stablehlo._src.transforms import quant_math as qm
import support


def _qt(ty) -> Optional[t.QuantizedType]:
  if ty is None or isinstance(ty, (t.TupleType, t.FunctionType)):
    return None
  et = t.element_type_of(ty)
  return et if isinstance(et, t.QuantizedType) else None


def storage_type(ty: t.Type) -> t.Type:
  """`ty` with every quantized element type replaced by its storage type."""
  if isinstance(ty, t.QuantizedType):
    return ty.storage_type
  if isinstance(ty, t.RankedTensorType):
    if isinstance(ty.element_type, t.QuantizedType):
      return t.RankedTensorType(ty.shape, ty.element_type.storage_type,
                                ty.encoding)
    return ty
  if isinstance(ty, t.UnrankedTensorType):
    et = ty.element_type
    return t.UnrankedTensorType(et.storage_type) if isinstance(
        et, t.QuantizedType) else ty
  if isinstance(ty, t.TupleType):
    return t.TupleType(tuple(storage_type(x) for x in ty.types))
  if isinstance(ty, t.FunctionType):
    return t.FunctionType(tuple(storage_type(x) for x in ty.inputs),
                          tuple(storage_type(x) for x in ty.results))
  return ty


def expressed_type(ty: t.Type) -> t.Type:
  """A tensor type with a quantized element type -> the expressed type."""
  qt = _qt(ty)
  if qt is None:
    return ty
  return t.RankedTensorType(ty.shape, qt.expressed_type, ty.encoding)


def _storage_attr(attr):
  if isinstance(attr, a.TypeAttr):
    new = storage_type(attr.value)
    return attr if new == attr.value else a.TypeAttr(new)
  if isinstance(attr, a.DenseElementsAttr):
    new = storage_type(attr.type)
    if new == attr.type:
      return attr
    return a.DenseElementsAttr(new, attr.array, attr.splat)
  return attr


def _has_quantized_type(ty) -> bool:
  return storage_type(ty) != ty


class _Case:
  """What a rule sees of one op: the op, its operands after legalization,
  and the quantized types of its original operands and results."""

  def __init__(self, op, operands, in_types, out_types):
    self.op = op
    self.x = operands
    self.in_types = in_types
    self.out_types = out_types
    self.qin = [_qt(ty) for ty in in_types]
    self.qout = [_qt(ty) for ty in out_types]


# A rule returns the new result values, or None to keep the op as it is
# (on storage types).
_Rule = Callable[[qm.Emitter, _Case], Optional[list]]
_RULES: dict[str, _Rule] = {}


def _rule(*names):
  def wrap(fn):
    for n in names:
      _RULES["stablehlo." + n] = fn
    return fn
  return wrap


# -- dequantize -> op -> quantize ----------------------------------------------


def dequantize_op_quantize(e: qm.Emitter, c: _Case) -> list:
  """Spec `dequantize_op_quantize` (and its compare / select variants)."""
  operands = [qm.dequantize(e, v, q) if q is not None else v
              for v, q in zip(c.x, c.qin)]
  new = e.clone(c.op, operands, [expressed_type(ty) for ty in c.out_types])
  return [qm.quantize(e, r, q) if q is not None else r
          for r, q in zip(new.results, c.qout)]


_ARITHMETIC = (
    "abs", "atan2", "batch_norm_grad", "batch_norm_inference",
    "batch_norm_training", "cbrt", "ceil", "cholesky", "clamp", "compare",
    "convert", "cosine", "divide", "exponential", "exponential_minus_one",
    "floor", "log", "log_plus_one", "logistic", "multiply", "negate", "power",
    "reduce_precision", "remainder", "round_nearest_afz",
    "round_nearest_even", "rsqrt", "sign", "sine", "sqrt", "subtract", "tan",
    "tanh", "triangular_solve")
for _n in _ARITHMETIC:
  _RULES["stablehlo." + _n] = dequantize_op_quantize


# -- uniform_quantize / uniform_dequantize -------------------------------------


@_rule("uniform_quantize")
def _uniform_quantize(e, c):
  dst, src = c.qout[0], c.qin[0]
  if dst is None:
    raise support.InvalidArgumentError(
        "uniform_quantize: result must be a quantized tensor")
  if src is not None:
    return [qm.requantize(e, c.x[0], src, dst)]
  return [qm.quantize(e, c.x[0], dst)]


@_rule("uniform_dequantize")
def _uniform_dequantize(e, c):
  return [qm.dequantize(e, c.x[0], c.qin[0],
                        t.element_type_of(c.out_types[0]))]


# -- add / maximum / minimum / select ------------------------------------------


@_rule("add")
def _add(e, c):
  ql, qr, qo = c.qin[0], c.qin[1], c.qout[0]
  if ql is None or qr is None or qo is None:
    return dequantize_op_quantize(e, c)
  shape = qm.static_shape(c.x[0])
  if any(q.quantized_dimension is not None for q in (ql, qr, qo)):
    if not (ql == qr == qo and qo.storage_type.width == 32):
      return dequantize_op_quantize(e, c)
    s = e.binary("add", c.x[0], c.x[1])
    zp = e.along(qo.zero_points, qo.storage_type, shape,
                 qo.quantized_dimension)
    return [e.binary("subtract", s, zp)]
  wide = qm.widened(qo)

  def to_i32(v, q):
    return e.convert(v, qm.I32) if q == qo else qm.requantize(e, v, q, wide)

  s = e.binary("add", to_i32(c.x[0], ql), to_i32(c.x[1], qr))
  if qo.zero_points[0] != 0:
    s = e.binary("subtract", s, e.splat(qm.wrap_i32(qo.zero_points[0]),
                                        qm.I32, shape))
  if qo.storage_type.width != 32:
    smin, smax = tu.storage_range(qo)
    s = e.clamp(smin, s, smax)
  return [e.convert(s, qo.storage_type)]


@_rule("maximum", "minimum", "select")
def _same_types_native(e, c):
  qts = {q for q in c.qin + c.qout if q is not None}
  if len(qts) == 1 and next(iter(qts)).quantized_dimension is None:
    return None
  if c.op.name == "stablehlo.select" and len(qts) == 1:
    return None
  return dequantize_op_quantize(e, c)


# -- dot_general / dot / convolution -------------------------------------------


def _is_static(ql, qr, qo) -> bool:
  if ql is None or ql.quantized_dimension is not None:
    return False
  if qr is None or qo is None:
    return False
  return (qr.quantized_dimension is None) == (qo.quantized_dimension is None)


def _hybrid(e, c) -> list:
  rhs = qm.hybrid_dequantize(e, c.x[1], c.qin[1])
  new = e.clone(c.op, [c.x[0], rhs] + list(c.x[2:]), list(c.out_types))
  return list(new.results)


@_rule("dot_general", "dot")
def _dot_general(e, c):
  ql, qr, qo = c.qin[0], c.qin[1], c.qout[0]
  if ql is None and qr is not None and qo is None:
    return _hybrid(e, c)
  if not _is_static(ql, qr, qo):
    return dequantize_op_quantize(e, c)
  lhs, rhs = c.x
  lshape, rshape = qm.static_shape(lhs), qm.static_shape(rhs)
  if c.op.name == "stablehlo.dot":
    lb, rb, lc, rc = (), (), (len(lshape) - 1,), (0,)
  else:
    lb, rb, lc, rc = (list(d) for d in linalg.dot_dims(c.op))
  lb, rb, lc, rc = list(lb), list(rb), list(lc), list(rc)
  out_shape = tuple(c.out_types[0].shape)
  l32, r32 = e.convert(lhs, qm.I32), e.convert(rhs, qm.I32)
  acc = e.clone(c.op, [l32, r32], [qm.tensor(out_shape, qm.I32)]).results[0]
  lfree = [d for d in range(len(lshape)) if d not in lb and d not in lc]
  rfree = [d for d in range(len(rshape)) if d not in rb and d not in rc]
  nb, nlf, nrf = len(lb), len(lfree), len(rfree)
  zl = ql.zero_points[0]
  zr = qr.zero_points[0] if qr.quantized_dimension is None else 0
  offset = None
  if zr != 0:  # zr * sum of lhs over its contracting dims
    s = e.reduce_sum(l32, lc)
    keep = [d for d in range(len(lshape)) if d not in lc]
    s = e.transpose(s, [keep.index(d) for d in lb + lfree])
    s = e.broadcast(s, out_shape, range(nb + nlf))
    offset = qm.scaled(e, s, zr)
  if zl != 0:  # zl * sum of rhs over its contracting dims
    s = e.reduce_sum(r32, rc)
    keep = [d for d in range(len(rshape)) if d not in rc]
    s = e.transpose(s, [keep.index(d) for d in rb + rfree])
    s = e.broadcast(s, out_shape, list(range(nb)) +
                    list(range(nb + nlf, nb + nlf + nrf)))
    s = qm.scaled(e, s, zl)
    offset = s if offset is None else e.binary("add", offset, s)
  if zl != 0 and zr != 0:
    k = math.prod(lshape[d] for d in lc)
    offset = e.binary("subtract", offset, e.splat(
        qm.wrap_i32(zl * zr * k), qm.I32, out_shape))
  return [qm.finish_integer_dot(e, acc, offset, ql, qr, qo)]


_CONV_LAYOUTS = {
    # (input, kernel, output) as (batch / in, feature / out, spatial dims).
    ((0, 3, (1, 2)), (2, 3, (0, 1)), (0, 3, (1, 2))),
    ((0, 1, (2, 3)), (1, 0, (2, 3)), (0, 1, (2, 3))),
    ((0, 4, (1, 2, 3)), (3, 4, (0, 1, 2)), (0, 4, (1, 2, 3))),
    ((0, 1, (2, 3, 4)), (0, 1, (2, 3, 4)), (0, 1, (2, 3, 4))),
}


def _conv_integer_ok(c: _Case, cfg, qr, qo) -> bool:
  if qr.quantized_dimension is None:
    if qr.zero_points[0] != 0:
      return False
  else:
    if any(z != 0 for z in tuple(qr.zero_points) + tuple(qo.zero_points)):
      return False
    if qr.quantized_dimension != len(c.in_types[1].shape) - 1:
      return False
    ratios = [so / sr for so, sr in zip(qo.scales, qr.scales)]
    if any(abs((x - ratios[0]) / ratios[0]) > 0.001 for x in ratios):
      return False
  if any(d != 1 for d in cfg.lhs_dil):
    return False
  d = cfg.dims
  key = ((d.ib, d.if_, tuple(d.isp)), (d.kif, d.kof, tuple(d.ksp)),
         (d.ob, d.of_, tuple(d.osp)))
  return key in _CONV_LAYOUTS


@_rule("convolution")
def _convolution(e, c):
  ql, qr, qo = c.qin[0], c.qin[1], c.qout[0]
  if ql is None and qr is not None and qo is None:
    return _hybrid(e, c)
  if not _is_static(ql, qr, qo):
    return dequantize_op_quantize(e, c)
  pad = c.op.attr("padding")
  rank = len(c.in_types[0].shape)
  cfg = linalg.ConvConfig(c.op, None if pad is None else tu.int_matrix(pad),
                          rank)
  if not _conv_integer_ok(c, cfg, qr, qo):
    return dequantize_op_quantize(e, c)
  lhs, rhs = c.x
  zl = ql.zero_points[0]
  lo, hi = [0] * rank, [0] * rank
  for dim, (l, h) in zip(cfg.dims.isp, cfg.padding):
    lo[dim], hi[dim] = l, h
  if any(lo) or any(hi):
    lhs = e.pad(lhs, e.splat(zl, ql.storage_type, ()), lo, hi)
  out_shape = tuple(c.out_types[0].shape)
  r32 = e.convert(rhs, qm.I32)
  acc = e.clone(c.op, [e.convert(lhs, qm.I32), r32],
                [qm.tensor(out_shape, qm.I32)], drop=("padding",))
  offset = None
  if zl != 0:
    d = cfg.dims
    s = e.reduce_sum(r32, sorted(tuple(d.ksp) + (d.kif,)))
    s = e.broadcast(s, out_shape, (d.of_,))
    offset = qm.scaled(e, s, zl)
  return [qm.finish_integer_dot(e, acc.results[0], offset, ql, qr, qo)]


# -- the driver ----------------------------------------------------------------


class _Legalizer:
  """Walks the module once, in order; values defined before their uses."""

  def __init__(self, module: core.Module):
    # The original types of every value (types are rewritten in place).
    self.types: dict[int, t.Type] = {}
    for op in module.walk():
      for v in op.results:
        self.types[id(v)] = v.type
      for region in op.regions:
        for block in region.blocks:
          for v in block.arguments:
            self.types[id(v)] = v.type
    self.mapping: dict[core.Value, core.Value] = {}

  def block(self, block: core.Block) -> None:
    for arg in block.arguments:
      arg.type = storage_type(arg.type)
    ops = []
    for op in block.operations:
      ops.extend(self.op(op))
    block.operations = []
    for op in ops:
      block.append(op)

  def op(self, op: core.Operation) -> list[core.Operation]:
    in_types = [self.types.get(id(v), v.type) for v in op.operands]
    out_types = [v.type for v in op.results]
    operands = [self.mapping.get(v, v) for v in op.operands]
    rule = _RULES.get(op.name)
    if rule is not None and any(_qt(ty) is not None
                                for ty in in_types + out_types):
      e = qm.Emitter(op)
      outs = rule(e, _Case(op, operands, in_types, out_types))
      if outs is not None:
        for old, new in zip(op.results, outs):
          self.mapping[old] = new
        return e.ops
    op.operands = operands
    for v in op.results:
      v.type = storage_type(v.type)
    for store in (op.attributes, op.properties):
      for k, v in store.items():
        store[k] = _storage_attr(v)
    for region in op.regions:
      for block in region.blocks:
        self.block(block)
    return [op]


def has_quantized_types(module: core.Module) -> bool:
  for op in module.walk():
    if any(_has_quantized_type(v.type) for v in op.results):
      return True
    for region in op.regions:
      for block in region.blocks:
        if any(_has_quantized_type(v.type) for v in block.arguments):
          return True
    fty = op.attr("function_type")
    if isinstance(fty, a.TypeAttr) and _has_quantized_type(fty.value):
      return True
  return False


def run(module: core.Module) -> bool:
  """Legalizes every quantized type of `module` in place; returns whether
  anything changed."""
  if not has_quantized_types(module):
    return False
  _Legalizer(module).block(module.body)
  return True
