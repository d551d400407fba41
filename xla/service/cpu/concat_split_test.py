"""Loops split at concatenate pieces: kernels compared with the HLO
evaluator along each path that splits (inner loop, chunked dimension,
dimension above the chunked one, tiles, column and row reductions), the
plans chosen, and the vectorized piece loops."""

import re

import pytest

from xla.service.cpu import concat_split
from xla.service.cpu import cpu_testing as ct

_ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

_MAX_S32 = """
maxi {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT m = s32[] maximum(a, b)
}
"""

# name -> (HLO text, the dimension each split kernel is expected to split).
CASES = {
    # Last axis, three unequal pieces: a transposed one, a broadcast one;
    # two outputs of the loop's shape.
    "last_axis_transpose_broadcast": ("""
HloModule m
fc {
  a = f32[40,37] parameter(0)
  b = f32[5,40] parameter(1)
  c = f32[40] parameter(2)
  y = f32[40,61] parameter(3)
  bt = f32[40,5] transpose(b), dimensions={1,0}
  cb = f32[40,19] broadcast(c), dimensions={0}
  cat = f32[40,61] concatenate(a, bt, cb), dimensions={1}
  m = f32[40,61] multiply(cat, y)
  e = f32[40,61] exponential(y)
  ROOT t = (f32[40,61], f32[40,61], f32[40,61]) tuple(m, cat, e)
}
ENTRY e {
  a = f32[40,37] parameter(0)
  b = f32[5,40] parameter(1)
  c = f32[40] parameter(2)
  y = f32[40,61] parameter(3)
  ROOT f = (f32[40,61], f32[40,61], f32[40,61]) fusion(a, b, c, y), kind=kLoop, calls=fc
}""", [1]),
    # The first axis is the chunked one (18300 elements, chunks of 269
    # rows): pieces of 100, 150, 50 rows meet the chunk boundaries.
    "chunked_axis": ("""
HloModule m
fc {
  a = f32[100,61] parameter(0)
  b = f32[150,61] parameter(1)
  c = f32[61] parameter(2)
  cb = f32[50,61] broadcast(c), dimensions={1}
  cat = f32[300,61] concatenate(a, b, cb), dimensions={0}
  ROOT n = f32[300,61] negate(cat)
}
ENTRY e {
  a = f32[100,61] parameter(0)
  b = f32[150,61] parameter(1)
  c = f32[61] parameter(2)
  ROOT f = f32[300,61] fusion(a, b, c), kind=kLoop, calls=fc
}""", [0]),
    # An axis above the chunked one (60000 elements, chunks of the second
    # axis): each piece gets its own copy of the loop nest; a multi-output
    # fusion with an output that does not read the concatenate.
    "outer_axis_branches": ("""
HloModule m
fc {
  a = f32[1,200,100] parameter(0)
  b = f32[2,200,100] parameter(1)
  x = f32[3,200,100] parameter(2)
  cat = f32[3,200,100] concatenate(a, b), dimensions={0}
  s = f32[3,200,100] subtract(cat, x)
  sq = f32[3,200,100] multiply(x, x)
  ROOT t = (f32[3,200,100], f32[3,200,100]) tuple(s, sq)
}
ENTRY e {
  a = f32[1,200,100] parameter(0)
  b = f32[2,200,100] parameter(1)
  x = f32[3,200,100] parameter(2)
  ROOT f = (f32[3,200,100], f32[3,200,100]) fusion(a, b, x), kind=kLoop, calls=fc
}""", [0]),
    # Middle axis of a rank-3 loop, four pieces (one empty), integers.
    "middle_axis_four_pieces": ("""
HloModule m
fc {
  a = s32[4,3,9] parameter(0)
  b = s32[4,0,9] parameter(1)
  c = s32[4,7,9] parameter(2)
  d = s32[9,4] parameter(3)
  dt = s32[4,9] transpose(d), dimensions={1,0}
  db = s32[4,2,9] broadcast(dt), dimensions={0,2}
  cat = s32[4,12,9] concatenate(a, b, c, db), dimensions={1}
  ROOT m = s32[4,12,9] multiply(cat, cat)
}
ENTRY e {
  a = s32[4,3,9] parameter(0)
  b = s32[4,0,9] parameter(1)
  c = s32[4,7,9] parameter(2)
  d = s32[9,4] parameter(3)
  ROOT f = s32[4,12,9] fusion(a, b, c, d), kind=kLoop, calls=fc
}""", [1]),
    # Tiles (a transposed read of a 96x80 output): the pieces split the
    # tiles' columns.
    "tiled_columns": ("""
HloModule m
fc {
  a = f32[96,30] parameter(0)
  x = f32[50,96] parameter(1)
  xt = f32[96,50] transpose(x), dimensions={1,0}
  cat = f32[96,80] concatenate(a, xt), dimensions={1}
  ROOT n = f32[96,80] negate(cat)
}
ENTRY e {
  a = f32[96,30] parameter(0)
  x = f32[50,96] parameter(1)
  ROOT f = f32[96,80] fusion(a, x), kind=kLoop, calls=fc
}""", [1]),
    # Tiles split along their rows, and along a dimension above them.
    "tiled_rows": ("""
HloModule m
fc {
  a = f32[70,80] parameter(0)
  x = f32[80,30] parameter(1)
  xt = f32[30,80] transpose(x), dimensions={1,0}
  cat = f32[100,80] concatenate(a, xt), dimensions={0}
  ROOT n = f32[100,80] negate(cat)
}
ENTRY e {
  a = f32[70,80] parameter(0)
  x = f32[80,30] parameter(1)
  ROOT f = f32[100,80] fusion(a, x), kind=kLoop, calls=fc
}""", [0]),
    "tiled_outer": ("""
HloModule m
fc {
  a = f32[1,64,70] parameter(0)
  x = f32[2,70,64] parameter(1)
  xt = f32[2,64,70] transpose(x), dimensions={0,2,1}
  cat = f32[3,64,70] concatenate(a, xt), dimensions={0}
  ROOT n = f32[3,64,70] negate(cat)
}
ENTRY e {
  a = f32[1,64,70] parameter(0)
  x = f32[2,70,64] parameter(1)
  ROOT f = f32[3,64,70] fusion(a, x), kind=kLoop, calls=fc
}""", [0]),
    # The attention QKV gradient: transposed heads concatenated along the
    # last axis, reshaped, summed over rows (a column reduction) and
    # stored whole.
    "qkv_column_reduction": ("""
HloModule m
""" + _ADD + """
fc {
  z = f32[] parameter(0)
  q = f32[8,32,32] parameter(1)
  k = f32[8,32,32] parameter(2)
  v = f32[8,32,32] parameter(3)
  qr = f32[2,4,32,32] reshape(q)
  qt = f32[2,32,4,32] transpose(qr), dimensions={0,2,1,3}
  q2 = f32[2,32,128] reshape(qt)
  kr = f32[2,4,32,32] reshape(k)
  kt = f32[2,32,4,32] transpose(kr), dimensions={0,3,1,2}
  k2 = f32[2,32,128] reshape(kt)
  vr = f32[2,4,32,32] reshape(v)
  vt = f32[2,32,4,32] transpose(vr), dimensions={0,2,1,3}
  v2 = f32[2,32,128] reshape(vt)
  cat = f32[2,32,384] concatenate(q2, k2, v2), dimensions={2}
  flat = f32[64,384] reshape(cat)
  red = f32[384] reduce(flat, z), dimensions={0}, to_apply=add
  ROOT t = (f32[384], f32[64,384]) tuple(red, flat)
}
ENTRY e {
  z = f32[] constant(0)
  q = f32[8,32,32] parameter(0)
  k = f32[8,32,32] parameter(1)
  v = f32[8,32,32] parameter(2)
  ROOT f = (f32[384], f32[64,384]) fusion(z, q, k, v), kind=kInput, calls=fc
}""", [1]),
    # A column reduction whose concatenate runs along the reduced rows.
    "column_reduction_along_rows": ("""
HloModule m
""" + _ADD + """
fc {
  z = f32[] parameter(0)
  a = f32[20,48] parameter(1)
  b = f32[48,13] parameter(2)
  bt = f32[13,48] transpose(b), dimensions={1,0}
  cat = f32[33,48] concatenate(a, bt), dimensions={0}
  e = f32[33,48] exponential(cat)
  red = f32[48] reduce(e, z), dimensions={0}, to_apply=add
  ROOT t = (f32[48], f32[33,48]) tuple(red, e)
}
ENTRY e {
  z = f32[] constant(0)
  a = f32[20,48] parameter(0)
  b = f32[48,13] parameter(1)
  ROOT f = (f32[48], f32[33,48]) fusion(z, a, b), kind=kInput, calls=fc
}""", [0]),
    # A column reduction over the middle axis, concatenated along the
    # first (kept, iterated per unit) one.
    "column_reduction_kept_outer": ("""
HloModule m
""" + _ADD + """
fc {
  z = f32[] parameter(0)
  a = f32[2,10,24] parameter(1)
  b = f32[24] parameter(2)
  bb = f32[3,10,24] broadcast(b), dimensions={2}
  cat = f32[5,10,24] concatenate(a, bb), dimensions={0}
  ROOT red = f32[5,24] reduce(cat, z), dimensions={1}, to_apply=add
}
ENTRY e {
  z = f32[] constant(0)
  a = f32[2,10,24] parameter(0)
  b = f32[24] parameter(1)
  ROOT f = f32[5,24] fusion(z, a, b), kind=kInput, calls=fc
}""", [0]),
    # Row reductions over the concatenated axis: with vector tiles (384
    # = 6 tiles of 64) and an extra output, and element by element (61).
    "row_reduction_tiles": ("""
HloModule m
""" + _ADD + """
fc {
  z = f32[] parameter(0)
  a = f32[16,100] parameter(1)
  b = f32[60,16] parameter(2)
  c = f32[16,224] parameter(3)
  bt = f32[16,60] transpose(b), dimensions={1,0}
  cat = f32[16,384] concatenate(a, bt, c), dimensions={1}
  e = f32[16,384] exponential(cat)
  red = f32[16] reduce(e, z), dimensions={1}, to_apply=add
  ROOT t = (f32[16], f32[16,384]) tuple(red, e)
}
ENTRY e {
  z = f32[] constant(0)
  a = f32[16,100] parameter(0)
  b = f32[60,16] parameter(1)
  c = f32[16,224] parameter(2)
  ROOT f = (f32[16], f32[16,384]) fusion(z, a, b, c), kind=kInput, calls=fc
}""", [1]),
    "row_reduction_elements": ("""
HloModule m
""" + _MAX_S32 + """
fc {
  z = s32[] parameter(0)
  a = s32[7,40] parameter(1)
  b = s32[7,21] parameter(2)
  cat = s32[7,61] concatenate(a, b), dimensions={1}
  ROOT red = s32[7] reduce(cat, z), dimensions={1}, to_apply=maxi
}
ENTRY e {
  z = s32[] constant(-1000)
  a = s32[7,40] parameter(0)
  b = s32[7,21] parameter(1)
  ROOT f = s32[7] fusion(z, a, b), kind=kInput, calls=fc
}""", [1]),
    # A concatenate inside a piece of another, a slice of a concatenate
    # (its pieces shift by the slice start) and a reshape that keeps the
    # axis.
    "nested_sliced_reshaped": ("""
HloModule m
fc {
  a = f32[6,5,7] parameter(0)
  b = f32[6,5,3] parameter(1)
  c = f32[6,5,11] parameter(2)
  ab = f32[6,5,10] concatenate(a, b), dimensions={2}
  abc = f32[6,5,21] concatenate(ab, c), dimensions={2}
  s = f32[6,5,17] slice(abc), slice={[0:6], [0:5], [2:19]}
  r = f32[30,17] reshape(s)
  ROOT n = f32[30,17] negate(r)
}
ENTRY e {
  a = f32[6,5,7] parameter(0)
  b = f32[6,5,3] parameter(1)
  c = f32[6,5,11] parameter(2)
  ROOT f = f32[30,17] fusion(a, b, c), kind=kLoop, calls=fc
}""", [1]),
}

# jnp.stack of an RK4 stage: the first stage's concatenate is read along
# the loop (by the root) and also, sliced to scalars, at fixed positions
# by the second stage's pieces. It must keep its branches; the second
# stage's is pinned.
CASES["stack_of_sliced_stage"] = ("""
HloModule m
fc {
  y = f64[2] parameter(0)
  h = f64[] parameter(1)
  y0 = f64[1] slice(y), slice={[0:1]}
  y1 = f64[1] slice(y), slice={[1:2]}
  r0 = f64[] reshape(y0)
  r1 = f64[] reshape(y1)
  sn = f64[] sine(r0)
  b0 = f64[1] broadcast(r1), dimensions={}
  b1 = f64[1] broadcast(sn), dimensions={}
  k1 = f64[2] concatenate(b0, b1), dimensions={0}
  hb = f64[2] broadcast(h), dimensions={}
  m = f64[2] multiply(hb, k1)
  y2 = f64[2] add(y, m)
  z0 = f64[1] slice(y2), slice={[0:1]}
  z1 = f64[1] slice(y2), slice={[1:2]}
  q0 = f64[] reshape(z0)
  q1 = f64[] reshape(z1)
  c0 = f64[1] broadcast(q1), dimensions={}
  c1 = f64[1] broadcast(q0), dimensions={}
  k2 = f64[2] concatenate(c0, c1), dimensions={0}
  ROOT o = f64[2] add(k1, k2)
}
ENTRY e {
  y = f64[2] parameter(0)
  h = f64[] parameter(1)
  ROOT f = f64[2] fusion(y, h), kind=kLoop, calls=fc
}""", [0])


# Fusions whose concatenates must keep their branches (the position along
# the axis is not the loop's on every path), computed right all the same.
UNSPLIT = {
    # Read at two positions: straight and reversed.
    "reversed_too": """
HloModule m
fc {
  a = f32[8,5] parameter(0)
  b = f32[8,9] parameter(1)
  cat = f32[8,14] concatenate(a, b), dimensions={1}
  r = f32[8,14] reverse(cat), dimensions={1}
  ROOT s = f32[8,14] add(cat, r)
}
ENTRY e {
  a = f32[8,5] parameter(0)
  b = f32[8,9] parameter(1)
  ROOT f = f32[8,14] fusion(a, b), kind=kLoop, calls=fc
}""",
    # Through a pad (clamped positions) and a broadcast along the axis.
    "padded_and_broadcast": """
HloModule m
fc {
  a = f32[3] parameter(0)
  b = f32[4] parameter(1)
  cat = f32[7] concatenate(a, b), dimensions={0}
  z = f32[] constant(0)
  p = f32[11] pad(cat, z), padding=2_2
  pb = f32[6,11] broadcast(p), dimensions={1}
  cb = f32[6,7] broadcast(cat), dimensions={1}
  q = f32[7,6] transpose(cb), dimensions={1,0}
  qs = f32[6,6] slice(q), slice={[0:6], [0:6]}
  qp = f32[6,11] pad(qs, z), padding=0_0x0_5
  ROOT s = f32[6,11] add(pb, qp)
}
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[4] parameter(1)
  ROOT f = f32[6,11] fusion(a, b), kind=kLoop, calls=fc
}""",
}


@pytest.fixture
def plans(monkeypatch):
  """The split plans chosen while compiling (None where none)."""
  seen = []
  real = concat_split.plan

  def recorded(*a, **kw):
    p = real(*a, **kw)
    seen.append(p)
    return p

  monkeypatch.setattr(concat_split, "plan", recorded)
  return seen


@pytest.mark.parametrize("name", sorted(CASES))
def test_split_kernels_match_evaluator(name, plans):
  text, dims = CASES[name]
  ct.run_and_compare(text, rtol=1e-5, atol=1e-5)
  assert [p.dim for p in plans if p is not None] == dims, plans


@pytest.mark.parametrize("name", sorted(UNSPLIT))
def test_unsplit_concatenates_match_evaluator(name, plans):
  ct.run_and_compare(UNSPLIT[name])
  assert not [p for p in plans if p is not None], plans


def test_segments_and_pins():
  module = ct.parse(CASES["nested_sliced_reshaped"][0])
  comp = module.entry_computation.root_instruction.fused_computation
  root = comp.root_instruction
  by_name = {i.name: i for i in comp.instructions}
  split = concat_split.plan([root], (30, 17),
                            lambda i: i.opcode.value == "parameter")
  assert split.dim == 1
  # Slice start 2: `ab` holds positions [0, 8) of the output (pieces a:
  # [0, 5), b: [5, 8)), `c` [8, 17).
  got = [(s.lo, s.hi, sorted((c.name, k) for c, k in s.pins))
         for s in split.segments]
  assert got == [
      (0, 5, [("ab", 0), ("abc", 0)]),
      (5, 8, [("ab", 1), ("abc", 0)]),
      (8, 17, [("abc", 1)]),
  ], got
  assert by_name["abc"].opcode.value == "concatenate"


def test_too_many_pieces_keep_branches(plans):
  n = concat_split.MAX_SEGMENTS + 1
  params = "\n".join(f"  p{k} = f32[4,{k + 1}] parameter({k})"
                     for k in range(n))
  width = sum(k + 1 for k in range(n))
  names = ", ".join(f"p{k}" for k in range(n))
  text = f"""
HloModule m
ENTRY e {{
{params}
  cat = f32[4,{width}] concatenate({names}), dimensions={{1}}
  ROOT n = f32[4,{width}] negate(cat)
}}"""
  ct.run_and_compare(text)
  assert not [p for p in plans if p is not None], plans


def _kernel_code(tmp_path, text, key):
  from xla.service.cpu import cpu_compiler  # pylint: disable=g-import-not-at-top
  from xla.service.cpu import jit  # pylint: disable=g-import-not-at-top
  cpu_compiler.compile(ct.parse(text), cpu_compiler.CpuCompileOptions(
      dump_to=str(tmp_path), input_key=key))
  return jit.optimized_text((tmp_path / "m.ir.ll").read_text())


def test_piece_loops_are_vectorized(tmp_path):
  # Each piece's loop reads its operand with vector loads. With one loop
  # choosing the piece per element, LLVM gathered through a select of
  # the three addresses (4.5x slower on this fusion).
  text = """
HloModule m
ENTRY e {
  a = f32[128,100] parameter(0)
  b = f32[128,60] parameter(1)
  c = f32[128,224] parameter(2)
  cat = f32[128,384] concatenate(a, b, c), dimensions={1}
  two = f32[] constant(2)
  tb = f32[128,384] broadcast(two), dimensions={}
  ROOT m = f32[128,384] multiply(cat, tb)
}"""
  code = _kernel_code(tmp_path, text, "concat-split-vectorize")
  assert "masked.gather" not in code, code
  # The kernel's arguments: a, b, c, then the result; every operand is
  # read with vector loads.
  loads = re.findall(r"= load <\d+ x float>, ptr %(\S+),", code)
  assert len(loads) >= 3, code
  assert len(re.findall(r"fmul [^\n]*<\d+ x float>", code)) >= 3, code


def test_qkv_gradient_pieces_are_vectorized(tmp_path):
  # The QKV bias/weight gradient of attention (case qkv_column_reduction):
  # each piece's loop is vectorized (the transposed heads with gathers);
  # with the per-element choice the loop stayed scalar.
  code = _kernel_code(tmp_path, CASES["qkv_column_reduction"][0],
                      "concat-split-qkv")
  assert len(re.findall(r"fadd [^\n]*<\d+ x float>", code)) >= 3, code
  assert "concat.take" not in code, code


def _shared_chain_text(pieces: int, chain: int) -> str:
  """A concatenate of `pieces` parameters plus a `chain` of elementwise
  ops on another parameter that every element computes."""
  lines = [f"  p{k} = f32[8,{k + 2}] parameter({k})" for k in range(pieces)]
  width = sum(k + 2 for k in range(pieces))
  names = ", ".join(f"p{k}" for k in range(pieces))
  lines.append(f"  x = f32[8,{width}] parameter({pieces})")
  lines.append(f"  cat = f32[8,{width}] concatenate({names}), "
               "dimensions={1}")
  prev = "x"
  for k in range(chain):
    op = ("sine", "cosine", "negate")[k % 3]
    lines.append(f"  c{k} = f32[8,{width}] {op}({prev})")
    prev = f"c{k}"
  lines.append(f"  ROOT r = f32[8,{width}] add(cat, {prev})")
  body = "\n".join(lines)
  return f"HloModule m\nENTRY e {{\n{body}\n}}"


def test_split_bounds_the_code_it_duplicates(plans):
  # Work outside the pieces is emitted once per piece: a short chain is
  # split, a long one beside many pieces is not (and is right either way).
  ct.run_and_compare(_shared_chain_text(3, 4), rtol=1e-5, atol=1e-5)
  assert [p.dim for p in plans if p is not None] == [1], plans
  plans.clear()
  ct.run_and_compare(_shared_chain_text(12, 60), rtol=1e-5, atol=1e-5)
  assert not [p for p in plans if p is not None], plans
