"""Gives BLAS an untransposed right-hand operand where that is faster.

`y = x W^T` with W an [N, K] array in memory (a `torch.nn.Linear` weight,
or the weight of a JAX dense layer in its backward pass) is a gemm whose B
operand is read transposed. OpenBLAS is slower at that than at the plain
product for a short left operand: with one thread, [64,128] x [128,512]
took 112 us transposed against 88 us plain, [64,128] x [128,128] 29
against 23 us; at 1024 rows the difference is a few percent. (MKL, which
torch calls, shows no such difference.)

This pass rewrites such a dot (rank 2, f32 or f64, a BLAS call, at most
MAX_ROWS rows, its B a parameter) to read `transpose(W)`, which
`transpose_kernels` moves in register blocks: [128,512] f32 in about 8 us
of a program, less than the gemm saves. It runs after fusion, so the
transpose stays a kernel of its own.
"""

from __future__ import annotations

from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.service.cpu import dot_emitter
from xla.shape import Shape
from xla.xla_data import PrimitiveType

O = HloOpcode

MAX_ROWS = 128          # rows of the product (M) at most
MIN_SIDE = 64           # N and K at least
MAX_ELEMENTS = 1 << 20  # elements of W at most (the copy it costs)
_TYPES = (PrimitiveType.F32, PrimitiveType.F64)


def _candidate(dot) -> bool:
  if dot.opcode != O.kDot or dot.shape.element_type not in _TYPES:
    return False
  lhs, rhs = dot.operand(0), dot.operand(1)
  if (len(lhs.shape.dimensions) != 2 or len(rhs.shape.dimensions) != 2 or
      rhs.opcode != O.kParameter):
    return False
  dn = dot.dot_dimension_numbers
  if (dn.lhs_batch_dimensions or dn.rhs_batch_dimensions or
      list(dn.rhs_contracting_dimensions) != [1] or
      len(dn.lhs_contracting_dimensions) != 1):
    return False
  m = lhs.shape.dimensions[1 - dn.lhs_contracting_dimensions[0]]
  n, k = rhs.shape.dimensions
  if m > MAX_ROWS or min(n, k) < MIN_SIDE or n * k > MAX_ELEMENTS:
    return False
  return dot_emitter.describe(dot) == "blas"


class BlasRhsTranspose(hpi.HloComputationPass):
  """See the module docstring."""

  @property
  def name(self) -> str:
    return "cpu-blas-rhs-transpose"

  def run_on_computation(self, comp, context=None) -> bool:
    changed = False
    for dot in list(comp.instructions):
      if dot.parent is comp and _candidate(dot):
        self._rewrite(comp, dot)
        changed = True
    return changed

  def _rewrite(self, comp, dot) -> None:
    rhs = dot.operand(1)
    n, k = rhs.shape.dimensions
    t = comp.add_instruction(hi.create_transpose(
        Shape.array(rhs.shape.element_type, [k, n]), rhs, [1, 0]))
    new = hi.HloInstruction(O.kDot, dot.shape, [dot.operand(0), t],
                            name=dot.name + ".nn")
    for key, v in dot.attrs.items():
      new.set_attr(key, v)
    new.set_attr("rhs_contracting_dims", (0,))
    new.metadata = dot.metadata
    comp.add_instruction(new)
    comp.replace_instruction(dot, new)

