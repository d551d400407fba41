"""CPU kernels for collectives in single-device programs.

With one replica and one partition every collective has a single
participant: all-reduce, all-gather, reduce-scatter, all-to-all and
collective-broadcast return their operands unchanged (the reduction of one
value is that value; gathering or scattering over one participant keeps the
shape), and collective-permute copies its operand when the pair (0, 0) is
listed and otherwise yields zeros (no one sends to device 0). These kernels
are those copies (memmove, so the output may share the operand's buffer);
programs that run on more than one device are Unimplemented here.
"""

from __future__ import annotations

from llvmlite import ir

import support
from xla.service.cpu import kernel_api
from xla.service.cpu import op_emitter_util as u


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
