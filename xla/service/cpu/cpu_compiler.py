"""The CPU compiler: HLO module -> CpuExecutable.

    compile(module, options) =
      copy the module
      -> the HLO pass pipeline (`cpu_pipeline`, written out in order: the
         canonical form, simplification, loops, fusion, multi-output
         fusion, copy insertion for loop carries / branch results)
      -> dataflow analysis, memory scheduling, buffer assignment (64-byte
         aligned)
      -> one LLVM module with the kernels of every thunk (thunk_emitter)
      -> split into parts that are optimised and compiled to object code
         on parallel threads (jit.compile_objects), loaded into one JIT
         (the object code is kept for the disk cache)
      -> CpuExecutable (thunks over one arena)

Compiled artifacts are cached (compilation_cache.py) by a fingerprint of
the input module text and the code-changing options.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from typing import Optional, Sequence

import numpy as np

import support
from xla import primitive_util
from xla import shape_util
from xla.hlo.ir import hlo_computation as hc
from xla.hlo.ir import hlo_instruction as hi
from xla.hlo.ir import hlo_module as hm
from xla.hlo.ir import hlo_printer
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.pass_ import hlo_pass_fix
from xla.hlo.pass_ import hlo_pass_interface as hpi
from xla.hlo.pass_ import hlo_pass_pipeline
from xla.hlo.transforms.simplifiers import algebraic_simplifier as algsimp
from xla.hlo.transforms.simplifiers import hlo_constant_folding
from xla.hlo.transforms.simplifiers import hlo_cse
from xla.hlo.transforms.simplifiers import hlo_dce
from xla.hlo.transforms.simplifiers import reshape_mover
from xla.hlo.transforms.simplifiers import transpose_folding
from xla.hlo.transforms.simplifiers import while_loop_invariant_code_motion as licm
from xla.hlo.transforms.simplifiers import while_loop_simplifier
from xla.service import all_reduce_combiner
from xla.service import bitcast_convert_expander
from xla.service import buffer_assignment as ba_lib
from xla.service import cpu_instruction_fusion
from xla.service import hlo_dataflow_analysis as dfa
from xla.service import hlo_memory_scheduler
from xla.service import hlo_verifier
from xla.service import linalg_expander
from xla.service import multi_output_fusion
from xla.service.cpu import blas_rhs_transpose
from xla.service.cpu import compilation_cache as cc
from xla.service.cpu import conv_canonicalization
from xla.service.cpu import cpu_copy_insertion
from xla.service.cpu import cpu_executable
from xla.service.cpu import fft_host_call
from xla.service.cpu import ir_emitter
from xla.service.cpu import jit as jit_lib
from xla.service.cpu import kernel_api
from xla.service.cpu import low_precision_upcast
from xla.service.cpu import reduction_splitter
from xla.service.cpu import runtime_library
from xla.service.cpu import sliced_dot_hoisting
from xla.service.cpu import spmd_pipeline
from xla.service.cpu import thunk
from xla.service.cpu import thunk_emitter
from xla.service.cpu import topk_rewriter
from xla.shape import Shape

# A DebugOptions field of XLA that JAX's `compiler_options` may name (the
# PJRT plugin takes compile option overrides as flags).
EMBED_IR_IN_EXECUTABLE = support.flags.define_bool(
    "xla_embed_ir_in_executable", False,
    "XLA's DebugOptions field of that name, accepted so that programs may "
    "set it; this compiler embeds no IR text in executables, so it changes "
    "nothing.")


@dataclasses.dataclass(frozen=True)
class CpuCompileOptions:
  """threads: worker threads per execution (default os.cpu_count());
  opt_level: LLVM optimisation level; cache_dir: directory of the disk
  cache (None: memory only); disable_passes: HLO pass names to skip (pass
  names, or the short names hlo_opt uses; see `cpu_pipeline`); dump_to:
  directory that receives the optimised HLO, buffer assignment, LLVM IR
  and thunk plan; input_key: a digest, made by the caller, of everything
  the module was built from (its source program, configuration, flags
  and, with a cache_dir, the sources of the code that built it), which
  then stands for the module's text in the cache key: printing the module
  for the key cost 17-42 ms per compile of programs of a few thousand
  ops."""
  threads: Optional[int] = None
  # LLVM's O2 pipeline (loop and SLP vectorization on, see jit.py). O3
  # spent up to 10x the time on some kernels (it grew a rolled threefry
  # round from 580 to 5500 lines of IR) and made no run-time difference on
  # the bench (geomean 0.60x XLA at both levels, every program within
  # noise); at O2 a flax GPT model initialises in 3.3 s instead of 6.2 s
  # (XLA 2.4 s) and a ResNet in 4.4 s instead of 13.9 s (XLA 4.1 s).
  opt_level: int = 2
  cache_dir: Optional[str] = None
  disable_passes: Sequence[str] = ()
  dump_to: Optional[str] = None
  input_key: Optional[str] = None

  def resolved_threads(self) -> int:
    return self.threads if self.threads else thunk.default_threads()

  def cache_key(self) -> str:
    # Flags of the compiler (xla_*) set to other than their defaults change
    # the code too (e.g. --xla_cpu_inline_math).
    flags = {f.name: repr(f.value) for f in support.flags.all_flags()
             if f.name.startswith("xla_") and f.value != f.default}
    return json.dumps({"opt": self.opt_level,
                       "disable": sorted(self.disable_passes),
                       "flags": flags}, sort_keys=True)


# -- HLO passes ----------------------------------------------------------------


def _canonicalize_bitcasts(module) -> bool:
  """Rewrites XLA's physical bitcasts into logical ops before layouts are
  dropped: one that changes the element type (same width) becomes a
  bitcast-convert, one between non-default layouts becomes transpose (to
  the operand's physical order) -> reshape -> transpose (from the result's
  physical order). Bitcasts left are reshapes of row-major arrays."""
  changed = False
  for comp in module.computations:
    for instr in list(comp.instructions):
      if instr.opcode != HloOpcode.kBitcast:
        continue
      x = instr.operand(0)
      a, b = x.shape, instr.shape
      if not (a.is_array() and b.is_array()):
        continue
      new = x
      if a.element_type != b.element_type:
        if (primitive_util.bit_width(a.element_type) !=
            primitive_util.bit_width(b.element_type)):
          raise support.UnimplementedError(
              f"CPU backend: bitcast {instr.name} changes the element width")
        new = comp.add_instruction(hi.create(
            HloOpcode.kBitcastConvert,
            Shape.array(b.element_type, a.dimensions), [new]))
      if (shape_util.has_default_layout(a) and
          shape_util.has_default_layout(b)):
        if new is not x:
          if tuple(a.dimensions) != tuple(b.dimensions):
            new = comp.add_instruction(hi.create_reshape(
                Shape.array(b.element_type, b.dimensions), new))
          comp.replace_instruction(instr, new)
          changed = True
        continue
      ma = list(reversed(shape_util.minor_to_major(a)))
      mb = list(reversed(shape_util.minor_to_major(b)))
      et = b.element_type
      if ma != list(range(len(ma))):
        new = comp.add_instruction(hi.create_transpose(
            Shape.array(et, [a.dimensions[i] for i in ma]), new, ma))
      phys_b = [b.dimensions[i] for i in mb]
      new = comp.add_instruction(hi.create_reshape(Shape.array(et, phys_b),
                                                   new))
      if mb != list(range(len(mb))):
        inv = [mb.index(j) for j in range(len(mb))]
        new = comp.add_instruction(hi.create_transpose(
            Shape.array(et, b.dimensions), new, inv))
      comp.replace_instruction(instr, new)
      changed = True
  return changed


def _default_layouts(module) -> bool:
  """Gives every instruction the default row-major layout. Arrays reach
  the runtime as logical numpy arrays, so layouts carry no meaning here
  once bitcasts are canonical (see `_canonicalize_bitcasts`)."""
  changed = module.config.entry_computation_layout is not None
  for comp in module.computations:
    for instr in comp.instructions:
      shape = shape_util.with_default_layouts(instr.shape, replace=True)
      changed = changed or shape != instr.shape
      instr.shape = shape
  module.config.entry_computation_layout = None
  return changed


def _reshapes_to_bitcasts(module) -> bool:
  """With row-major layouts everywhere a reshape does not move data: turn
  the ones outside fusions into bitcasts, which buffer assignment aliases
  to their operand instead of copying (XLA's ReshapeIsBitcast rewrite)."""
  changed = False
  for comp in module.computations:
    if comp.is_fusion_computation():
      continue
    for instr in list(comp.instructions):
      if (instr.opcode == HloOpcode.kReshape and instr.shape.is_array() and
          instr.operand(0).shape.element_type == instr.shape.element_type and
          not instr.control_predecessors and not instr.control_successors):
        bc = comp.add_instruction(hi.create(
            HloOpcode.kBitcast, instr.shape, [instr.operand(0)],
            name=instr.name))
        comp.replace_instruction(instr, bc)
        changed = True
  return changed


class _FunctionPass(hpi.HloModulePass):
  """A module rewrite of this file as a pass of the CPU pipeline."""

  def __init__(self, name: str, rewrite):
    self._name, self._rewrite = name, rewrite

  @property
  def name(self) -> str:
    return self._name

  def run(self, module, execution_threads=frozenset()) -> bool:
    del execution_threads
    return bool(self._rewrite(module))


def cpu_pipeline(options: Optional[CpuCompileOptions] = None
                 ) -> hlo_pass_pipeline.HloPassPipeline:
  """The CPU backend's HLO pass pipeline, in order (cf. XLA's
  CpuCompiler::RunHloPasses). `options.disable_passes` leaves out passes
  by name (or by their hlo_opt short name: "fusion", "licm", ...).

  The pipeline does not verify after each pass (that was half of the HLO
  pass time: transformer 190 of 370 ms); `run_hlo_passes` verifies the
  module before and after it."""
  options = options or CpuCompileOptions()
  skip = set(options.disable_passes)
  pipeline = hlo_pass_pipeline.HloPassPipeline("cpu", verify=False)

  def add(pass_, *aliases: str) -> None:
    if pass_.name not in skip and not skip.intersection(aliases):
      pipeline.add_pass(pass_)

  def simplifier():
    return hlo_pass_fix.HloPassFix(algsimp.AlgebraicSimplifier())

  # Canonical form. Arrays reach this runtime as logical (row-major) numpy
  # arrays, so physical bitcasts become logical ops first, and then layouts
  # are dropped. Input that XLA already processed may hold async chains and
  # fusions: they run synchronously / are re-fused by our own fusion. Calls
  # are inlined, and each control-flow computation gets one caller.
  pipeline.add_pass(_FunctionPass("cpu-canonicalize-bitcasts",
                                  _canonicalize_bitcasts))
  pipeline.add_pass(_FunctionPass("cpu-default-layouts", _default_layouts))
  pipeline.add_pass(cpu_copy_insertion.ConvertAsync())
  pipeline.add_pass(cpu_copy_insertion.Unfuse())
  pipeline.add_pass(cpu_copy_insertion.InlineCalls())
  pipeline.add_pass(cpu_copy_insertion.FlattenCallGraph())
  # Width-changing bitcast-converts (JAX's rbg PRNG) -> elementwise pieces.
  add(bitcast_convert_expander.BitcastConvertExpander())
  # FFTs run on numpy's pocketfft, as XLA CPU runs them on a library.
  add(fft_host_call.FftToHostCall())
  # JAX's Qr / Eigh custom calls -> HLO loops, before simplifying them.
  add(linalg_expander.LinalgCustomCallExpander())
  # Simplification. DCE and CSE first so the simplifier sees fewer,
  # canonical instructions; constant folding after it folds what it exposed.
  add(hlo_dce.HloDCE(), "dce")
  add(hlo_cse.HloCSE(), "cse")
  add(simplifier(), "algsimp")
  add(hlo_constant_folding.HloConstantFolding(), "constant-folding")
  add(while_loop_simplifier.WhileLoopSimplifier(), "while-loop-simplifier")
  # Loops. Hoisting the dots on slices of a loop's operand runs loop-
  # invariant code motion itself on the loops it rewrites, so it is off
  # whenever LICM is.
  if not skip.intersection({"licm", "while-loop-invariant-code-motion"}):
    add(sliced_dot_hoisting.SlicedDotHoisting())
  add(licm.WhileLoopInvariantCodeMotion(), "licm")
  add(reshape_mover.ReshapeMover())
  add(transpose_folding.TransposeFolding())
  # Large F16 / BF16 convolutions and F16 dots become f32 ones between
  # converts (BLAS has no 16-bit gemm), before canonicalizing convolutions.
  add(low_precision_upcast.LowPrecisionUpcast())
  # Convolutions whose dimension order leaves conv_emitter only its loops
  # (JAX's kernel gradients: fb01_io01->fb01) get transposed operands and
  # result around a canonical convolution; the simplifier then merges
  # transposes that meet.
  add(conv_canonicalization.ConvCanonicalization())
  add(simplifier(), "algsimp")
  add(hlo_dce.HloDCE(), "dce")
  # Independent all-reduces of the same kind become one (each collective
  # is a rendezvous of every participant), once simplification has
  # removed the ones it could and before fusion reads their results.
  add(all_reduce_combiner.AllReduceCombiner())
  # Before fusion: the producers of split reductions fuse into their first
  # (large) step, and a sort's slices into a top-k before fusion would fuse
  # them into their users.
  add(reduction_splitter.ReductionSplitter(), "reduction-splitter")
  add(topk_rewriter.TopkRewriter(), "topk-rewriter")
  add(cpu_instruction_fusion.CpuInstructionFusion(), "fusion")
  add(multi_output_fusion.MultiOutputFusion(), "multi-output-fusion")
  add(hlo_dce.HloDCE(), "dce")
  # After fusion, so the transposes it adds stay kernels of their own.
  add(blas_rhs_transpose.BlasRhsTranspose())
  # After fusion, row-major reshapes outside fusions alias their operand;
  # then the buffer-level form: calls inlined again, one caller per
  # control-flow computation, copies where loop carries and branch results
  # would otherwise share a buffer wrongly.
  pipeline.add_pass(_FunctionPass("cpu-reshapes-to-bitcasts",
                                  _reshapes_to_bitcasts))
  pipeline.add_pass(cpu_copy_insertion.InlineCalls())
  pipeline.add_pass(cpu_copy_insertion.FlattenCallGraph())
  pipeline.add_pass(cpu_copy_insertion.CopyInsertion())
  return pipeline


def run_hlo_passes(module, options: Optional[CpuCompileOptions] = None):
  """Runs the CPU pipeline on `module` in place (see `cpu_pipeline`);
  returns it."""
  hlo_verifier.verify(module)
  cpu_pipeline(options).run(module)
  hlo_verifier.verify(module)
  return module


def _fix_sizes(analysis: dfa.HloDataflowAnalysis) -> None:
  """The dataflow analysis packs sub-byte types; our kernels store them a
  byte per element (as numpy does), so widen those buffers."""
  changed = False
  for v in analysis.values:
    if v.shape.is_array():
      size = thunk_emitter.storage_bytes(v.shape)
      if size != v.size:
        v.size = size
        changed = True
  if changed:
    for b in analysis.buffers:
      b.size = max((v.size for v in b.values), default=0)


def assign_buffers(module):
  analysis = dfa.HloDataflowAnalysis.run(module)
  _fix_sizes(analysis)
  schedule, _ = hlo_memory_scheduler.schedule_module(module,
                                                     analysis=analysis)
  return ba_lib.assign_buffers(module, schedule, analysis,
                               alignment=cpu_executable.ALIGNMENT)


# -- custom calls in the plan ------------------------------------------------------


def _detached_custom_call(instr):
  """A copy of `instr` alone in a one-instruction HLO module (operands as
  parameters), or None for one that calls computations. The executable
  and the compilation cache keep these: the original instruction would
  keep the whole optimised module alive through its parent computation,
  and every later collection of the cyclic garbage collector would walk
  it."""
  if instr.called_computations():
    return None
  module = hm.HloModule(f"custom_call_{instr.name}")
  comp = hc.HloComputation("entry")
  params = [comp.add_instruction(hi.create_parameter(i, o.shape))
            for i, o in enumerate(instr.operands)]
  new = hi.HloInstruction(instr.opcode, instr.shape, params, name=instr.name)
  for k, v in instr.attrs.items():
    new.set_attr(k, v)
  new.backend_config = instr.backend_config
  new.frontend_attributes = dict(instr.frontend_attributes)
  comp.add_instruction(new)
  comp.set_root_instruction(new)
  module.add_entry_computation(comp)
  return new


def _custom_call_text(detached) -> Optional[str]:
  """The module of a `_detached_custom_call` (None: none), so a
  disk-cached program can hand its handler an HloInstruction."""
  if detached is None:
    return None
  return detached.parent.parent.to_string()


def _custom_call_from_text(text: str):
  from xla.hlo.parser import hlo_parser  # pylint: disable=g-import-not-at-top
  return hlo_parser.parse_and_return_unverified_module(
      text).entry_computation.root_instruction


# -- compile -----------------------------------------------------------------------


def _host() -> str:
  info = jit_lib.host_target_info()
  return f"{info.cpu_name}|{info.features}"


def _dump(options, name: str, suffix: str, text) -> None:
  """Writes `text` (a string, or a function making it: printing the
  transformer's HLO and LLVM IR costs ~30 ms, paid only when dumping)."""
  if not options.dump_to:
    return
  if callable(text):
    text = text()
  os.makedirs(options.dump_to, exist_ok=True)
  safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
  with open(os.path.join(options.dump_to, f"{safe}.{suffix}"), "w") as f:
    f.write(text)


def optimized_module(hlo_module, options: Optional[CpuCompileOptions] = None):
  """What `compile` makes of `hlo_module` before code generation (a
  clone): partitioned when it is a global program, HLO passes run. For
  showing the optimized program of an executable that came from the cache
  (which keeps no module)."""
  module = hlo_module.clone()
  spmd_pipeline.partition_if_sharded(module)
  run_hlo_passes(module, options or CpuCompileOptions())
  return module


def compile_artifact(hlo_module, options: CpuCompileOptions,
                     stats: dict) -> tuple[cc.Artifact, object]:
  """Runs the whole compiler (no cache); returns the artifact (with its
  loaded JIT) and the optimised module."""
  t = time.perf_counter()
  module = hlo_module.clone()
  # A global program for several partitions is partitioned first, as XLA's
  # CPU compiler does before its own passes (spmd_pipeline.py).
  spmd_shardings = None
  if spmd_pipeline.partition_if_sharded(module):
    spmd_shardings = spmd_pipeline.entry_shardings(module)
  run_hlo_passes(module, options)
  stats["hlo_passes"] = time.perf_counter() - t
  _dump(options, module.name, "optimized.hlo.txt", module.to_string)

  t = time.perf_counter()
  assignment = assign_buffers(module)
  stats["buffer_assignment"] = time.perf_counter() - t
  _dump(options, module.name, "buffer_assignment.txt", assignment.to_string)

  t = time.perf_counter()
  ir_module = _new_ir_module(module.name)
  ctx = kernel_api.KernelContext(ir_module, jit_lib.host_target_info())
  # Kernels are compiled on the compile threads as they are emitted (each
  # part verified there); the object files are kept together for the disk
  # cache.
  stream = jit_lib.StreamingCompile(ir_module, options.opt_level,
                                    prepare=jit_lib.prefer_wide_vectors)
  emitter = thunk_emitter.ThunkEmitter(module, assignment, ctx,
                                       on_kernels=stream.add)
  plan = emitter.emit()
  plan["peak_live_bytes"] = assignment.peak_live_bytes()
  if spmd_shardings is not None:
    # How the partitioned program's parameters and outputs are split.
    plan["spmd_shardings"] = spmd_shardings
  # External functions the kernels call (BLAS, libc); a disk-cached object
  # is only loaded when all of them resolve in this process.
  plan["externals"] = sorted(
      f.name for f in ir_module.functions
      if f.is_declaration and not f.name.startswith("llvm."))
  stats["emission"] = time.perf_counter() - t
  _dump(options, module.name, "thunks.json",
        lambda: json.dumps(plan, indent=1))

  # "llvm": what is left of LLVM's work once emission is done. Library
  # routines the kernels call are compiled (or loaded) meanwhile.
  t = time.perf_counter()
  runtime_library.ensure(plan["externals"])
  obj = jit_lib.pack_objects(stream.finish(plan["kernels"]))
  if stream.aliases:
    plan["kernel_aliases"] = dict(stream.aliases)
  _dump(options, module.name, "ir.ll", lambda: _wide_text(ir_module))
  jit = jit_lib.CpuJit(options.opt_level)
  jit.load_object_code(obj)
  stats["llvm"] = time.perf_counter() - t
  detached = [_detached_custom_call(i) for i in emitter.custom_calls]
  texts = [_custom_call_text(d) for d in detached]
  instrs = [d if d is not None else i
            for d, i in zip(detached, emitter.custom_calls)]
  art = cc.Artifact(plan, obj, texts, jit, instrs)
  return art, module


def _wide_text(ir_module) -> str:
  """The module's text as compiled (the compile threads saw each function
  with `jit.prefer_wide_vectors` applied)."""
  for fn in ir_module.functions:
    jit_lib.prefer_wide_vectors(fn)
  return str(ir_module)


def _new_ir_module(name: str):
  from llvmlite import ir  # pylint: disable=g-import-not-at-top
  mod = ir.Module(name="".join(c if c.isalnum() else "_" for c in name))
  jit_lib.configure_module(mod)
  return mod




def _load_disk_artifact(art: cc.Artifact, options) -> Optional[cc.Artifact]:
  """Loads a disk artifact's object code; None if it cannot be used."""
  if any(t is None for t in art.custom_calls):
    return None
  ir_emitter.load_emitter_modules()  # registers external symbols
  runtime_library.ensure(art.plan.get("externals", ()))
  from llvmlite import binding as llvm  # pylint: disable=g-import-not-at-top
  missing = [n for n in art.plan.get("externals", ())
             if not llvm.address_of_symbol(n)]
  if missing:
    from support import log  # pylint: disable=g-import-not-at-top
    log.warning("CPU compilation cache: unresolved symbols %s", missing)
    return None
  try:
    jit = jit_lib.CpuJit(options.opt_level)
    jit.load_object_code(art.object_code)
    aliases = art.plan.get("kernel_aliases", {})
    for name in art.plan["kernels"]:
      jit.address(aliases.get(name, name))
    art.jit = jit
    art.custom_call_instrs = [_custom_call_from_text(t)
                              for t in art.custom_calls]
  except (RuntimeError, support.XlaError, KeyError, ValueError) as e:
    from support import log  # pylint: disable=g-import-not-at-top
    log.warning("CPU compilation cache: unusable entry: %s", e)
    return None
  return art


_KEY_PRINT_OPTIONS = hlo_printer.HloPrintOptions(print_large_constants=False)


def cache_key_text(hlo_module) -> str:
  """The module as the compilation cache sees it: its text with large
  constants elided, followed by a digest of each one's dtype, shape and bytes.

  Printing a large literal element by element costs seconds (a splat
  constant of a 128x512 operand that JAX emits as a broadcast arrives here
  as 65536 printed floats), while hashing its bytes costs microseconds."""
  digest = hashlib.sha256()
  threshold = _KEY_PRINT_OPTIONS.large_constant_threshold
  for instr in hlo_module.instructions():
    lit = instr.literal
    if lit is None or not lit.shape.is_array() or lit.array.size <= threshold:
      continue
    array = np.ascontiguousarray(lit.array)
    digest.update(f"{instr.name}:{array.dtype.str}{array.shape}".encode())
    digest.update(array.view(np.uint8).reshape(-1) if array.size else b"")
  return (hlo_module.to_string(_KEY_PRINT_OPTIONS) + "\nconstants " +
          digest.hexdigest())


def compile(hlo_module,  # pylint: disable=redefined-builtin
            options: Optional[CpuCompileOptions] = None
            ) -> cpu_executable.CpuExecutable:
  """Compiles `hlo_module` (left unchanged) for this host's CPU."""
  with support.heap.gc_paused():
    return _compile(hlo_module, options)


def _compile(hlo_module, options: Optional[CpuCompileOptions]
             ) -> cpu_executable.CpuExecutable:
  options = options or CpuCompileOptions()
  t0 = time.perf_counter()
  stats: dict = {}
  key = cc.fingerprint(
      ("input " + options.input_key) if options.input_key
      else cache_key_text(hlo_module), options.cache_key(), _host())
  art = _cached_artifact(key, options, stats)
  module = None
  if art is None:
    cc.CACHE.count_miss()
    art, module = compile_artifact(hlo_module, options, stats)
    cc.CACHE.put(key, art)
    if options.cache_dir and all(t is not None for t in art.custom_calls):
      cc.CACHE.store(options.cache_dir, key, art)
  return _executable(art, key, options, stats, module, t0)


def _cached_artifact(key: str, options: CpuCompileOptions,
                     stats: dict) -> Optional[cc.Artifact]:
  """The artifact cached under `key`, in memory or in options.cache_dir
  (loaded), or None; stats["cache"] says where it was found."""
  art = cc.CACHE.get(key)
  stats["cache"] = "memory" if art is not None else "miss"
  if art is None and options.cache_dir:
    loaded = cc.CACHE.load(options.cache_dir, key)
    if loaded is not None:
      art = _load_disk_artifact(loaded, options)
      if art is not None:
        stats["cache"] = "disk"
        cc.CACHE.put(key, art)
  return art


def load_cached(key: str, options: Optional[CpuCompileOptions] = None
                ) -> Optional[cpu_executable.CpuExecutable]:
  """The executable of an earlier compile whose cache key (its
  compile_stats["cache_key"]) is `key`, from the memory cache or
  options.cache_dir, without the module: for callers that know the key
  from a fingerprint of their own input (the plugin's program cache). None
  where neither cache holds it."""
  options = options or CpuCompileOptions()
  t0 = time.perf_counter()
  stats: dict = {}
  with support.heap.gc_paused():
    art = _cached_artifact(key, options, stats)
    if art is None:
      return None
    return _executable(art, key, options, stats, None, t0)


def _executable(art: cc.Artifact, key: str, options: CpuCompileOptions,
                stats: dict, module, t0: float) -> cpu_executable.CpuExecutable:
  t = time.perf_counter()
  builtins = None
  if art.custom_call_instrs:
    # Only programs with custom calls need the evaluator's handlers (its
    # import is a third of a second).
    from xla.hlo.evaluator import hlo_evaluator  # pylint: disable=g-import-not-at-top
    from xla.service.cpu import host_callbacks  # pylint: disable=g-import-not-at-top
    from xla.service.cpu import lapack_handlers  # pylint: disable=g-import-not-at-top
    # JAX's LAPACK calls (lapack_*_ffi), which XLA CPU registers as FFI
    # handlers, run on LAPACK here too.
    builtins = {**hlo_evaluator.BUILTIN_CUSTOM_CALLS,
                **lapack_handlers.HANDLERS, **fft_host_call.HANDLERS,
                **host_callbacks.HANDLERS}
  exe = cpu_executable.CpuExecutable(
      art.plan, art.jit, custom_call_instrs=art.custom_call_instrs,
      threads=options.resolved_threads(), compile_stats=stats,
      module=module, builtin_custom_calls=builtins)
  stats["load"] = time.perf_counter() - t
  stats["total"] = time.perf_counter() - t0
  stats["cache_key"] = key
  exe.compile_stats = stats
  return exe
