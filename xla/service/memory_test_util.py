"""HLO text snippets shared by the memory-planning tests."""

WHILE_LOOP = """HloModule w

body {
  p = (s32[], f32[100]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[100] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[100] negate(x)
  ROOT t = (s32[], f32[100]) tuple(i2, x2)
}

cond {
  p = (s32[], f32[100]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}

ENTRY e {
  p0 = f32[100] parameter(0)
  z = s32[] constant(0)
  xe = f32[100] negate(p0)
  init = (s32[], f32[100]) tuple(z, xe)
  w = (s32[], f32[100]) while(init), condition=cond, body=body
  g = f32[100] get-tuple-element(w), index=1
  ROOT r = f32[100] %ROOT_EXPR%
}
"""


def while_loop(root_expr: str = "negate(g)") -> str:
  return WHILE_LOOP.replace("%ROOT_EXPR%", root_expr)
