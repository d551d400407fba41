"""CPU code for collectives.

Single-device programs (one replica, one partition): every collective has
a single participant. all-reduce, all-gather, reduce-scatter, all-to-all
and collective-broadcast return their operands unchanged (the reduction of
one value is that value; gathering or scattering over one participant
keeps the shape), and collective-permute copies its operand when the pair
(0, 0) is listed and otherwise yields zeros (no one sends to device 0).
These kernels are those copies (memmove, so the output may share the
operand's buffer).

Programs of several participants (replicas x partitions > 1): the
collectives, replica-id and partition-id become *collective thunks* that
the runtime runs between the participants' instances (collectives.py).
`collective_config` checks such an instruction and returns its plan entry's
JSON configuration, resolved here once for the program's participants
(collective_ops_utils.py):

  groups    the groups of flattened participant ids, in result order
            (all-reduce, all-gather, reduce-scatter, all-to-all,
            collective-broadcast)
  pairs     [source, target] flattened ids (collective-permute)
  dim       all-gather / reduce-scatter / all-to-all dimension (all-to-all:
            null for the tuple form)
  reduce    a reduction numpy runs ("add", "multiply", "minimum",
            "maximum", "and", "or", "xor"), or null
  combiner  the name of a kernel `out[i] = computation(a[i], b[i])` over
            args [a, b, out] and range [begin, end), for reductions numpy
            does not run (other computations, ml_dtypes element types)
"""

from __future__ import annotations

from typing import Optional

import numpy as np
from llvmlite import ir

import support
from xla import primitive_util
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.service import collective_ops_utils as cou
from xla.service.cpu import kernel_api
from xla.service.cpu import op_emitter_util as u

O = HloOpcode


def _check_single_device(instr) -> None:
  comp = instr.parent
  module = comp.parent if comp is not None else None
  config = getattr(module, "config", None)
  replicas = getattr(config, "replica_count", 1) or 1
  partitions = getattr(config, "num_partitions", 1) or 1
  if replicas * partitions != 1:
    raise support.UnimplementedError(
        f"CPU codegen for {instr.opcode.value} ({instr.name}): "
        f"{replicas} replicas x {partitions} partitions (only single-device "
        "programs are supported)")
  if instr.has_attr("replica_groups"):
    for group in instr.attr("replica_groups") or ():
      ids = list(getattr(group, "replica_ids", group) or ())
      if len(ids) > 1:
        raise support.InvalidArgumentError(
            f"{instr.opcode.value} {instr.name}: replica group {ids} names "
            "more than one device in a single-device program")


def _emit_copies(ctx, instr, zero: bool = False) -> kernel_api.KernelSpec:
  _check_single_device(instr)
  ka = u.KernelArgs(ctx, instr, f"{instr.opcode.value}_{instr.name}")
  b = ka.b
  if len(ka.operand_shapes) != len(ka.result_shapes):
    raise support.UnimplementedError(
        f"CPU codegen for {instr.opcode.value} ({instr.name}): "
        f"{len(ka.operand_shapes)} operand arrays for "
        f"{len(ka.result_shapes)} results")
  total = 0
  for src, dst, s_in, s_out in zip(ka.operands, ka.results,
                                   ka.operand_shapes, ka.result_shapes):
    if (s_in.dimensions != s_out.dimensions or
        s_in.element_type != s_out.element_type):
      raise support.UnimplementedError(
          f"CPU codegen for {instr.opcode.value} ({instr.name}): result "
          f"{s_out} differs from operand {s_in} (more than one participant)")
    count = u.num_elements(s_in)
    total += count
    if zero:
      nbytes = count * u.byte_size(s_in.element_type)
      if nbytes:
        fn = b.module.declare_intrinsic("llvm.memset", [u.I8_PTR, u.I64])
        b.call(fn, [b.bitcast(dst, u.I8_PTR), ir.Constant(u.I8, 0),
                    u.i64(nbytes), ir.Constant(u.I1, 0)])
    else:
      u.copy_array(b, dst, src, count, s_in.element_type)
  b.ret_void()
  return kernel_api.KernelSpec(ka.fn.name, 1, cost=total)


for _name in ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
              "collective-broadcast"):
  kernel_api.register_kernel_emitter(_name)(
      lambda ctx, instr: _emit_copies(ctx, instr))


@kernel_api.register_kernel_emitter("collective-permute")
def emit_collective_permute(ctx: kernel_api.KernelContext,
                            instr) -> kernel_api.KernelSpec:
  if instr.operand_count != 1:
    raise support.UnimplementedError(
        f"CPU codegen for collective-permute ({instr.name}): the "
        "in-place (4-operand) form")
  pairs = [tuple(p) for p in instr.attr("source_target_pairs") or ()]
  for s, t in pairs:
    if s != 0 or t != 0:
      raise support.InvalidArgumentError(
          f"collective-permute {instr.name}: pair ({s}, {t}) names a device "
          "other than 0 in a single-device program")
  return _emit_copies(ctx, instr, zero=(0, 0) not in pairs)


# -- programs of several participants ---------------------------------------------

# Opcodes that run as collective thunks in a multi-participant program.
RUNTIME_OPCODES = frozenset({
    O.kAllReduce, O.kAllGather, O.kReduceScatter, O.kAllToAll,
    O.kCollectivePermute, O.kCollectiveBroadcast, O.kReplicaId,
    O.kPartitionId,
})

_REDUCERS = {O.kAdd: "add", O.kMultiply: "multiply", O.kMinimum: "minimum",
             O.kMaximum: "maximum", O.kAnd: "and", O.kOr: "or",
             O.kXor: "xor"}


def participants(module) -> tuple[int, int]:
  """(replicas, partitions) of `module`'s config."""
  config = getattr(module, "config", None)
  return (int(getattr(config, "replica_count", 1) or 1),
          int(getattr(config, "num_partitions", 1) or 1))


def reduction_kind(computation) -> Optional[str]:
  """The name of the binary op `computation` is (its root applied to its
  two scalar parameters, in either order), or None."""
  params = computation.parameter_instructions
  root = computation.root_instruction
  if len(params) != 2 or root.opcode not in _REDUCERS:
    return None
  if any(p.shape.is_tuple() or p.shape.dimensions for p in params):
    return None
  if {id(o) for o in root.operands} != {id(p) for p in params}:
    return None
  return _REDUCERS[root.opcode]


def _numpy_runs(kind: Optional[str], element_type) -> bool:
  """Whether a numpy ufunc computes reduction `kind` of `element_type`
  exactly as the HLO op does."""
  if kind is None:
    return False
  dtype = np.dtype(primitive_util.numpy_dtype(element_type))
  if not dtype.isbuiltin:
    return False  # ml_dtypes (bf16, f8, int4): through the computation
  if dtype.kind == "b":
    return kind in ("and", "or", "xor")
  if dtype.kind in "fc":
    return kind in ("add", "multiply", "minimum", "maximum") and not (
        dtype.kind == "c" and kind in ("minimum", "maximum"))
  return dtype.kind in "iu"


def _emit_combiner(ctx: kernel_api.KernelContext, instr,
                   element_type) -> str:
  """A kernel over args [a, b, out]: out[i] = to_apply(a[i], b[i]) for i in
  [begin, end); returns its name."""
  comp = instr.to_apply
  params = sorted(comp.parameter_instructions,
                  key=lambda p: p.parameter_number)
  leaves = [p.shape for p in params] + [comp.root_instruction.shape]
  if len(params) != 2 or any(
      s.is_tuple() or s.dimensions or s.element_type != element_type
      for s in leaves):
    raise support.UnimplementedError(
        f"CPU backend: {instr.opcode.value} {instr.name}: reduction "
        f"computation {comp.name} is not a scalar binary function of "
        f"{primitive_util.lowercase_name(element_type)} (a variadic or "
        "mixed-type reducer)")
  scalar = ctx.scalar_computation(comp)
  fn, b = ctx.new_kernel(f"{instr.name}_combiner")
  a_ptr = kernel_api.KernelContext.arg_pointer(b, fn, 0, element_type)
  b_ptr = kernel_api.KernelContext.arg_pointer(b, fn, 1, element_type)
  o_ptr = kernel_api.KernelContext.arg_pointer(b, fn, 2, element_type)
  with u.for_range(b, fn.args[1], fn.args[2]) as i:
    b.call(scalar, [b.gep(a_ptr, [i]), b.gep(b_ptr, [i]),
                    b.gep(o_ptr, [i])])
  b.ret_void()
  return fn.name


def _unimplemented(instr, why: str) -> support.UnimplementedError:
  return support.UnimplementedError(
      f"CPU backend: {instr.opcode.value} {instr.name} in a program of "
      f"several participants: {why}")


def _same_size_groups(instr, groups) -> int:
  sizes = {len(g) for g in groups}
  if len(sizes) != 1:
    raise _unimplemented(instr, f"replica groups of different sizes "
                         f"{[list(g) for g in groups]}")
  return sizes.pop()


def _require_cover(instr, groups, total: int) -> None:
  covered = {x for g in groups for x in g}
  missing = sorted(set(range(total)) - covered)
  if missing:
    raise support.InvalidArgumentError(
        f"{instr.opcode.value} {instr.name}: participant(s) {missing} are in "
        f"none of the replica groups {[list(g) for g in groups]} (every "
        "participant runs it)")


def collective_config(ctx: kernel_api.KernelContext, instr
                      ) -> tuple[dict, list[str]]:
  """The plan configuration of multi-participant collective `instr` (see
  the module docstring) and the kernels it calls.

  Raises:
    support.InvalidArgumentError: groups that name ids outside the program,
      leave participants out, or do not fit the shapes.
    support.UnimplementedError: forms the runtime does not run.
  """
  module = instr.parent.parent if instr.parent is not None else None
  n_rep, n_part = participants(module)
  total = n_rep * n_part
  op = instr.opcode
  if op == O.kReplicaId:
    return {"id": "replica"}, []
  if op == O.kPartitionId:
    return {"id": "partition"}, []
  operands = [s for o in instr.operands
              for s in kernel_api.array_leaves(o.shape)]
  results = kernel_api.array_leaves(instr.shape)
  if any(not s.is_array() for s in operands + results):
    raise _unimplemented(instr, "token or non-array operands")
  if op == O.kCollectivePermute:
    if instr.operand_count != 1 or instr.attr("slice_sizes"):
      raise _unimplemented(instr, "the in-place (4-operand) form")
    pairs = cou.permute_pairs(instr, n_rep, n_part)
    return {"pairs": [list(p) for p in pairs]}, []
  groups = cou.participant_groups(instr, n_rep, n_part)
  config: dict = {"groups": groups}
  kernels: list[str] = []
  if op == O.kCollectiveBroadcast:
    return config, kernels
  _require_cover(instr, groups, total)
  n = _same_size_groups(instr, groups)
  if op in (O.kAllReduce, O.kReduceScatter):
    if len(operands) != len(results):
      raise _unimplemented(instr, f"{len(operands)} operands for "
                           f"{len(results)} results")
    kind = reduction_kind(instr.to_apply)
    types = {s.element_type for s in operands}
    if len(types) != 1:
      raise _unimplemented(instr, "operands of different element types")
    et = types.pop()
    if _numpy_runs(kind, et):
      config["reduce"] = kind
    else:
      name = _emit_combiner(ctx, instr, et)
      config["combiner"] = name
      kernels.append(name)
  if op == O.kAllReduce:
    for s_in, s_out in zip(operands, results):
      if tuple(s_in.dimensions) != tuple(s_out.dimensions):
        raise support.InvalidArgumentError(
            f"all-reduce {instr.name}: result {s_out} differs from operand "
            f"{s_in}")
  elif op in (O.kAllGather, O.kReduceScatter):
    dim = int(instr.dimensions[0])
    config["dim"] = dim
    for s_in, s_out in zip(operands, results):
      small, big = ((s_in, s_out) if op == O.kAllGather else (s_out, s_in))
      if not 0 <= dim < len(small.dimensions) or len(
          small.dimensions) != len(big.dimensions):
        raise support.InvalidArgumentError(
            f"{op.value} {instr.name}: dimension {dim} does not fit operand "
            f"{s_in} and result {s_out}")
      if big.dimensions[dim] != small.dimensions[dim] * n:
        raise support.InvalidArgumentError(
            f"{op.value} {instr.name}: dimension {dim} of {big} is not "
            f"{n} (the group size) times that of {small}")
  elif op == O.kAllToAll:
    dims = instr.attr("dimensions") if instr.has_attr("dimensions") else None
    if dims:
      dim = int(dims[0])
      config["dim"] = dim
      for s in operands:
        if not 0 <= dim < len(s.dimensions):
          raise support.InvalidArgumentError(
              f"all-to-all {instr.name}: dimension {dim} does not fit "
              f"operand {s}")
        if s.dimensions[dim] % n:
          raise support.InvalidArgumentError(
              f"all-to-all {instr.name}: dimension {dim} of {s} does not "
              f"split into {n} (the group size) parts")
    else:
      config["dim"] = None
      if len(operands) != n:
        raise support.InvalidArgumentError(
            f"all-to-all {instr.name}: the tuple form takes one operand per "
            f"member of its groups ({n}), got {len(operands)}")
  return config, kernels
