"""Loop kernels: elementwise chains and data-movement ops, fused and
standalone, over several element types, compiled and compared with the
HLO evaluator."""

import re

import ml_dtypes
import numpy as np
import pytest

from xla.service.cpu import cpu_testing as ct
from xla.service.cpu import loop_kernels

CASES = {
    "broadcast_transpose": """
HloModule m
ENTRY e {
  x = f32[3,5] parameter(0)
  y = f32[5] parameter(1)
  b = f32[3,5] broadcast(y), dimensions={1}
  t = f32[5,3] transpose(x), dimensions={1,0}
  tt = f32[3,5] transpose(t), dimensions={1,0}
  a = f32[3,5] add(tt, b)
  c = f32[2,5,3] broadcast(t), dimensions={1,2}
  ROOT r = (f32[3,5], f32[2,5,3], f32[5,3]) tuple(a, c, t)
}""",
    "slice_pad_concat": """
HloModule m
ENTRY e {
  x = f32[6,7] parameter(0)
  s = f32[3,3] slice(x), slice={[1:6:2], [0:7:3]}
  z = f32[] constant(1.5)
  p = f32[9,8] pad(s, z), padding=1_3_1x2_1_1
  p2 = f32[8,11] pad(x, z), padding=1_1x2_2
  x2 = f32[6,8] slice(p2), slice={[0:6],[0:8]}
  n = f32[4,6] pad(x, z), padding=-1_-1x0_-1
  c = f32[15,8] concatenate(p, x2), dimensions={0}
  r = f32[15,8] negate(c)
  ROOT t = (f32[15,8], f32[4,6]) tuple(r, n)
}""",
    "iota_reverse_reshape": """
HloModule m
ENTRY e {
  i = s32[4,6] iota(), iota_dimension=1
  r = s32[4,6] reverse(i), dimensions={0,1}
  f = f32[4,6] convert(r)
  rs = f32[24] reshape(f)
  rs2 = f32[2,12] reshape(rs)
  x = f32[2,12] parameter(0)
  m = f32[2,12] multiply(rs2, x)
  io = f32[3,2] iota(), iota_dimension=0
  ROOT t = (f32[2,12], f32[3,2]) tuple(m, io)
}""",
    "concat_standalone": """
HloModule m
ENTRY e {
  a = s32[2,3] parameter(0)
  b = s32[2,0] parameter(1)
  c = s32[2,4] parameter(2)
  ROOT r = s32[2,7] concatenate(a, b, c), dimensions={1}
}""",
    "dynamic_slice_clamped": """
HloModule m
ENTRY e {
  x = f32[8,6] parameter(0)
  i = s32[] constant(-3)
  j = s32[] constant(5)
  ROOT s = f32[3,4] dynamic-slice(x, i, j), dynamic_slice_sizes={3,4}
}""",
    "select_clamp_compare": """
HloModule m
ENTRY e {
  x = f32[50] parameter(0)
  y = f32[50] parameter(1)
  lo = f32[] constant(-0.5)
  hi = f32[] constant(0.5)
  c = f32[50] clamp(lo, x, hi)
  p = pred[50] compare(x, y), direction=LT
  s = f32[50] select(p, c, y)
  ROOT t = (f32[50], pred[50]) tuple(s, p)
}""",
    "map": """
HloModule m
f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  ROOT s = f32[] subtract(m, a)
}
ENTRY e {
  x = f32[7,3] parameter(0)
  y = f32[7,3] parameter(1)
  ROOT r = f32[7,3] map(x, y), dimensions={0,1}, to_apply=f
}""",
    "int_types": """
HloModule m
ENTRY e {
  a = s8[40] parameter(0)
  b = u8[40] parameter(1)
  c = s64[40] parameter(2)
  d = u16[40] parameter(3)
  a2 = s8[40] multiply(a, a)
  bd = u8[40] divide(b, b)
  cc = s64[40] convert(a2)
  c2 = s64[40] add(c, cc)
  dn = u16[40] not(d)
  ROOT t = (s8[40], u8[40], s64[40], u16[40]) tuple(a2, bd, c2, dn)
}""",
    "narrow_floats": """
HloModule m
ENTRY e {
  a = bf16[33] parameter(0)
  b = f16[33] parameter(1)
  e = bf16[33] exponential(a)
  m = bf16[33] multiply(e, a)
  f = f16[33] tanh(b)
  g = f16[33] add(f, b)
  ROOT t = (bf16[33], f16[33]) tuple(m, g)
}""",
    "f64_and_complex": """
HloModule m
ENTRY e {
  a = f64[9] parameter(0)
  c = c64[9] parameter(1)
  l = f64[9] log(a)
  x = f64[9] multiply(a, a)
  cc = c64[9] multiply(c, c)
  ca = c64[9] add(cc, c)
  re = f32[9] real(ca)
  ROOT t = (f64[9], f64[9], c64[9], f32[9]) tuple(l, x, ca, re)
}""",
    "pred_logic": """
HloModule m
ENTRY e {
  a = pred[3,5] parameter(0)
  b = pred[3,5] parameter(1)
  o = pred[3,5] or(a, b)
  x = pred[3,5] xor(a, b)
  n = pred[3,5] not(o)
  t = pred[5,3] transpose(n), dimensions={1,0}
  ROOT r = (pred[3,5], pred[5,3]) tuple(x, t)
}""",
    "constants": """
HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  k = f32[2,3] constant({{1,2,3},{4,5,6}})
  s = f32[] constant(0.25)
  sb = f32[2,3] broadcast(s), dimensions={}
  a = f32[2,3] add(x, k)
  m = f32[2,3] multiply(a, sb)
  ROOT t = (f32[2,3], f32[2,3]) tuple(m, k)
}""",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_evaluator(name):
  ct.run_and_compare(CASES[name], rtol=1e-5)


def test_nan_and_inf_propagate():
  text = """
HloModule m
ENTRY e {
  x = f32[6] parameter(0)
  y = f32[6] parameter(1)
  mx = f32[6] maximum(x, y)
  mn = f32[6] minimum(x, y)
  e = f32[6] exponential(x)
  ROOT t = (f32[6], f32[6], f32[6]) tuple(mx, mn, e)
}"""
  x = np.array([np.nan, 1, -np.inf, np.inf, 0, -0.0], np.float32)
  y = np.array([1, np.nan, 2, np.nan, -0.0, 0], np.float32)
  _, (mx, mn, e) = ct.run_and_compare(text, [x, y])
  assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()
  assert e[2] == 0 and np.isinf(e[3])


def test_empty_shapes():
  text = """
HloModule m
ENTRY e {
  x = f32[0,4] parameter(0)
  y = f32[4,0] transpose(x), dimensions={1,0}
  z = f32[4,0] exponential(y)
  ROOT t = (f32[4,0], f32[0,4]) tuple(z, x)
}"""
  _, out = ct.run_and_compare(text, [np.zeros((0, 4), np.float32)])
  assert out[0].shape == (4, 0) and out[1].shape == (0, 4)


def test_large_loop_partitions_and_matches():
  # Big enough that the kernel gets a parallel extent > 1 and the
  # runtime splits it across two threads.
  text = """
HloModule m
ENTRY e {
  x = f32[300,700] parameter(0)
  y = f32[700] parameter(1)
  b = f32[300,700] broadcast(y), dimensions={1}
  t = f32[300,700] tanh(x)
  ROOT a = f32[300,700] add(t, b)
}"""
  exe, _ = ct.run_and_compare(text, threads=2)
  kernels = [t for t in exe.thunks if hasattr(t, "bounds")]
  assert kernels and kernels[0].extent > 1
  assert len(kernels[0].bounds) == 2


def test_partition_covers_shape():
  for dims in ([4096, 4096], [10], [1 << 20], [3, 100000], [1000000, 4],
               [7, 1, 9], []):
    p, c, extent = loop_kernels.partition(dims)
    if not dims:
      assert extent == 1
      continue
    inner = int(np.prod(dims[p + 1:]))
    nb = -(-dims[p] // c)
    assert extent == int(np.prod(dims[:p])) * nb
    assert c * inner >= min(loop_kernels.TARGET_UNIT_ELEMENTS,
                            int(np.prod(dims[p:])))


def test_int4_storage_one_byte_per_element():
  text = """
HloModule m
ENTRY e {
  x = s4[7,5] parameter(0)
  y = s4[7,5] parameter(1)
  a = s4[7,5] add(x, y)
  t = s4[5,7] transpose(a), dimensions={1,0}
  c = s32[5,7] convert(t)
  u = u4[7,5] convert(x)
  ROOT r = (s4[5,7], s32[5,7], u4[7,5]) tuple(t, c, u)
}"""
  rng = np.random.default_rng(0)
  x, y = (rng.integers(-8, 8, (7, 5)).astype(ml_dtypes.int4)
          for _ in range(2))
  ct.run_and_compare(text, [x, y])


def test_bf16_roundtrip_exact():
  text = """
HloModule m
ENTRY e {
  x = bf16[16] parameter(0)
  ROOT n = bf16[16] negate(x)
}"""
  x = np.linspace(-3, 3, 16).astype(ml_dtypes.bfloat16)
  _, (out,) = ct.run_and_compare(text, [x])
  np.testing.assert_array_equal(out, -x)


def test_transposed_reads_use_tiles():
  # Ragged tile edges (70 = 2*32 + 6, 130 = 4*32 + 2) and a batch dim.
  text = """
HloModule m
ENTRY e {
  x = f32[3,130,70] parameter(0)
  y = f32[3,70,130] parameter(1)
  t = f32[3,70,130] transpose(x), dimensions={0,2,1}
  ROOT a = f32[3,70,130] add(t, y)
}"""
  exe, _ = ct.run_and_compare(text)
  (kernel,) = [t for t in exe.plan["thunks"] if t["kind"] == "kernel"]
  assert kernel["extent"] == 3 * 3 * 5  # one unit per 32x32 tile


# -- shared values: emission linear in the fusion's size --------------------------


def _chain_fusion_text(n: int, kind: str) -> str:
  """A loop fusion whose body is a chain of n steps in which every value
  is used twice by the next step:
    "square":   x' = x * x + x on u32[] (scalar operands get a fresh index
                per use), broadcast to u32[16] at the end;
    "reshape":  x' = a * b + a where a and b are two reshapes of x,
                alternating between u32[16] and u32[4,4] (a reshape builds
                a fresh index per use);
    "threefry": x' = x + ((x << 13) | (x >> 19)) ^ x on u32[16], the shift
                amounts broadcast scalar constants (a hash round)."""
  body = []
  if kind == "square":
    body.append("  x0 = u32[] parameter(0)")
    for k in range(n):
      body.append(f"  m{k} = u32[] multiply(x{k}, x{k})")
      body.append(f"  x{k + 1} = u32[] add(m{k}, x{k})")
    body.append(f"  ROOT r = u32[16] broadcast(x{n}), dimensions={{}}")
    param = "u32[]"
  elif kind == "reshape":
    body.append("  x0 = u32[16] parameter(0)")
    for k in range(n):
      dims = "u32[4,4]" if k % 2 == 0 else "u32[16]"
      body.append(f"  ra{k} = {dims} reshape(x{k})")
      body.append(f"  rb{k} = {dims} reshape(x{k})")
      body.append(f"  m{k} = {dims} multiply(ra{k}, rb{k})")
      body.append(f"  x{k + 1} = {dims} add(m{k}, ra{k})")
    last = "u32[4,4]" if n % 2 else "u32[16]"
    body.append(f"  ROOT r = u32[16] reshape(x{n})" if last != "u32[16]"
                else f"  ROOT r = u32[16] copy(x{n})")
    param = "u32[16]"
  else:
    body.append("  x0 = u32[16] parameter(0)")
    body.append("  c13 = u32[] constant(13)")
    body.append("  c19 = u32[] constant(19)")
    for k in range(n):
      body.append(f"  ca{k} = u32[16] broadcast(c13), dimensions={{}}")
      body.append(f"  cb{k} = u32[16] broadcast(c19), dimensions={{}}")
      body.append(f"  l{k} = u32[16] shift-left(x{k}, ca{k})")
      body.append(f"  r{k} = u32[16] shift-right-logical(x{k}, cb{k})")
      body.append(f"  o{k} = u32[16] or(l{k}, r{k})")
      body.append(f"  e{k} = u32[16] xor(o{k}, x{k})")
      body.append(f"  x{k + 1} = u32[16] add(x{k}, e{k})")
    body.append(f"  ROOT r = u32[16] copy(x{n})")
    param = "u32[16]"
  return "\n".join(
      ["HloModule m", "fused {"] + body + ["}", "ENTRY e {",
       f"  p = {param} parameter(0)",
       "  ROOT f = u32[16] fusion(p), kind=kLoop, calls=fused", "}"])


def _numpy_chain(x, n: int, kind: str):
  x = np.array(x, np.uint32)
  with np.errstate(over="ignore"):
    for _ in range(n):
      if kind == "threefry":
        rot = (x << np.uint32(13)) | (x >> np.uint32(19))
        x = x + (rot ^ x)
      else:
        x = x * x + x
  return np.broadcast_to(x, (16,)).reshape(16)


def _ir_instruction_count(module) -> int:
  return sum(len(bb.instructions) for fn in module.functions
             for bb in fn.blocks)


@pytest.mark.parametrize("kind", ["square", "reshape", "threefry"])
def test_shared_values_emit_once(monkeypatch, kind):
  """Emitting a 40-step chain of doubly used values generates each
  instruction a bounded number of times and emits IR linear in the chain's
  length (a per-use regeneration would be 2^40 work)."""
  from llvmlite import ir  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import elemental_generator as eg  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import fusion_emitter  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import kernel_api  # pylint: disable=g-import-not-at-top

  def emit(n):
    module = ct.parse(_chain_fusion_text(n, kind))
    fusion = module.entry_computation.root_instruction
    size = len(list(fusion.fused_computation.instructions))
    budget = 4 * size
    calls = [0]

    def counted(fn):
      def wrapper(self, instr, index):
        calls[0] += 1
        if calls[0] > budget:
          raise AssertionError(
              f"{calls[0]} element generations for a fusion of {size} "
              "instructions")
        return fn(self, instr, index)
      return wrapper

    monkeypatch.setattr(eg.ElementGenerator, "_generate",
                        counted(eg.ElementGenerator._generate))
    monkeypatch.setattr(eg.ElementGenerator, "_elementwise",
                        counted(eg.ElementGenerator._elementwise))
    ctx = kernel_api.KernelContext(ir.Module(name="m"))
    fusion_emitter.emit_fusion(ctx, fusion)
    monkeypatch.undo()
    return size, _ir_instruction_count(ctx.module)

  size20, ir20 = emit(20)
  size40, ir40 = emit(40)
  # Linear: doubling the chain adds about as much IR as the first 20 steps.
  assert ir40 <= 12 * size40, (ir40, size40)
  assert ir40 - ir20 <= 1.25 * ir20, (ir20, ir40)


@pytest.mark.parametrize("kind", ["square", "reshape", "threefry"])
def test_shared_value_chain_matches_numpy(kind):
  n = 40
  text = _chain_fusion_text(n, kind)
  x = (np.uint32(7) if kind == "square" else
       np.arange(16, dtype=np.uint32) * np.uint32(2654435761))
  _, (out,) = ct.run_and_compare(text, [np.asarray(x, np.uint32)])
  np.testing.assert_array_equal(out, _numpy_chain(x, n, kind))


def _emit_chain(n, kind):
  from llvmlite import ir  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import fusion_emitter  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import kernel_api  # pylint: disable=g-import-not-at-top
  module = ct.parse(_chain_fusion_text(n, kind))
  ctx = kernel_api.KernelContext(ir.Module(name="m"))
  return fusion_emitter.emit_fusion(ctx, module.entry_computation.root_instruction)


def test_long_elementwise_chain_emits_without_deep_recursion():
  # 3000 steps (12000 instructions): elementwise chains are emitted from an
  # explicit stack, so the default recursion limit is no obstacle.
  (spec,) = _emit_chain(3000, "square")
  assert spec.name == "f"


def test_too_deep_chain_is_resource_exhausted_naming_the_fusion():
  # Every step of this chain changes the index (a reshape), which the
  # generator follows recursively: past the recursion limit the error names
  # the fusion instead of escaping as a RecursionError.
  import support  # pylint: disable=g-import-not-at-top
  with pytest.raises(support.ResourceExhaustedError,
                     match=r"fusion f \(12002 fused instructions\).*recursion"):
    _emit_chain(3000, "reshape")


@pytest.mark.parametrize("exc", [
    SystemError("error return without exception set"), MemoryError()])
def test_interpreter_failure_is_resource_exhausted_naming_the_fusion(
    monkeypatch, exc):
  import support  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import elemental_generator as eg  # pylint: disable=g-import-not-at-top

  def fail(self, instr, index):
    raise exc

  monkeypatch.setattr(eg.ElementGenerator, "_generate", fail)
  with pytest.raises(support.ResourceExhaustedError,
                     match=r"while emitting fusion f \(82 fused"):
    _emit_chain(20, "reshape")


def test_roll_chain_compiles_and_matches_numpy():
  # x_{k+1} = roll(x_k, 8) + x_k: each step reads x_k at three indices, so
  # one fusion of all 16 steps would generate x_0 3^16 times; the fusion
  # pass splits the chain where generation counts pass its allowance.
  n = 16
  lines = ["HloModule m", "ENTRY e {", "  x0 = u32[16] parameter(0)"]
  for k in range(n):
    lines += [f"  lo{k} = u32[8] slice(x{k}), slice={{[0:8]}}",
              f"  hi{k} = u32[8] slice(x{k}), slice={{[8:16]}}",
              f"  c{k} = u32[16] concatenate(hi{k}, lo{k}), dimensions={{0}}",
              f"  x{k + 1} = u32[16] add(c{k}, x{k})"]
  lines[-1] = lines[-1].replace(f"  x{n} =", f"  ROOT x{n} =")
  x = np.arange(16, dtype=np.uint32) * np.uint32(2654435761)
  _, (out,) = ct.run_and_compare("\n".join(lines + ["}"]), [x])
  want = x.copy()
  with np.errstate(over="ignore"):
    for _ in range(n):
      want = np.roll(want, 8) + want
  np.testing.assert_array_equal(out, want)


def test_multiply_then_subtract_may_fuse_into_an_fma():
  """A program's multiply and add / subtract may contract into one FMA, as
  on XLA CPU: with c = 1 + 2^-30 and d = 1 - 2^-30, c * d rounds to 1.0,
  so c * d - 1 is 0 with two roundings and -2^-60 (exact) with one. JAX's
  incomplete beta function needs the exact residual to stop iterating."""
  from xla.service.cpu import jit  # pylint: disable=g-import-not-at-top
  if "+fma" not in jit.host_target_info().features.split(","):
    pytest.skip("the host has no FMA instruction")
  text = """HloModule m
ENTRY e {
  c = f64[8] parameter(0)
  d = f64[8] parameter(1)
  one = f64[] constant(1)
  ones = f64[8] broadcast(one), dimensions={}
  p = f64[8] multiply(c, d)
  ROOT r = f64[8] subtract(p, ones)
}"""
  _, exe = ct.compile_text(text)
  c = np.full(8, 1 + 2.0**-30)
  d = np.full(8, 1 - 2.0**-30)
  got, = exe.execute([c, d])
  np.testing.assert_array_equal(got, np.full(8, -2.0**-60))


def _solver_chain_text(n: int) -> str:
  """v_{k+1} = [v_k[1] * v_k[0], v_k[1] - v_k[0]]: the scalar arithmetic
  of a small solver, its two-element state rebuilt by a concatenate every
  step and read back through one-element slices."""
  body = ["  v0 = f64[2] parameter(0)"]
  for k in range(n):
    body += [f"  hi{k} = f64[1] slice(v{k}), slice={{[1:2]}}",
             f"  rh{k} = f64[] reshape(hi{k})",
             f"  lo{k} = f64[1] slice(v{k}), slice={{[0:1]}}",
             f"  rl{k} = f64[] reshape(lo{k})",
             f"  mul{k} = f64[] multiply(rh{k}, rl{k})",
             f"  dif{k} = f64[] subtract(rh{k}, rl{k})",
             f"  bmul{k} = f64[1] broadcast(mul{k}), dimensions={{}}",
             f"  bdif{k} = f64[1] broadcast(dif{k}), dimensions={{}}",
             f"  v{k + 1} = f64[2] concatenate(bmul{k}, bdif{k}), "
             "dimensions={0}"]
  body.append(f"  ROOT out = f64[2] add(v{n}, v0)")
  return "\n".join(
      ["HloModule m", "fused {"] + body + ["}", "ENTRY e {",
       "  p = f64[2] parameter(0)",
       "  ROOT f = f64[2] fusion(p), kind=kLoop, calls=fused", "}"])


def test_concatenate_chain_generates_each_value_a_bounded_number_of_times(
    monkeypatch):
  """Each concatenate piece is generated in a branch with a memo scope of
  its own. Reading a concatenate at a known position, or the one-element
  values its pieces share, must not regenerate the chain below once per
  piece and level (4^n generations for this chain before; an adaptive ODE
  solver's step took most of its compile emitting this)."""
  from llvmlite import ir  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import elemental_generator as eg  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import fusion_emitter  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import kernel_api  # pylint: disable=g-import-not-at-top
  module = ct.parse(_solver_chain_text(24))
  fusion = module.entry_computation.root_instruction
  size = len(list(fusion.fused_computation.instructions))
  calls = [0]

  def counted(fn):
    def wrapper(self, instr, index):
      calls[0] += 1
      if calls[0] > 4 * size:
        raise AssertionError(
            f"{calls[0]} element generations for a fusion of {size}")
      return fn(self, instr, index)
    return wrapper

  monkeypatch.setattr(eg.ElementGenerator, "_generate",
                      counted(eg.ElementGenerator._generate))
  monkeypatch.setattr(eg.ElementGenerator, "_elementwise",
                      counted(eg.ElementGenerator._elementwise))
  ctx = kernel_api.KernelContext(ir.Module(name="m"))
  fusion_emitter.emit_fusion(ctx, fusion)
  assert _ir_instruction_count(ctx.module) <= 12 * size


def test_concatenate_chain_matches_numpy():
  n = 12
  x = np.array([0.75, 1.25])
  _, (out,) = ct.run_and_compare(_solver_chain_text(n), [x])
  v = x.copy()
  for _ in range(n):
    v = np.array([v[1] * v[0], v[1] - v[0]])
  np.testing.assert_allclose(out, v + x, rtol=1e-15)


@pytest.mark.parametrize("dims,expect", [
    ([4, 64, 3], 1), ([4, 64], 1), ([64, 2, 2], 0), ([2, 2, 2, 2], -1),
    ([64, 2, 2, 2], -1), ([5], -1), ([3, 5], -1)])
def test_vector_dim(dims, expect):
  assert loop_kernels._vector_dim(dims) == expect


@pytest.mark.parametrize("through_reshape", [False, True])
def test_short_last_dimension_keeps_the_vectorized_loop_rolled(
    tmp_path, through_reshape):
  # A [4,3,64] -> [4,64,3] transpose (in the Cholesky workload, read
  # through a reshape). LLVM unrolls the loop over the last 3 elements and
  # vectorizes the loop over 64 with 3-way interleaved stores. When that
  # loop was unrolled as well, its 32 interleaves of 24 doubles took 330 ms
  # of code generation for a 768-element copy.
  from xla.service.cpu import cpu_compiler  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import jit  # pylint: disable=g-import-not-at-top
  if through_reshape:
    param, read = "f64[4,192]", "r = f64[4,3,64] reshape(x)"
  else:
    param, read = "f64[4,3,64]", "r = f64[4,3,64] copy(x)"
  text = f"""
HloModule m
ENTRY e {{
  x = {param} parameter(0)
  {read}
  ROOT t = f64[4,64,3] transpose(r), dimensions={{0,2,1}}
}}"""
  x = np.arange(4 * 192, dtype=np.float64).reshape(
      (4, 192) if through_reshape else (4, 3, 64))
  _, (out,) = ct.run_and_compare(text, [x])
  np.testing.assert_array_equal(out, x.reshape(4, 3, 64).transpose(0, 2, 1))
  cpu_compiler.compile(ct.parse(text), cpu_compiler.CpuCompileOptions(
      dump_to=str(tmp_path), input_key=f"short-last-rolled-{through_reshape}"))
  code = jit.optimized_text((tmp_path / "m.ir.ll").read_text())
  stores = re.findall(r"store <(\d+) x double>", code)
  assert stores, code  # still vectorized
  assert len(stores) <= 4, f"{len(stores)} vector stores"
